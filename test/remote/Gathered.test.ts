/**
 * Small uploads gathered into shared calls (src/layers/remote/internal/gathered.ts), over an upload that records its
 * calls: a lone upload goes at once; those asked for while a call is in flight go together in the next one, each blob
 * once; a call's failure reaches every asker of its batch, and the next batch goes all the same.
 */
import { assert, describe, it } from "@effect/vitest"
import { Deferred, Effect, Either, Fiber } from "effect"
import * as Digest from "../../src/domain/Digest.js"
import * as Gathered from "../../src/layers/remote/internal/gathered.js"
import type { Blob } from "../../src/layers/remote/internal/transport.js"
import { RemoteError } from "../../src/layers/remote/RemoteErrors.js"

const blob = (text: string): Blob => {
  const bytes = new TextEncoder().encode(text)
  return { digest: Digest.ofBytes(bytes), bytes }
}
const names = new Map(["a", "b", "c", "d", "bad"].map((t) => [blob(t).digest.hash, t]))

/** An upload that records each call's blobs (by their text), holds the first until `release`, and fails on "bad". */
const recorder = Effect.gen(function*() {
  const calls: Array<Array<string>> = []
  const inFlight = yield* Deferred.make<void>()
  const release = yield* Deferred.make<void>()
  const upload = (blobs: ReadonlyArray<Blob>) =>
    Effect.suspend(() => {
      const texts = blobs.map((b) => names.get(b.digest.hash)!).sort()
      calls.push(texts)
      const held = calls.length === 1
        ? Effect.zipRight(Deferred.succeed(inFlight, undefined), Deferred.await(release))
        : Effect.void
      return Effect.zipRight(
        held,
        texts.includes("bad")
          ? Effect.fail(
            new RemoteError({ endpoint: "test", method: "BatchUpdateBlobs", code: "INTERNAL", detail: "bad" })
          )
          : Effect.void
      )
    })
  return { calls, inFlight, release, upload }
})

describe("gathered uploads", () => {
  it.scoped("what is asked for while a call is in flight goes in the next call, together, each blob once", () =>
    Effect.gen(function*() {
      const r = yield* recorder
      const send = Gathered.make(r.upload, yield* Effect.scope)
      const first = yield* Effect.fork(send([blob("a")]))
      yield* Deferred.await(r.inFlight)
      const second = yield* Effect.fork(send([blob("b"), blob("c")]))
      const third = yield* Effect.fork(send([blob("c"), blob("d")]))
      // Both join the batch before the first call ends: they run until they wait on it.
      yield* Effect.yieldNow()
      yield* Deferred.succeed(r.release, undefined)
      yield* Fiber.join(Fiber.zip(first, Fiber.zip(second, third)))
      assert.deepStrictEqual(r.calls, [["a"], ["b", "c", "d"]])
      // Nothing in flight: a lone upload goes at once, in a call of its own.
      yield* send([blob("d")])
      assert.deepStrictEqual(r.calls.at(-1), ["d"])
    }))

  it.scoped("a call's failure reaches every asker of its batch; the next batch goes all the same", () =>
    Effect.gen(function*() {
      const r = yield* recorder
      const send = Gathered.make(r.upload, yield* Effect.scope)
      const first = yield* Effect.fork(send([blob("a")]))
      yield* Deferred.await(r.inFlight)
      const bad = yield* Effect.fork(Effect.either(send([blob("bad")])))
      const withBad = yield* Effect.fork(Effect.either(send([blob("b")])))
      yield* Effect.yieldNow()
      yield* Deferred.succeed(r.release, undefined)
      yield* Fiber.join(first)
      const outcomes = [yield* Fiber.join(bad), yield* Fiber.join(withBad)]
      assert.deepStrictEqual(outcomes.map((o) => Either.isLeft(o) ? o.left.detail : "sent"), ["bad", "bad"])
      yield* send([blob("c")])
      assert.deepStrictEqual(r.calls, [["a"], ["b", "bad"], ["c"]])
    }))
})
