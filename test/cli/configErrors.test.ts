/**
 * kiln.json's `defaults` and `tasks` through the built CLI (#38 §4): their errors are said with those of `processes`,
 * every one in one run, each at its line and column with the line and a caret, in the file's order, exit 2; and
 * `optionalInputs` on a task (relative to each package) and in `defaults` (added to every process's).
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { spawnSync } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"
import { runCli } from "../utils/cliRun.js"
import { tempDir, writeTree } from "../utils/temp.js"

/** A workspace of two npm packages (`@x/app` depends on `@x/ui`), each with a `build` script that runs `script`. */
const workspace = (script: string) =>
  Effect.gen(function*() {
    const root = yield* tempDir("kiln-config-errors-")
    const ws = path.join(root, "ws")
    fs.mkdirSync(path.join(root, "sandboxes"), { recursive: true })
    const pkg = (name: string, fields: Record<string, unknown> = {}) =>
      JSON.stringify({ name, version: "1.0.0", scripts: { build: script }, ...fields })
    writeTree(ws, {
      "package.json": JSON.stringify({ name: "root", private: true, workspaces: ["packages/*"] }),
      "packages/ui/package.json": pkg("@x/ui"),
      "packages/app/package.json": pkg("@x/app", { dependencies: { "@x/ui": "*" } })
    })
    const env = {
      ...process.env,
      HOME: root,
      KILN_STORE_DIR: path.join(root, "store"),
      KILN_SANDBOX_ROOT: path.join(root, "sandboxes"),
      KILN_NAMED_CACHES_DIR: path.join(root, "named"),
      KILN_LOCK_DIR: path.join(root, "locks")
    }
    const kiln = (args: ReadonlyArray<string>, extra: NodeJS.ProcessEnv = {}) =>
      runCli(args, { cwd: ws, env: { ...env, ...extra } })
    return { root, ws, kiln }
  })

/** Two errors in defaults, two in tasks, one in processes: each found after the schema, by resolving and expanding. */
const FIVE_ERRORS = `{
  "defaults": {
    "passEnv": ["KILN_TEST_SURELY_UNSET"],
    "inputs": ["../outside/**"]
  },
  "tasks": {
    "build": {
      "deps": ["^build", "web#build"],
      "outputs": ["dist/**"]
    }
  },
  "processes": {
    "gen": { "argv": ["true"], "deps": ["gne"] }
  }
}
`

