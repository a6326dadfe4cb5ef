/**
 * A hostile kiln.json through the built CLI: refused before anything runs, as one line naming the field on stderr and
 * exit 2 (a config error), never a hang, a stack trace or a silently dropped process. The NUL byte in `env` used to
 * hang kiln for good (the native spawner dropped the request it could not read, and never answered it).
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, type Scope } from "effect"
import { spawn, spawnSync } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"
import * as ConfigFile from "../../src/programs/kiln/configFile.js"
import { failsWith, runCli } from "../utils/cliRun.js"
import { cli } from "../utils/stack.js"
import { tempDir } from "../utils/temp.js"

interface Result {
  readonly code: number | null
  readonly signal: NodeJS.Signals | null
  readonly stderr: string
}

/** `kiln run` in a fresh workspace holding `a.txt` and `config` (a string is written as it is), to its end. */
const runWith = (
  config: unknown,
  args: ReadonlyArray<string> = []
): Effect.Effect<Result, never, Scope.Scope> =>
  Effect.gen(function*() {
    const root = yield* tempDir("kiln-hostile-config-")
    const ws = path.join(root, "ws")
    fs.mkdirSync(ws)
    fs.mkdirSync(path.join(root, "sandboxes"))
    fs.writeFileSync(path.join(ws, "a.txt"), "a\n")
    fs.writeFileSync(path.join(ws, "kiln.json"), typeof config === "string" ? config : JSON.stringify(config))
    return yield* Effect.scoped(Effect.gen(function*() {
      const child = yield* Effect.acquireRelease(
        Effect.sync(() =>
          spawn(process.execPath, [cli, "run", "--progress", "plain", ...args], {
            cwd: ws,
            stdio: ["ignore", "ignore", "pipe"],
            env: {
              ...process.env,
              HOME: root,
              KILN_STORE_DIR: path.join(root, "store"),
              KILN_SANDBOX_ROOT: path.join(root, "sandboxes"),
              KILN_NAMED_CACHES_DIR: path.join(root, "named")
            }
          })
        ),
        // A hung kiln fails its test (by the test's timeout), and is killed then.
        (child) => Effect.sync(() => child.exitCode === null && child.signalCode === null && child.kill("SIGKILL"))
      )
      let stderr = ""
      child.stderr!.on("data", (d) => (stderr += d))
      return yield* Effect.async<Result>((resume) => {
        child.once("close", (code, signal) => resume(Effect.succeed({ code, signal, stderr })))
      })
    }))
  })

/**
 * Exit 2 by itself, and exactly `lines` on stderr (every error of the file, each once its `:LINE:COL` is taken out),
 * but for the file's line each quotes and the caret under the place (indented).
 */
const refusedWith = (r: Result, ...lines: ReadonlyArray<string>) => {
  assert.isNull(r.signal, r.stderr)
  assert.strictEqual(r.code, 2, r.stderr)
  const own = r.stderr.split("\n").filter((l) => l !== "" && !l.startsWith("  "))
  assert.deepStrictEqual(own.map((l) => l.replace(/^kiln: kiln\.json:\d+:\d+: /, "kiln: kiln.json: ")), lines)
}

const process_ = (fields: Record<string, unknown>) => ({
  argv: ["/bin/sh", "-c", "env > e.txt"],
  inputs: ["a.txt"],
  outputs: ["e.txt"],
  ...fields
})

describe("kiln run, hostile kiln.json", () => {
  it.scoped("a NUL byte in env (M5): exit 2 and the field, where it used to hang", () =>
    Effect.gen(function*() {
      // The red team's kiln.json, byte for byte.
      const text =
        `{"processes":{"p":{"argv":["/bin/sh","-c","env > e.txt"],"inputs":["a.txt"],"outputs":["e.txt"],"env":{"A":"x\\u0000y"}}}}`
      refusedWith(
        yield* runWith(text),
        "kiln: kiln.json: processes.p.env.A: holds a NUL byte, which no variable's value can"
      )
    }), { timeout: 30_000 })

  it.scoped("a NUL byte in argv: exit 2 and the field", () =>
    Effect.gen(function*() {
      refusedWith(
        yield* runWith({ processes: { p: process_({ argv: ["/bin/echo", "a\u0000b"] }) } }),
        "kiln: kiln.json: processes.p.argv[1]: holds a NUL byte, which no argument can"
      )
    }), { timeout: 30_000 })

  it.scoped(
    "an env name with =, writableInputs outside, a named cache outside, output '.': exit 2 each",
    () =>
      Effect.gen(function*() {
        refusedWith(
          yield* runWith({ processes: { p: process_({ env: { "A=B": "c" } }) } }),
          "kiln: kiln.json: processes.p.env[\"A=B\"]: \"A=B\" is not a variable name: it must be non-empty, without = or a control character"
        )
        refusedWith(
          yield* runWith({ processes: { p: process_({ writableInputs: ["../../etc", "/etc/passwd"] }) } }),
          "kiln: kiln.json: processes.p.writableInputs[0]: \"../../etc\" must be a relative path inside the workspace",
          // Every error of the file in one run.
          "kiln: kiln.json: processes.p.writableInputs[1]: \"/etc/passwd\" must be a relative path inside the workspace"
        )
        refusedWith(
          yield* runWith({ processes: { p: process_({ namedCaches: { c: "/tmp/x" } }) } }),
          "kiln: kiln.json: processes.p.namedCaches.c: \"/tmp/x\" must be a relative path inside the sandbox, below its root"
        )
        refusedWith(
          yield* runWith({ processes: { p: process_({ outputs: ["."] }) } }),
          "kiln: kiln.json: processes.p.outputs[0]: \".\" is the working directory itself, not a file: a directory output ends with /"
        )
      }),
    { timeout: 60_000 }
  )

  it.scoped(
    "deps naming toString, a process named __proto__, `kiln run toString`: exit 2, no TypeError",
    () =>
      Effect.gen(function*() {
        refusedWith(
          yield* runWith({ processes: { p: process_({ deps: ["toString"] }) } }),
          "kiln: kiln.json: processes.p.deps[0]: unknown process \"toString\""
        )
        refusedWith(
          yield* runWith(`{"processes":{"__proto__":{"argv":["/bin/true"]}}}`),
          "kiln: kiln.json: processes.__proto__: \"__proto__\" is not a name kiln takes (JavaScript objects reserve it): rename it"
        )
        refusedWith(
          yield* runWith({ processes: { p: process_({}) } }, ["toString"]),
          "kiln: kiln.json: unknown process \"toString\""
        )
      }),
    { timeout: 60_000 }
  )
})

