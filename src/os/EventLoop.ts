/**
 * Turns of the event loop inside long stretches of synchronous work. Effect's scheduler yields between fibers on the
 * microtask queue, which never lets Node poll its sockets or run its timers: a loop that writes thousands of files
 * with synchronous calls keeps a process deaf for as long as it runs. That is how a sandboxer writing a
 * `node_modules` tree missed its client's RPC pings (a 10 s window) and was declared unreachable, killed and
 * restarted while it worked, failing every process that waited on it.
 */
import * as Effect from "effect/Effect"

/** How long synchronous work may keep the event loop from a turn. */
const DEFAULT_SLICE_MS = 20

/**
 * An effect to run between steps of a long loop: it gives the event loop one turn (a timer of 0 ms, after which Node
 * has polled its sockets) once `sliceMs` have passed since the last turn, and does nothing otherwise.
 */
export const pacer = (sliceMs: number = DEFAULT_SLICE_MS): Effect.Effect<void> => {
  let last = Date.now()
  return Effect.suspend(() => {
    const now = Date.now()
    if (now - last < sliceMs) return Effect.void
    return Effect.zipRight(Effect.sleep(0), Effect.sync(() => void (last = Date.now())))
  })
}