describe("kiln.json's defaults and tasks: every error in one run", () => {
  it.scoped("two in defaults, two in tasks, one in processes: all five at their line and column, exit 2", () =>
    Effect.gen(function*() {
      const { kiln, ws } = yield* workspace("true")
      fs.writeFileSync(path.join(ws, "kiln.json"), FIVE_ERRORS)
      const r = yield* kiln(["run"])
      assert.strictEqual(r.code, 2, r.stderr)
      assert.strictEqual(
        r.stderr,
        [
          "kiln: kiln.json:3:17: defaults.passEnv[0]: \"KILN_TEST_SURELY_UNSET\" is not set in kiln's environment: set " +
          "it, or give a default (\"KILN_TEST_SURELY_UNSET=value\")",
          "      \"passEnv\": [\"KILN_TEST_SURELY_UNSET\"],",
          "                  ^",
          "kiln: kiln.json:4:16: defaults.inputs[0]: invalid glob \"../outside/**\": globs are relative to the workspace " +
          "and stay inside it",
          "      \"inputs\": [\"../outside/**\"]",
          "                 ^",
          "kiln: kiln.json:8:26: tasks.build.deps[1]: no workspace package is named \"web\"",
          "        \"deps\": [\"^build\", \"web#build\"],",
          "                           ^",
          "kiln: kiln.json:9:19: tasks.build.outputs[0]: \"dist/**\" is a glob: outputs are paths, and a directory ends " +
          "with / (\"dist/\")",
          "        \"outputs\": [\"dist/**\"]",
          "                    ^",
          "kiln: kiln.json:13:41: processes.gen.deps[0]: unknown process \"gne\": did you mean \"gen\"?",
          "      \"gen\": { \"argv\": [\"true\"], \"deps\": [\"gne\"] }",
          "                                          ^",
          ""
        ].join("\n")
      )
    }))

  it.scoped("schema errors in defaults, tasks and processes: all of them, in the file's order", () =>
    Effect.gen(function*() {
      const { kiln, ws } = yield* workspace("true")
      fs.writeFileSync(
        path.join(ws, "kiln.json"),
        `{\n  "defaults": { "timeout": 5, "inptus": [] },\n  "tasks": { "build": { "ouputs": [], "cache": "no" } },\n` +
          `  "processes": { "gen": { "argv": "true" } }\n}\n`
      )
      const r = yield* kiln(["run"])
      assert.strictEqual(r.code, 2, r.stderr)
      assert.deepStrictEqual(r.stderr.split("\n").filter((l) => l.startsWith("kiln: ")), [
        "kiln: kiln.json:2:28: defaults.timeout: expected a duration such as \"60s\"",
        "kiln: kiln.json:2:31: defaults.inptus: unknown field: did you mean \"inputs\"?",
        "kiln: kiln.json:3:25: tasks.build.ouputs: unknown field: did you mean \"outputs\"?",
        "kiln: kiln.json:3:48: tasks.build.cache: expected one of \"always\", \"successful\", \"never\"",
        "kiln: kiln.json:4:35: processes.gen.argv: expected an array of strings, e.g. [\"true\"]"
      ])
    }))

  it.scoped("schema errors and the errors found after them, in one run: those of the entries the schema took", () =>
    Effect.gen(function*() {
      const { kiln, ws } = yield* workspace("true")
      fs.writeFileSync(
        path.join(ws, "kiln.json"),
        `{\n  "tasks": {\n    "build": { "deps": ["^build", "web#build"] },\n    "test": { "cache": "no" }\n  },\n` +
          `  "processes": {\n    "gen": { "argv": ["true"], "deps": ["gne"] },\n` +
          `    "bad": { "argv": "true", "deps": ["nothing"] }\n  }\n}\n`
      )
      const r = yield* kiln(["run"])
      assert.strictEqual(r.code, 2, r.stderr)
      // `bad`'s unknown dep is not said: its entry is the schema's to fix first.
      assert.deepStrictEqual(r.stderr.split("\n").filter((l) => l.startsWith("kiln: ")), [
        "kiln: kiln.json:3:35: tasks.build.deps[1]: no workspace package is named \"web\"",
        "kiln: kiln.json:4:24: tasks.test.cache: expected one of \"always\", \"successful\", \"never\"",
        "kiln: kiln.json:7:41: processes.gen.deps[0]: unknown process \"gne\": did you mean \"gen\"?",
        "kiln: kiln.json:8:22: processes.bad.argv: expected an array of strings, e.g. [\"true\"]"
      ])
      // Without tasks, the same: the processes' checks after the schema's.
      fs.writeFileSync(
        path.join(ws, "kiln.json"),
        `{\n  "processes": {\n    "gen": { "argv": ["true"], "deps": ["gne"] },\n` +
          `    "bad": { "argv": ["true"], "timeout": 5 }\n  }\n}\n`
      )
      const plain = yield* kiln(["run"])
      assert.strictEqual(plain.code, 2, plain.stderr)
      assert.deepStrictEqual(plain.stderr.split("\n").filter((l) => l.startsWith("kiln: ")), [
        "kiln: kiln.json:3:41: processes.gen.deps[0]: unknown process \"gne\": did you mean \"gen\"?",
        "kiln: kiln.json:4:43: processes.bad.timeout: expected a duration such as \"60s\""
      ])
    }))

  it.scoped("a process a task gives that conflicts with another: said at the task's entry, naming the package", () =>
    Effect.gen(function*() {
      const { kiln, ws } = yield* workspace("true")
      fs.writeFileSync(
        path.join(ws, "kiln.json"),
        `{\n  "tasks": {\n    "build": { "inputs": ["src/**"] }\n  },\n  "processes": {\n` +
          `    "gen": { "argv": ["true"], "outputs": ["packages/ui/src/gen.ts"] }\n  }\n}\n`
      )
      fs.mkdirSync(path.join(ws, "packages/ui/src"))
      const r = yield* kiln(["run"])
      assert.strictEqual(r.code, 2, r.stderr)
      assert.strictEqual(
        r.stderr,
        [
          // @x/app's build takes @x/ui's files too: it depends on @x/ui, and not on its build.
          "kiln: kiln.json:3:5: tasks.build (package @x/app): \"packages/ui/**\" takes packages/ui/src/gen.ts, an " +
          "output of \"gen\": add \"gen\" to deps (or exclude it: \"!packages/ui/src/gen.ts\")",
          "      \"build\": { \"inputs\": [\"src/**\"] }",
          "      ^",
          "kiln: kiln.json:3:5: tasks.build (package @x/ui): \"packages/ui/src/**\" takes packages/ui/src/gen.ts, an " +
          "output of \"gen\": add \"gen\" to deps (or exclude it: \"!packages/ui/src/gen.ts\")",
          "      \"build\": { \"inputs\": [\"src/**\"] }",
          "      ^",
          ""
        ].join("\n")
      )
    }))
})

