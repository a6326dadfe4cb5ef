/**
 * A snapshot session's progress is told every file its snapshots hash, by its path in the workspace and its size, and
 * when each snapshot finishes; a file the stat index vouches for is not told.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"
import type { HashProgress } from "../../src/layers/store/Store.js"
import { tempDir, tempStore } from "../utils/temp.js"

/** A progress that keeps what it is told. */
const recorder = () => {
  const hashed: Array<readonly [string, number]> = []
  let settled = 0
  const progress: HashProgress = {
    hashed: (rel, bytes) => hashed.push([rel, bytes]),
    settled: () => settled++
  }
  return { progress, hashed, settled: () => settled }
}

describe("hash progress", () => {
  it.scoped("every file hashed is told once, with its size; a warm index tells none", () =>
    Effect.gen(function*() {
      const store = yield* tempStore()
      const ws = yield* tempDir()
      // Modified a minute ago: not racily clean against the index saved by the first session.
      const old = new Date(Date.now() - 60_000)
      const files = new Map<string, number>()
      for (let d = 0; d < 10; d++) {
        for (let f = 0; f < 50; f++) {
          const rel = `vendor/d${d}/f${f}.txt`
          const content = `${rel}\n`.repeat(f + 1)
          fs.mkdirSync(path.join(ws, path.dirname(rel)), { recursive: true })
          fs.writeFileSync(path.join(ws, rel), content)
          fs.utimesSync(path.join(ws, rel), old, old)
          files.set(rel, Buffer.byteLength(content))
        }
      }
      fs.writeFileSync(path.join(ws, "top.txt"), "top")
      fs.utimesSync(path.join(ws, "top.txt"), old, old)
      files.set("top.txt", 3)

      const cold = recorder()
      const hashedByIndex = yield* Effect.scoped(Effect.gen(function*() {
        const session = yield* store.snapshotSession(ws, { progress: cold.progress })
        const taken = yield* store.snapshotMany(
          ws,
          [{ globs: ["vendor/**", "top.txt"] }, { globs: ["vendor/**"] }],
          session
        )
        assert.isTrue(taken.every((t) => t._tag === "Right"))
        return session.hashed
      }))
      // Each file once, though two snapshots took it: the second shares the first's walk of `vendor`.
      assert.strictEqual(cold.hashed.length, files.size)
      assert.strictEqual(hashedByIndex, files.size)
      assert.deepStrictEqual(new Map(cold.hashed), files)
      assert.strictEqual(cold.settled(), 1)

      const warm = recorder()
      yield* Effect.scoped(Effect.gen(function*() {
        const session = yield* store.snapshotSession(ws, { progress: warm.progress })
        yield* store.snapshotMany(ws, [{ globs: ["vendor/**", "top.txt"] }], session)
        yield* store.snapshot(ws, ["top.txt"], session)
      }))
      assert.deepStrictEqual(warm.hashed, [])
      assert.strictEqual(warm.settled(), 2)
    }))
})
