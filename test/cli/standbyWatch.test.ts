/**
 * A standby's watch of the trees its rehearsal found as recorded (`engine/internal/memo/memoWatch.ts`), through the
 * built CLI: a no-op it answers takes a watched `node_modules` as it is without stat'ing it, and every change there is
 * still seen by the next run: a file written through a link outside the tree, an entry made, the tree replaced by a
 * copy. A watch that said "changed" while the tree still holds is made anew once the run has its answer.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"
import type { CliResult } from "../utils/cliRun.js"
import { PATH, workspace } from "../utils/standbyWorkspace.js"
import { isRoot, tmpfs } from "../utils/tmpfs.js"

const gen = {
  argv: ["/bin/sh", "-c", "mkdir -p out && cat src/* node_modules/a/index.js > out/gen.txt"],
  inputs: ["src/**", "node_modules/**"],
  outputs: ["out/gen.txt"],
  env: { PATH }
}

// A tree of more paths than a group needs to be watched (a few hundred: fewer are stat'ed as fast).
const files: Record<string, string> = {
  "src/a.txt": "one\n",
  "node_modules/a/index.js": "a\n",
  "node_modules/a/lib/util.js": "u\n",
  "node_modules/b/index.js": "b\n"
}
for (let i = 0; i < 300; i++) files[`node_modules/c/lib/f${i}.js`] = `${i}\n`

// A standby rehearses again at once after an answer whose check dropped a watch (not after a lull), so that the run
// after that answer meets the tree watched anew.
const DEBUG = { KILN_NOOP_DEBUG: "1", KILN_STANDBY_REWATCH_MS: "0" }
const WATCHED = /kiln: no-op check: 1 whole tree held by their watch/

const ranOf = (r: CliResult) => (JSON.parse(r.stdout) as { ran: number }).ran

describe("a standby's watch of a tree taken whole", () => {
  it.scopedLive("a no-op skips the watched tree's stats; each change in it is still seen", () =>
    Effect.gen(function*() {
      const w = yield* workspace({ gen }, files)
      const output = path.join(w.ws, "out/gen.txt")
      yield* w.runThenStandby()
      const noop = yield* w.kiln(["run", "--summary", "-"], DEBUG)
      assert.strictEqual(noop.code, 0, noop.stderr)
      assert.match(noop.stderr, WATCHED)
      assert.strictEqual(ranOf(noop), 0)

      const changes: ReadonlyArray<readonly [string, () => void, string]> = [
        // The tree's inode watched, not only its directory: the link outside it is where the write comes through.
        ["a write through a hard link outside the tree", () => {
          fs.linkSync(path.join(w.ws, "node_modules/a/index.js"), path.join(w.root, "outside.js"))
          fs.appendFileSync(path.join(w.root, "outside.js"), "through the link\n")
        }, "one\na\nthrough the link\n"],
        [
          "an entry made",
          () => fs.writeFileSync(path.join(w.ws, "node_modules/b/new.js"), ""),
          "one\na\nthrough the link\n"
        ],
        ["the workspace replaced by a copy whose tree differs", () => {
          fs.renameSync(w.ws, `${w.ws}.old`)
          fs.cpSync(`${w.ws}.old`, w.ws, { recursive: true, verbatimSymlinks: true, preserveTimestamps: true })
          fs.writeFileSync(path.join(w.ws, "node_modules/a/index.js"), "in the copy\n")
        }, "one\nin the copy\n"]
      ]
      for (const [what, change, expected] of changes) {
        change()
        const after = yield* w.kiln(["run", "--summary", "-"], DEBUG)
        assert.strictEqual(after.code, 0, `${what}: ${after.stderr}`)
        assert.strictEqual(ranOf(after), 1, `${what}: the process runs`)
        assert.strictEqual(fs.readFileSync(output, "utf8"), expected, what)
        // The standby that ran it has ended; the next one watches the tree as the run left it.
        yield* w.standbyWaits
        const again = yield* w.kiln(["run", "--summary", "-"], DEBUG)
        assert.strictEqual(ranOf(again), 0, `${what}: then a no-op`)
        assert.match(again.stderr, WATCHED, `${what}: then watched again`)
      }
      fs.rmSync(`${w.ws}.old`, { recursive: true })
    }))

  // The check stops at a process's first changed input; the run then stat'ed the watched tree after it all the same.
  it.scopedLive("an edit's check vouches for the watched tree it did not reach, for the run's snapshot", () =>
    Effect.gen(function*() {
      const w = yield* workspace({ gen }, files)
      yield* w.runThenStandby(DEBUG)
      fs.writeFileSync(path.join(w.ws, "src/a.txt"), "edited\n")
      const edit = yield* w.kiln(["run", "--summary", "-"], DEBUG)
      assert.strictEqual(ranOf(edit), 1, edit.stderr)
      assert.match(edit.stderr, /no-op check: gen: src\/a\.txt changed/)
      assert.match(edit.stderr, WATCHED)
      assert.strictEqual(fs.readFileSync(path.join(w.ws, "out/gen.txt"), "utf8"), "edited\na\n")
    }))

  // One standby serves every workspace of its user's kiln: another's no-op must not cost the rehearsed one its watch
  // (it did: the other memo's parse dropped it, and the standby rehearsed again before the next run).
  it.scopedLive("a no-op of another workspace leaves the rehearsed workspace's watch as it is", () =>
    Effect.gen(function*() {
      const w = yield* workspace({ gen }, files)
      const other = path.join(w.root, "other")
      fs.cpSync(w.ws, other, { recursive: true })
      // No rehearsal again after a lull in this test: a dropped watch stays dropped.
      const env = { ...DEBUG, KILN_STANDBY_REWATCH_MS: "600000" }
      assert.strictEqual((yield* w.kiln(["run"], env, other)).code, 0)
      yield* w.standbyWaits
      // Taken on by the standby the other workspace's run left; the one it leaves rehearses this workspace.
      yield* w.runThenStandby(env)
      const standby = w.standbys()
      const otherNoop = yield* w.kiln(["run", "--summary", "-"], env, other)
      assert.strictEqual(ranOf(otherNoop), 0, otherNoop.stderr)
      assert.match(otherNoop.stderr, /no-op check: nothing changed/, otherNoop.stderr)
      const noop = yield* w.kiln(["run", "--summary", "-"], env)
      assert.strictEqual(ranOf(noop), 0, noop.stderr)
      assert.match(noop.stderr, WATCHED)
      assert.deepStrictEqual(w.standbys(), standby, "the same standby answered both")
    }))

  // A mount is the one change here that leaves every stat as it was: the run after it answers as a no-op, by stats.
  it.scopedLive.skipIf(!isRoot)(
    "a watch dropped while the tree still holds is made again after the answer",
    () =>
      Effect.gen(function*() {
        const w = yield* workspace({ gen }, files)
        // The standby's own settings (a rehearsal at once after the answer), not only the runs': on a fast machine
        // the next run came within the default lull, and met the tree unwatched.
        yield* w.runThenStandby(DEBUG)
        assert.match((yield* w.kiln(["run", "--summary", "-"], DEBUG)).stderr, WATCHED)
        yield* Effect.scoped(tmpfs(path.join(w.root, "elsewhere"), "64k"))
        const unwatched = yield* w.kiln(["run", "--summary", "-"], DEBUG)
        assert.strictEqual(ranOf(unwatched), 0, unwatched.stderr)
        assert.notMatch(unwatched.stderr, /held by their watch/, "the mount table changed: the trees were stat'ed")
        const rewatched = yield* w.kiln(["run", "--summary", "-"], DEBUG)
        assert.strictEqual(ranOf(rewatched), 0, rewatched.stderr)
        assert.match(rewatched.stderr, WATCHED)
      })
  )
})