describe("a host path in the workspace, judged once the workspace is known", () => {
  it.scoped("said at the defaults' entry or the task's, not at the process they were merged into", () =>
    Effect.gen(function*() {
      const { kiln, ws } = yield* workspace("true")
      const inside = path.join(fs.realpathSync(ws), "tools")
      fs.writeFileSync(
        path.join(ws, "kiln.json"),
        `{\n  "defaults": { "hostPaths": ["/opt/kiln-test", ${
          JSON.stringify(inside)
        }] },\n  "tasks": { "build": {} }\n}\n`
      )
      const r = yield* kiln(["run"])
      assert.strictEqual(r.code, 2, r.stderr)
      assert.match(r.stderr, /^kiln: kiln\.json:2:49: defaults\.hostPaths\[1\]: ".*\/tools" is inside the workspace/)
      fs.writeFileSync(
        path.join(ws, "kiln.json"),
        `{\n  "tasks": { "build": { "hostPaths": ["/opt/kiln-test", ${JSON.stringify(inside)}] } }\n}\n`
      )
      const task = yield* kiln(["run"])
      assert.strictEqual(task.code, 2, task.stderr)
      assert.match(
        task.stderr,
        /^kiln: kiln\.json:2:57: tasks\.build\.hostPaths\[1\]: ".*\/tools" is inside the workspace/
      )
    }))
})

describe("kiln.json as a link", () => {
  it.scoped("followed within its directory; one out of it, a FIFO or a device is refused, and nothing of it printed", () =>
    Effect.gen(function*() {
      const { kiln, root, ws } = yield* workspace("true")
      const config = path.join(ws, "kiln.json")
      fs.mkdirSync(path.join(ws, "config"))
      fs.writeFileSync(path.join(ws, "config/kiln.json"), JSON.stringify({ tasks: { build: {} } }))
      fs.symlinkSync("config/kiln.json", config)
      const inside = yield* kiln(["ls"])
      assert.strictEqual(inside.code, 0, inside.stderr)
      assert.include(inside.stdout, "build:@x/app")
      fs.writeFileSync(path.join(root, "secret"), "{ \"the secret\": 1, }\nTOKEN=ghp_SECRET\n")
      for (const target of [path.join(root, "secret"), "/proc/self/environ"]) {
        fs.rmSync(config)
        fs.symlinkSync(target, config)
        for (const command of [["run"], ["ls"]]) {
          const r = yield* kiln(command, { KILN_TEST_SECRET: "ghp_SECRET" })
          assert.strictEqual(r.code, 2, r.stderr)
          assert.include(r.stderr, "is a symlink to")
          assert.include(r.stderr, "outside its directory: kiln follows one only within it")
          assert.notInclude(r.stderr, "ghp_SECRET")
        }
      }
      fs.rmSync(config)
      spawnSync("mkfifo", [config])
      // This directory's config, refused as it is (never waited on, nor passed over for a kiln.json further up);
      // named by --config, the same.
      const fifo = yield* kiln(["run"])
      assert.strictEqual(fifo.code, 2, fifo.stderr)
      assert.include(fifo.stderr, "is not a regular file")
      const named = yield* kiln(["run", "--config", config])
      assert.strictEqual(named.code, 2, named.stderr)
      assert.include(named.stderr, "is not a regular file")
      // An unknown command reads kiln.json's names to suggest one: the FIFO is not waited on there either.
      const unknown = yield* kiln(["biuld"])
      assert.notStrictEqual(unknown.code, 0, unknown.stderr)
    }))
})

