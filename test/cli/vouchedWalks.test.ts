/**
 * A directory taken whole that the run memo's check found unchanged, path by path, is taken by the run's snapshot
 * without a second look (`SessionOptions.vouched`). End to end, through the built CLI: a change inside the directory
 * made before a run is never hidden by that, however the runs before kept it, and each run's output is right.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { spawnSync } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"
import { nodeModulesWorkspace } from "../utils/nodeModulesWorkspace.js"
import { cli, cliEnvIn } from "../utils/stack.js"
import { settleTimes, tempDir, writeTree } from "../utils/temp.js"

const workspace = Effect.gen(function*() {
  const root = yield* tempDir("kiln-vouched-")
  const ws = path.join(root, "ws")
  writeTree(ws, nodeModulesWorkspace("a0\n"))
  settleTimes(path.join(ws, "node_modules"))
  settleTimes(path.join(ws, "src"))
  const env = cliEnvIn(root)
  const run = () => {
    const r = spawnSync(process.execPath, [cli, "run", "--progress", "plain"], { cwd: ws, encoding: "utf8", env })
    assert.strictEqual(r.status, 0, r.stderr)
    return fs.readFileSync(path.join(ws, "out.txt"), "utf8")
  }
  /** Rewrites one file, and only its times are moved out of the racy margin: its neighbours keep theirs. */
  const edit = (rel: string, text: string) => {
    fs.writeFileSync(path.join(ws, rel), text)
    settleTimes(path.join(ws, rel))
  }
  const groupKeys = () => {
    const dir = path.join(root, "store", "engine", "memo")
    const memo = fs.readdirSync(dir).find((n) => n.endsWith(".json"))!
    return Object.keys((JSON.parse(fs.readFileSync(path.join(dir, memo), "utf8")) as { groups?: object }).groups ?? {})
  }
  return { run, edit, groupKeys }
})

describe("saved walks vouched for by the run memo", () => {
  it.scoped("never hide a change made inside the directory before the run", () =>
    Effect.gen(function*() {
      const { edit, groupKeys, run } = yield* workspace
      assert.strictEqual(run(), "5\na0\n")
      edit("src/a.txt", "a1\n")
      assert.strictEqual(run(), "5\na1\n")
      const keysAfterSaved = groupKeys()
      // The third run's check holds node_modules' group at every stat: its snapshot takes the saved walk unlooked.
      edit("src/a.txt", "a2\n")
      assert.strictEqual(run(), "5\na2\n")
      assert.includeMembers(groupKeys(), keysAfterSaved)
      // A change inside it, of the same size, before the run: the check sees it, so nothing vouches for the walk.
      edit("node_modules/p1/f5.js", "X\n")
      assert.strictEqual(run(), "X\na2\n")
      // And with an edit elsewhere in the same run.
      edit("node_modules/p1/f5.js", "Y\n")
      edit("src/a.txt", "a3\n")
      assert.strictEqual(run(), "Y\na3\n")
      // Back to bytes seen before: the right output again, whichever way it comes.
      edit("node_modules/p1/f5.js", "5\n")
      assert.strictEqual(run(), "5\na3\n")
      edit("src/a.txt", "a4\n")
      assert.strictEqual(run(), "5\na4\n")
    }))
})
