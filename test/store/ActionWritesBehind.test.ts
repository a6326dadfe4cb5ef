/**
 * The action results a store writes in the background (`withActionLock`'s `store`, which may wait for a check of
 * the process's inputs): `actionsWritten` waits for every one, a second write of the same action (a re-run's,
 * started while the first still waits) included, and each is committed once it is let through.
 */
import { assert, describe, it } from "@effect/vitest"
import { Deferred, Effect, Option } from "effect"
import * as Digest from "../../src/domain/Digest.js"
import * as Store from "../../src/layers/store/Store.js"
import { tempDir } from "../utils/temp.js"

describe("Store: action results written behind", () => {
  it.scopedLive("actionsWritten waits for a held write of an action that a second write of it overtook", () =>
    Effect.gen(function*() {
      const root = yield* tempDir("kiln-action-behind-")
      const store = yield* Store.make({ root, shardCount: 1 })
      const action = Digest.ofBytes(Buffer.from("an action run twice"))
      const gate = yield* Deferred.make<void>()
      // Let through whatever the test finds, first as it ends: the store's closing waits for the write.
      yield* Effect.addFinalizer(() => Deferred.succeed(gate, undefined))
      const first = yield* store.withActionLock(
        action,
        Effect.succeedNone,
        Effect.succeed("first"),
        () => Effect.zipRight(Deferred.await(gate), Effect.succeedSome(Buffer.from("first entry")))
      )
      const second = yield* store.withActionLock(
        action,
        Effect.succeedNone,
        Effect.succeed("second"),
        () => Effect.succeedSome(Buffer.from("second entry"))
      )
      assert.deepStrictEqual([first, second], ["first", "second"])
      // The second is written at once; the first is held: not everything is written yet.
      const early = yield* store.actionsWritten.pipe(Effect.timeout("1 second"), Effect.option)
      assert.isTrue(Option.isNone(early), "actionsWritten did not wait for the held write")
      yield* Deferred.succeed(gate, undefined)
      yield* store.actionsWritten
      const [entry] = yield* store.getActionResults([action])
      assert.isTrue(Option.isSome(entry!))
    }))
})