describe("--summary and --trace files", () => {
  it.scoped("never through a link, never a FIFO, a directory or a device: one line, exit 2, the target untouched", () =>
    Effect.gen(function*() {
      const { kiln, root, ws } = yield* workspace("true")
      fs.writeFileSync(path.join(ws, "kiln.json"), JSON.stringify({ tasks: { build: {} } }))
      const victim = path.join(root, "victim")
      fs.writeFileSync(victim, "keep\n")
      fs.symlinkSync(victim, path.join(ws, "summary.json"))
      spawnSync("mkfifo", [path.join(ws, "fifo")])
      fs.mkdirSync(path.join(ws, "dir"))
      const cases = [
        ["summary.json", "is a symlink, which kiln does not write through (`-` is stdout)"],
        ["fifo", "is a FIFO nothing reads"],
        ["dir", "is a directory"],
        ["/dev/null", "is not a regular file"]
      ] as const
      // The first run runs; the next are no-ops, whose check leaves a summary it cannot write to the full run.
      for (const flag of ["--summary", "--trace"]) {
        for (const [file, says] of flag === "--trace" ? cases.slice(0, 1) : cases) {
          const r = yield* kiln(["run", flag, file])
          assert.strictEqual(r.code, 2, r.stderr)
          assert.include(r.stderr, `kiln: ${flag} ${file}: ${says}\n`)
          assert.notInclude(r.stderr, "    at ")
          assert.strictEqual(fs.readFileSync(victim, "utf8"), "keep\n")
        }
      }
      const written = yield* kiln(["run", "--summary", "s.json"])
      assert.strictEqual(written.code, 0, written.stderr)
      assert.strictEqual(JSON.parse(fs.readFileSync(path.join(ws, "s.json"), "utf8")).failed, 0)
    }))
})

describe("hostPaths that reach kiln's own directories", () => {
  it.scoped("the store, the sandbox root, the named caches, the locks, the runtime directory: exit 2, nothing run", () =>
    Effect.gen(function*() {
      const { kiln, root, ws } = yield* workspace("touch ran")
      const run = path.join(root, "run")
      fs.mkdirSync(run, { mode: 0o700 })
      fs.symlinkSync(path.join(root, "store"), path.join(root, "a-link"))
      const cases: ReadonlyArray<readonly [string, string]> = [
        [path.join(root, "store"), `is inside kiln's store (${path.join(root, "store")})`],
        [path.join(root, "a-link"), `is inside kiln's store (${path.join(root, "store")})`],
        [path.join(root, "sandboxes"), `is inside kiln's sandbox root (${path.join(root, "sandboxes")})`],
        [path.join(root, "named"), `is inside kiln's named caches (${path.join(root, "named")})`],
        [path.join(root, "locks"), `is inside kiln's workspace locks (${path.join(root, "locks")})`],
        [run, `holds kiln's runtime directory (${path.join(run, "kiln")})`]
      ]
      for (const [hostPath, says] of cases) {
        fs.writeFileSync(path.join(ws, "kiln.json"), JSON.stringify({ tasks: { build: { hostPaths: [hostPath] } } }))
        const r = yield* kiln(["run"], { XDG_RUNTIME_DIR: run })
        assert.strictEqual(r.code, 2, r.stderr)
        assert.include(
          r.stderr,
          `kiln: kiln.json: processes.build:@x/app.hostPaths[0]: ${JSON.stringify(hostPath)} ${says}`,
          r.stderr
        )
        assert.isFalse(fs.existsSync(path.join(ws, "packages/ui/ran")), "a process ran")
      }
    }))
})

