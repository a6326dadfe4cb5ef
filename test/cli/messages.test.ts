/**
 * What a user sees of kiln.json and the command line (#38 §4), through the built CLI: a kiln.json with comments and
 * trailing commas runs, and a no-op run of it is answered from the run memo; its errors, every one, are said at their
 * line and column, exit 2.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"
import { runCli } from "../utils/cliRun.js"
import { tempDir } from "../utils/temp.js"

/** A workspace in a temp dir, its store, sandboxes and locks beside it; `kiln` runs the CLI in `cwd` (default: it). */
const workspace = Effect.gen(function*() {
  const root = yield* tempDir("kiln-messages-")
  const ws = path.join(root, "ws")
  fs.mkdirSync(ws)
  fs.mkdirSync(path.join(root, "sandboxes"))
  const env = {
    ...process.env,
    HOME: root,
    KILN_STORE_DIR: path.join(root, "store"),
    KILN_SANDBOX_ROOT: path.join(root, "sandboxes"),
    KILN_NAMED_CACHES_DIR: path.join(root, "named"),
    KILN_LOCK_DIR: path.join(root, "locks")
  }
  const kiln = (args: ReadonlyArray<string>, cwd = ws, extra: NodeJS.ProcessEnv = {}) =>
    runCli(args, { cwd, env: { ...env, ...extra } })
  return { root, ws, kiln }
})

const JSONC = `{
  // kiln.json may hold comments
  "processes": {
    "gen": {
      "argv": ["/bin/sh", "-c", "echo gen > out.txt"], /* and block comments */
      "outputs": ["out.txt",],
      "env": { "PATH": "/usr/bin:/bin", },
    },
  },
}
`

describe("kiln.json as JSONC", () => {
  it.scoped("comments and trailing commas: it runs, and the next run is answered by the no-op check", () =>
    Effect.gen(function*() {
      const { kiln, ws } = yield* workspace
      fs.writeFileSync(path.join(ws, "kiln.json"), JSONC)
      const first = yield* kiln(["run"])
      assert.strictEqual(first.code, 0, first.stderr)
      assert.strictEqual(fs.readFileSync(path.join(ws, "out.txt"), "utf8"), "gen\n")
      const again = yield* kiln(["run"], ws, { KILN_NOOP_DEBUG: "1" })
      assert.strictEqual(again.code, 0, again.stderr)
      assert.include(again.stderr, "kiln: no-op check: nothing changed")
    }))

  it.scoped("every error of the file, each at its line and column with the line and a caret: exit 2", () =>
    Effect.gen(function*() {
      const { kiln, ws } = yield* workspace
      fs.writeFileSync(
        path.join(ws, "kiln.json"),
        `{\n  "processes": {\n    "gen": { "argv": "node gen.mjs", "ouputs": [] }, // two errors\n  },\n}\n`
      )
      const r = yield* kiln(["run"])
      assert.strictEqual(r.code, 2)
      assert.strictEqual(
        r.stderr,
        [
          "kiln: kiln.json:3:22: processes.gen.argv: expected an array of strings, e.g. [\"node\", \"gen.mjs\"]",
          "      \"gen\": { \"argv\": \"node gen.mjs\", \"ouputs\": [] }, // two errors",
          "                       ^",
          "kiln: kiln.json:3:38: processes.gen.ouputs: unknown field: did you mean \"outputs\"?",
          "      \"gen\": { \"argv\": \"node gen.mjs\", \"ouputs\": [] }, // two errors",
          "                                       ^",
          ""
        ].join("\n")
      )
    }))
})

describe("kiln.json found from any subdirectory", () => {
  it.scoped("a run from a directory below the workspace reads its kiln.json; paths stay relative to the workspace", () =>
    Effect.gen(function*() {
      const { kiln, ws } = yield* workspace
      fs.writeFileSync(path.join(ws, "kiln.json"), JSONC)
      const below = path.join(ws, "a", "b")
      fs.mkdirSync(below, { recursive: true })
      const r = yield* kiln(["run"], below)
      assert.strictEqual(r.code, 0, r.stderr)
      assert.isTrue(fs.existsSync(path.join(ws, "out.txt")))
      assert.isFalse(fs.existsSync(path.join(below, "out.txt")))
      // The no-op check finds it the same way.
      const again = yield* kiln(["run"], below, { KILN_NOOP_DEBUG: "1" })
      assert.include(again.stderr, "kiln: no-op check: nothing changed")
      const ls = yield* kiln(["ls"], below)
      assert.strictEqual(ls.code, 0, ls.stderr)
      assert.match(ls.stdout, /^gen +\/bin\/sh/)
    }))

  it.scoped("none here or above: says where it looked and where to read, exit 2", () =>
    Effect.gen(function*() {
      const { kiln, ws } = yield* workspace
      for (const args of [["run"], ["ls"], ["run", "--progress", "plain"]]) {
        const r = yield* kiln(args)
        assert.strictEqual(r.code, 2, r.stderr)
        assert.strictEqual(
          r.stderr,
          `kiln: no kiln.json in ${ws} or above: see README.md#kiln-run-and-kilnjson (or name one with --config FILE)\n`
        )
      }
    }))

  it.scoped("--config names the file: no walk", () =>
    Effect.gen(function*() {
      const { kiln, ws } = yield* workspace
      fs.writeFileSync(path.join(ws, "kiln.json"), JSONC)
      const below = path.join(ws, "sub")
      fs.mkdirSync(below)
      const r = yield* kiln(["run", "--config", "kiln.json"], below)
      assert.strictEqual(r.code, 2)
      assert.strictEqual(r.stderr, `kiln: ${path.join(below, "kiln.json")}: cannot read: ENOENT\n`)
    }))
})
