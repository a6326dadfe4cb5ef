/**
 * A running process's output as it is written, for a caller that asked (`RunPolicy.onOutput`): its log files (where
 * the spawner sends stdout and stderr: no pipe for the engine to service) are read from where the last look stopped,
 * every {@link FOLLOW_MS}, and once more when its group is gone, so every byte is told once, in order.
 *
 * @internal
 */
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Schedule from "effect/Schedule"
import * as fs from "node:fs"
import type { RunPolicy } from "./runner.js"

/** How often a followed process's logs are looked at: often enough to read as live, rarely enough to cost nothing. */
const FOLLOW_MS = 100

/** The most read from one log in one look: a process that writes faster is told in pieces. */
const CHUNK_MAX = 1024 * 1024

type OnOutput = NonNullable<RunPolicy["onOutput"]>

/** What was added to `file` since `offset`; none when it cannot be read (the capture that follows says why). */
const newBytes = (file: string, offset: number): Uint8Array | undefined => {
  let fd: number | undefined
  try {
    const size = fs.statSync(file, { throwIfNoEntry: false })?.size ?? 0
    if (size <= offset) return undefined
    fd = fs.openSync(file, "r")
    const buffer = Buffer.alloc(Math.min(size - offset, CHUNK_MAX))
    const read = fs.readSync(fd, buffer, 0, buffer.length, offset)
    return read === 0 ? undefined : buffer.subarray(0, read)
  } catch {
    return undefined
  } finally {
    if (fd !== undefined) fs.closeSync(fd)
  }
}

/**
 * Follows `logs` while `effect` runs (the process's life), telling `onOutput` what each gained; what is left when it
 * ends is told before this returns.
 *
 * @internal
 */
export const following = <A, E, R>(
  logs: { readonly stdout: string; readonly stderr: string },
  onOutput: OnOutput | undefined,
  effect: Effect.Effect<A, E, R>
): Effect.Effect<A, E, R> => {
  if (onOutput === undefined) return effect
  const offsets = { stdout: 0, stderr: 0 }
  const look = (drain: boolean): Effect.Effect<void> =>
    Effect.forEach(["stdout", "stderr"] as const, (stream) =>
      Effect.suspend(function told(): Effect.Effect<void> {
        const bytes = newBytes(logs[stream], offsets[stream])
        if (bytes === undefined) return Effect.void
        offsets[stream] += bytes.length
        const tell = onOutput(stream, bytes)
        return drain && bytes.length === CHUNK_MAX ? Effect.zipRight(tell, Effect.suspend(told)) : tell
      }), { discard: true })
  return Effect.flatMap(
    Effect.fork(Effect.repeat(look(false), Schedule.spaced(FOLLOW_MS))),
    (poller) => Effect.ensuring(effect, Effect.zipRight(Fiber.interrupt(poller), look(true)))
  )
}
