/**
 * At most `concurrency` sandboxes at once (the processes running in them are bounded apart, see `LocalOptions.running`), granted in the order asked (see {@link Permits}); a waiting fiber stays
 * interruptible (Ctrl-C while queued costs nothing).
 *
 * @internal
 */
import * as Effect from "effect/Effect"
import * as Permits from "../../../domain/Permits.js"
import { ProcessResult } from "../../../domain/Process.js"
import type { Runner } from "./runner.js"

/** @internal */
export const make = (concurrency: number, inner: Runner): Effect.Effect<Runner> =>
  Effect.map(Permits.make(concurrency), (permits) => (proc, policy) =>
    Effect.suspend(() => {
      const queued = Date.now()
      return permits.withPermit(
        Effect.suspend(() => {
          const waited = Date.now() - queued
          return Effect.map(inner(proc, policy), (r) =>
            new ProcessResult({ ...r, timings: { ...r.timings, queue: waited + (r.timings.queue ?? 0) } }, true))
        })
      )
    }))
