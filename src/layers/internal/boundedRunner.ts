/**
 * At most `concurrency` processes at once. Effect's semaphore queues waiters in order, and a waiting fiber stays
 * interruptible (Ctrl-C while queued costs nothing).
 *
 * @internal
 */
import { Effect } from "effect"
import { ProcessResult } from "../../domain/Process.js"
import type { Runner } from "./runner.js"

/** @internal */
export const make = (concurrency: number, inner: Runner): Effect.Effect<Runner> =>
  Effect.map(Effect.makeSemaphore(Math.max(1, concurrency)), (permits) => (process, policy) =>
    Effect.suspend(() => {
      const queued = Date.now()
      return permits.withPermits(1)(
        Effect.suspend(() => {
          const waited = Date.now() - queued
          return Effect.map(inner(process, policy), (r) =>
            new ProcessResult({ ...r, timings: { ...r.timings, queue: waited } }, true))
        })
      )
    }))
