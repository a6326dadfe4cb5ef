/**
 * Small uploads gathered into shared calls: one call in flight at a time, and what is asked for meanwhile goes in the
 * next one, together. A burst of executions (a wave of processes sent to the executor at once) each had its own
 * BatchUpdateBlobs of a few hundred bytes (its `Command` and `Action`): the calls, not the bytes, were the client's
 * cost. Nothing waits for company: an upload asked for while none is in flight starts at once, so a lone execution
 * pays no more than before, and a busy server gathers more into each call.
 *
 * @internal
 */
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as FiberId from "effect/FiberId"
import type * as Scope from "effect/Scope"
import type { RemoteError } from "../RemoteErrors.js"
import type { Blob } from "./transport.js"

/** Uploads `blobs`, sharing its call with others asked for while the one before was in flight. */
export type Gathered = (blobs: ReadonlyArray<Blob>) => Effect.Effect<void, RemoteError>

/** One call's blobs (each digest once) and what its askers wait on. */
interface Batch {
  readonly blobs: Map<string, Blob>
  readonly sent: Deferred.Deferred<void, RemoteError>
}

/**
 * Uploads through `upload`, gathered. The calls run in fibers of `scope` (the connection's): an asker that stops
 * waiting (interrupted) never cancels what others share with it.
 */
export const make = (
  upload: (blobs: ReadonlyArray<Blob>) => Effect.Effect<void, RemoteError>,
  scope: Scope.Scope
): Gathered => {
  let next: Batch | undefined
  let busy = false
  // Sends the batch gathered so far, then the one gathered while it was in flight, until none is left.
  const drain: Effect.Effect<void> = Effect.suspend(() => {
    const batch = next
    next = undefined
    if (batch === undefined) {
      busy = false
      return Effect.void
    }
    return upload([...batch.blobs.values()]).pipe(
      Effect.exit,
      Effect.flatMap((exit) => Deferred.done(batch.sent, exit)),
      Effect.zipRight(drain),
      // The scope closing: nothing more is sent, and nobody is left waiting for it.
      Effect.onInterrupt(() =>
        Effect.suspend(() => {
          const gathered = next
          next = undefined
          busy = false
          return Effect.zipRight(
            Deferred.interrupt(batch.sent),
            gathered !== undefined ? Deferred.interrupt(gathered.sent) : Effect.void
          )
        })
      )
    )
  })
  return (blobs) =>
    Effect.suspend(() => {
      if (blobs.length === 0) return Effect.void
      // Synchronous bookkeeping: no other fiber runs between joining a batch and starting the drain.
      const batch = next ??= { blobs: new Map(), sent: Deferred.unsafeMake<void, RemoteError>(FiberId.none) }
      for (const b of blobs) batch.blobs.set(b.digest.hash, b)
      const start = busy ? Effect.void : Effect.asVoid(Effect.forkIn(drain, scope))
      busy = true
      return Effect.zipRight(start, Deferred.await(batch.sent))
    })
}
