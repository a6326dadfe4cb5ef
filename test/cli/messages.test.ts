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
