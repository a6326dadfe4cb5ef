/**
 * Writing a large tree keeps the process responsive: the sandboxer answers its client's RPC pings while it writes a
 * `node_modules` of thousands of files, instead of being declared unreachable and restarted mid-way.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Fiber } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"
import { tempDir, tempStore, writeTree } from "../utils/temp.js"

/** Completes on the event loop's next check phase, which follows its poll of sockets and timers. */
const nextTurn = Effect.async<void>((resume) => {
  const handle = setImmediate(() => resume(Effect.void))
  return Effect.sync(() => clearImmediate(handle))
})

describe("Store.materialize", () => {
  it.scopedLive("a tree of 10,000 files gives the event loop turns while it is written", () =>
    Effect.gen(function*() {
      const work = yield* tempDir("kiln-turns-")
      const files: Record<string, string> = {}
      for (let d = 0; d < 100; d++) for (let f = 0; f < 100; f++) files[`pkg${d}/lib/f${f}.js`] = `${d}/${f}\n`
      writeTree(path.join(work, "tree"), files)
      const store = yield* tempStore()
      const digest = yield* store.snapshot(path.join(work, "tree"))
      const writing = yield* Effect.fork(store.materialize(digest, path.join(work, "out")))
      // An immediate runs only after Node has polled its sockets, on a turn of the event loop: the first turn must
      // come while the tree is being written, not after.
      yield* nextTurn
      const doneAtFirstTurn = (yield* Fiber.poll(writing))._tag === "Some"
      yield* Fiber.join(writing)
      assert.isFalse(doneAtFirstTurn, "the event loop had no turn until all 10,000 files were written")
      assert.strictEqual(fs.readFileSync(path.join(work, "out/pkg99/lib/f99.js"), "utf8"), "99/99\n")
    }))
})