describe("optionalInputs on tasks and in defaults", () => {
  it.scoped("a task's: relative to each package, absent in one and there in the other; a change to it runs again", () =>
    Effect.gen(function*() {
      const { kiln, ws } = yield* workspace("cat local.env 2>/dev/null > out.txt; true")
      fs.writeFileSync(
        path.join(ws, "kiln.json"),
        JSON.stringify({
          tasks: { build: { inputs: ["package.json"], optionalInputs: ["local.env"], outputs: ["out.txt"] } }
        })
      )
      fs.writeFileSync(path.join(ws, "packages/ui/local.env"), "A=1\n")
      const first = yield* kiln(["run"])
      assert.strictEqual(first.code, 0, first.stderr)
      assert.strictEqual(fs.readFileSync(path.join(ws, "packages/ui/out.txt"), "utf8"), "A=1\n")
      assert.strictEqual(fs.readFileSync(path.join(ws, "packages/app/out.txt"), "utf8"), "")
      fs.writeFileSync(path.join(ws, "packages/ui/local.env"), "A=2\n")
      const second = yield* kiln(["run"])
      assert.strictEqual(second.code, 0, second.stderr)
      assert.strictEqual(fs.readFileSync(path.join(ws, "packages/ui/out.txt"), "utf8"), "A=2\n")
      // The package without it gains it: an input of its process too.
      fs.writeFileSync(path.join(ws, "packages/app/local.env"), "B=1\n")
      const third = yield* kiln(["run"])
      assert.strictEqual(third.code, 0, third.stderr)
      assert.strictEqual(fs.readFileSync(path.join(ws, "packages/app/out.txt"), "utf8"), "B=1\n")
    }))

  it.scoped("defaults': every process's, absent at first; once there an input, and a change to it runs again", () =>
    Effect.gen(function*() {
      const { kiln, ws } = yield* workspace("true")
      fs.writeFileSync(
        path.join(ws, "kiln.json"),
        JSON.stringify({
          defaults: { optionalInputs: ["shared.env"] },
          processes: {
            read: {
              argv: ["/bin/sh", "-c", "cat shared.env 2>/dev/null > got.txt; true"],
              outputs: ["got.txt"],
              env: { PATH: "/usr/bin:/bin" }
            }
          }
        })
      )
      const first = yield* kiln(["run"])
      assert.strictEqual(first.code, 0, first.stderr)
      assert.strictEqual(fs.readFileSync(path.join(ws, "got.txt"), "utf8"), "")
      fs.writeFileSync(path.join(ws, "shared.env"), "A=1\n")
      const second = yield* kiln(["run"])
      assert.strictEqual(second.code, 0, second.stderr)
      assert.strictEqual(fs.readFileSync(path.join(ws, "got.txt"), "utf8"), "A=1\n")
      fs.writeFileSync(path.join(ws, "shared.env"), "A=2\n")
      const third = yield* kiln(["run"])
      assert.strictEqual(third.code, 0, third.stderr)
      assert.strictEqual(fs.readFileSync(path.join(ws, "got.txt"), "utf8"), "A=2\n")
    }))

  it.scoped("a task's and the defaults' that leave the package or the workspace are refused at their place", () =>
    Effect.gen(function*() {
      const { kiln, ws } = yield* workspace("true")
      fs.writeFileSync(
        path.join(ws, "kiln.json"),
        `{\n  "defaults": { "optionalInputs": ["/abs"] },\n  "tasks": { "build": { "optionalInputs": ["../x"] } }\n}\n`
      )
      const r = yield* kiln(["run"])
      assert.strictEqual(r.code, 2, r.stderr)
      assert.deepStrictEqual(r.stderr.split("\n").filter((l) => l.startsWith("kiln: ")), [
        "kiln: kiln.json:2:36: defaults.optionalInputs[0]: invalid glob \"/abs\": globs are relative to the workspace " +
        "and stay inside it",
        "kiln: kiln.json:3:44: tasks.build.optionalInputs[0]: \"../x\" must be relative and stay inside the package"
      ])
    }))
})