describe("a kiln.json found by looking up", () => {
  /** A shared directory (sticky, as /tmp) holding `config`, and one's own directory below it without one. */
  const shared = (config: unknown) =>
    Effect.gen(function*() {
      const root = yield* tempDir("kiln-foreign-config-")
      const top = path.join(root, "shared")
      fs.mkdirSync(top, { mode: 0o1777 })
      fs.chmodSync(top, 0o1777)
      // What its process leaves when it runs: its output, written back beside it.
      const marker = path.join(top, "ran.txt")
      fs.writeFileSync(path.join(top, "kiln.json"), JSON.stringify(config))
      const mine = path.join(top, "mine")
      fs.mkdirSync(mine)
      const env = {
        ...process.env,
        HOME: root,
        KILN_STORE_DIR: path.join(root, "store"),
        KILN_SANDBOX_ROOT: path.join(root, "sandboxes"),
        KILN_NAMED_CACHES_DIR: path.join(root, "named")
      }
      return { top, mine, marker, env }
    })
  const marks = {
    processes: {
      p: { argv: ["/bin/sh", "-c", "echo ran > ran.txt"], env: { PATH: "/usr/bin:/bin" }, outputs: ["ran.txt"] }
    }
  }

  it.scoped.skipIf(process.geteuid?.() !== 0)(
    "another user's, in a shared directory above: refused (exit 2, naming it); named with --config, it is read",
    () =>
      Effect.gen(function*() {
        const s = yield* shared(marks)
        // Another user's file (nobody): only root can make one here.
        fs.chownSync(path.join(s.top, "kiln.json"), 65534, 65534)
        failsWith(
          yield* runCli(["run"], { cwd: s.mine, env: s.env }),
          2,
          new RegExp(
            `^kiln: ${s.top}/kiln\\.json: is owned by another user \\(uid 65534\\) and was found by looking up from ` +
              "the working directory: kiln reads another user's config only when it is named \\(--config\\)$"
          )
        )
        assert.isFalse(fs.existsSync(s.marker), "the foreign config's process ran")
        const named = yield* runCli(["run", "--config", path.join(s.top, "kiln.json")], { cwd: s.mine, env: s.env })
        assert.strictEqual(named.code, 0, named.stderr)
        assert.isTrue(fs.existsSync(s.marker))
      })
  )

  it.scoped.skipIf(process.geteuid?.() !== 0)(
    "in one process (a standby's runs): found by the walk it is refused, named afterwards it is read",
    () =>
      Effect.gen(function*() {
        const s = yield* shared(marks)
        const file = path.join(s.top, "kiln.json")
        fs.chownSync(file, 65534, 65534)
        const walked = ConfigFile.find(undefined, s.mine)
        assert.strictEqual(walked, file)
        assert.include((ConfigFile.readText(walked!) as { problem: string }).problem, "owned by another user")
        const named = ConfigFile.find(file, s.mine)
        assert.deepStrictEqual(ConfigFile.readText(named!), { text: fs.readFileSync(file, "utf8") })
      })
  )

  it.scoped("a FIFO named kiln.json is this directory's config, refused: the one above is not taken instead", () =>
    Effect.gen(function*() {
      const s = yield* shared(marks)
      const fifo = spawnSync("mkfifo", [path.join(s.mine, "kiln.json")])
      assert.strictEqual(fifo.status, 0)
      const r = yield* runCli(["run"], { cwd: s.mine, env: s.env })
      assert.strictEqual(r.code, 2, r.stderr)
      assert.include(r.stderr, `${s.mine}/kiln.json`)
      assert.isFalse(fs.existsSync(s.marker), "the config above ran")
    }))
})
