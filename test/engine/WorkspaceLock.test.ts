/**
 * The workspace lock within one process: a second holder waits for the first (two runs of one engine on one
 * workspace), saying so once, and takes it when the first's scope closes; a lock directory kiln cannot make falls
 * back to the store's, saying so. Live clock: the waiting is a real Schedule.
 */
import { assert, describe, it } from "@effect/vitest"
import { Deferred, Effect, Exit, Fiber, Logger, Option, Scope } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"
import * as WorkspaceLock from "../../src/layers/engine/internal/workspaceLock.js"
import { tempDir } from "../utils/temp.js"

/** A logger that keeps each message, and completes `first` with the first one. */
const keeping = (lines: Array<string>, first: Deferred.Deferred<void>) =>
  Logger.replace(
    Logger.defaultLogger,
    Logger.make(({ message }) => {
      lines.push((Array.isArray(message) ? message : [message]).map(String).join(" "))
      Deferred.unsafeDone(first, Exit.void)
    })
  )

describe("WorkspaceLock", () => {
  it.scopedLive("a second holder waits for the first, says so once, and takes it once the first's scope closes", () =>
    Effect.gen(function*() {
      const root = yield* tempDir()
      const ws = path.join(root, "ws")
      fs.mkdirSync(ws)
      const locks = path.join(root, "locks")
      const firstScope = yield* Scope.make()
      const first = yield* Scope.extend(WorkspaceLock.make(ws, locks, path.join(root, "store")), firstScope)
      assert.deepStrictEqual(yield* first.hold, { previousDied: false })
      // Held for the scope: asking again does not wait for itself.
      assert.deepStrictEqual(yield* first.hold, { previousDied: false })
      const lines: Array<string> = []
      const said = yield* Deferred.make<void>()
      const second = yield* WorkspaceLock.make(ws, locks, path.join(root, "store"))
      const waiting = yield* Effect.fork(Effect.provide(second.hold, keeping(lines, said)))
      yield* Deferred.await(said)
      assert.deepStrictEqual(lines, [`waiting for another kiln run in this workspace (pid ${process.pid})`])
      assert.isTrue(Option.isNone(yield* Fiber.poll(waiting)))
      yield* Scope.close(firstScope, Exit.void)
      assert.deepStrictEqual(yield* Fiber.join(waiting), { previousDied: false })
      assert.strictEqual(lines.length, 1, lines.join("\n"))
      assert.strictEqual(fs.readdirSync(locks).length, 1)
    }))

  it.scopedLive("a lock directory kiln cannot make: the lock is kept in the store's instead, and the run says so", () =>
    Effect.gen(function*() {
      const root = yield* tempDir()
      const ws = path.join(root, "ws")
      fs.mkdirSync(ws)
      fs.writeFileSync(path.join(root, "file"), "")
      const lines: Array<string> = []
      const said = yield* Deferred.make<void>()
      const lock = yield* WorkspaceLock.make(ws, path.join(root, "file/locks"), path.join(root, "store"))
      assert.deepStrictEqual(yield* Effect.provide(lock.hold, keeping(lines, said)), { previousDied: false })
      assert.strictEqual(fs.readdirSync(path.join(root, "store")).length, 1)
      assert.strictEqual(lines.length, 1)
      assert.match(lines[0]!, /^cannot keep the workspace lock in .*\/file\/locks \(.*\): kept in the store instead/)
    }))
})
