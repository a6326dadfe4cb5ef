/**
 * What held when kiln was attacked, kept so, through the built CLI. A kiln.json whose inputs, outputs or working
 * directory leave the workspace (`..` or an absolute path) is refused before anything runs: exit 2, one line naming
 * the file and the field, no process started, no store made, nothing written outside. And what kiln makes on disk for
 * itself is its user's alone: the store and sandbox roots it creates are 0700, the files beside a sandbox that take a
 * process's stdout and stderr are 0600, and so is the sandboxer's log, in a directory that is 0700.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { spawnSync } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"
import { cli } from "../utils/stack.js"
import { tempDir, writeTree } from "../utils/temp.js"

/**
 * A temp root with a workspace holding `a.txt`, `a/b.txt` and `config`; the store, sandboxes, runtime and cache
 * directories go beside it.
 */
const setup = (config: (root: string) => unknown) =>
  Effect.gen(function*() {
    const root = yield* tempDir("kiln-held-")
    const ws = path.join(root, "ws")
    writeTree(ws, { "a.txt": "a\n", "a/b.txt": "b\n", "kiln.json": JSON.stringify(config(root)) })
    const store = path.join(root, "store")
    const sandboxes = path.join(root, "sandboxes")
    const runtime = path.join(root, "runtime")
    /** `kiln run`, to its end. Kiln makes its roots itself: none of them exists before. */
    const run = () =>
      spawnSync(process.execPath, [cli, "run", "--progress", "plain"], {
        cwd: ws,
        encoding: "utf8",
        env: {
          ...process.env,
          KILN_STORE_DIR: store,
          KILN_SANDBOX_ROOT: sandboxes,
          KILN_NAMED_CACHES_DIR: path.join(root, "named"),
          XDG_RUNTIME_DIR: runtime,
          XDG_CACHE_HOME: path.join(root, "cache")
        }
      })
    return { root, ws, store, sandboxes, runtime, run }
  })

describe("a kiln.json that names a path outside the workspace is refused before anything runs", () => {
  const inWd = "must be a relative path inside the working directory"
  const inSandbox = "must be a relative path inside the sandbox"
  const glob = (g: string) => `invalid glob "${g}": globs are relative to the workspace and stay inside it`
  // `@` stands for an absolute path inside the test's root: the refusal must not depend on what is there.
  const cases: ReadonlyArray<[string, Record<string, unknown>, string]> = [
    ["an output at ../x", { outputs: ["../x"] }, `outputs[0]: "../x" ${inWd}`],
    ["an output at out/../../x", { outputs: ["out/../../x"] }, `outputs[0]: "out/../../x" ${inWd}`],
    ["an output directory at a/../../x/", { outputs: ["a/../../x/"] }, `outputs[0]: "a/../../x/" ${inWd}`],
    ["an absolute output", { outputs: ["a.txt", "@/x"] }, `outputs[1]: "@/x" ${inWd}`],
    ["an input at ../*", { inputs: ["a.txt", "../*"] }, `inputs[1]: ${glob("../*")}`],
    ["an absolute input", { inputs: ["/etc/passwd"] }, `inputs[0]: ${glob("/etc/passwd")}`],
    [
      "an input that climbs out past **",
      { inputs: ["a/**/../../../etc/passwd"] },
      `inputs[0]: ${glob("a/**/../../../etc/passwd")}`
    ],
    ["a working directory at ../..", { workingDirectory: "../.." }, `workingDirectory: "../.." ${inSandbox}`],
    ["a working directory at a/../..", { workingDirectory: "a/../.." }, `workingDirectory: "a/../.." ${inSandbox}`],
    ["an absolute working directory", { workingDirectory: "@" }, `workingDirectory: "@" ${inSandbox}`]
  ]
  for (const [what, fields, message] of cases) {
    it.scoped(`${what}: exit 2, one line naming the field; nothing ran, nothing made`, () =>
      Effect.gen(function*() {
        const at = (root: string, value: unknown): unknown =>
          typeof value === "string"
            ? value.replace("@", path.join(root, "outside"))
            : Array.isArray(value)
            ? value.map((v) => at(root, v))
            : value
        const dirs = yield* setup((root) => ({
          processes: {
            p: {
              // Were it run, it would leave a mark, and write where its outputs and working directory point.
              argv: ["/bin/sh", "-c", `touch ${path.join(root, "ran")}; echo x > x; mkdir -p out && echo x > out/x`],
              ...Object.fromEntries(Object.entries(fields).map(([k, v]) => [k, at(root, v)]))
            }
          }
        }))
        const r = dirs.run()
        assert.isNull(r.signal, r.stderr)
        assert.strictEqual(r.status, 2, r.stderr)
        // The headline, then the file's line and a caret (indented): the field's line and column taken out to compare.
        const [head, ...quoted] = r.stderr.trimEnd().split("\n")
        assert.strictEqual(
          head!.replace(/^kiln: kiln\.json:\d+:\d+: /, "kiln: kiln.json: "),
          `kiln: kiln.json: processes.p.${at(dirs.root, message)}`
        )
        assert.strictEqual(quoted.length, 2, r.stderr)
        for (const line of quoted) assert.match(line, /^ {2}/)
        assert.deepStrictEqual(fs.readdirSync(dirs.root).sort(), ["ws"], "nothing made beside the workspace")
        assert.deepStrictEqual(fs.readdirSync(dirs.ws).sort(), ["a", "a.txt", "kiln.json"])
      }))
  }
})

describe("what kiln makes for itself is its user's alone", () => {
  it.scoped("fresh store and sandbox roots are 0700; a process's stdout and stderr files and the sandboxer's log 0600", () =>
    Effect.gen(function*() {
      const dirs = yield* setup((root) => ({
        // The process looks at kiln's own files on the host (its log, beside the sandboxes): no strict view, which
        // would hide them; its stdout and stderr files are what the process is given either way.
        sandbox: "off",
        processes: {
          p: {
            // The files beside its sandbox are the process's own stdout and stderr; the sandboxer (which writes an
            // input tree past 16 MiB, larger than the engine writes itself) keeps its log while the run lasts,
            // somewhere under the root.
            argv: ["tools/modes.sh", root],
            inputs: ["tools/modes.sh", "a.txt", "big.bin"],
            outputs: ["modes.txt"]
          }
        }
      }))
      writeTree(dirs.ws, {
        "big.bin": Buffer.alloc(17 * 1024 * 1024, 1),
        "tools/modes.sh": {
          content: `#!/bin/sh
out=$(stat -L -c '%F %a' /proc/$$/fd/1)
err=$(stat -L -c '%F %a' /proc/$$/fd/2)
{
  echo "stdout $out"
  echo "stderr $err"
  find "$1" -name '*.log' -type f ! -path "$1/ws/*" | while read -r log; do
    echo "log $(stat -c %a "$log") in $(stat -c %a "$(dirname "$log")")"
  done
} > modes.txt
`,
          mode: 0o755
        }
      })
      // The user's runtime directory exists, private, as the login manager makes it: kiln makes its own inside.
      fs.mkdirSync(dirs.runtime, { mode: 0o700 })
      const r = dirs.run()
      assert.strictEqual(r.status, 0, r.stderr)
      assert.strictEqual(fs.statSync(dirs.store).mode & 0o777, 0o700, "store root")
      assert.strictEqual(fs.statSync(dirs.sandboxes).mode & 0o777, 0o700, "sandbox root")
      const modes = fs.readFileSync(path.join(dirs.ws, "modes.txt"), "utf8").trim().split("\n")
      assert.deepStrictEqual(modes.slice(0, 2), ["stdout regular empty file 600", "stderr regular empty file 600"])
      assert.isNotEmpty(modes.slice(2), "the sandboxer's log was not found")
      for (const log of modes.slice(2)) assert.strictEqual(log, "log 600 in 700")
    }))
})
