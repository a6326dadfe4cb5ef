/**
 * A fair counting semaphore: waiters queue first in, first out, and a released permit is handed to the first of them
 * directly. Effect's own `Semaphore` (3.22) wakes every waiter on each release; all but one find the permit gone and
 * wait again, nested inside the wait they woke from. With hundreds of processes queued for two permits (a cold run of
 * a wide graph), each release cost a wake-up of every waiter, and each waiter's fiber stack grew by three frames per
 * release: a cold run of hundreds of processes held a great deal of memory in such frames, and the work grew with
 * the square of the queue.
 *
 * Waiting stays interruptible; a waiter interrupted after its permit was handed over passes it on.
 *
 * @internal
 */
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as FiberId from "effect/FiberId"

/** @internal */
export interface Permits {
  /** Runs `self` holding one permit, waiting in line for it first. */
  readonly withPermit: <A, E, R>(self: Effect.Effect<A, E, R>) => Effect.Effect<A, E, R>
  /** Permits free right now, fibers waiting, and how many times a waiter was woken so far: for tests. */
  readonly state: Effect.Effect<{ readonly free: number; readonly waiting: number; readonly wakeUps: number }>
}

interface Waiter {
  readonly granted: Deferred.Deferred<void>
  /** Interrupted while in line: skipped when its turn comes. */
  left: boolean
}

/** @internal */
export const unsafeMake = (permits: number): Permits => {
  let free = Math.max(1, permits)
  // A FIFO with a moving head: O(1) to join and to leave from the front.
  let queue: Array<Waiter> = []
  let head = 0
  let waiting = 0
  let wakeUps = 0

  const next = (): Waiter | undefined => {
    while (head < queue.length) {
      const w = queue[head++]!
      if (head > 1024 && head * 2 > queue.length) {
        queue = queue.slice(head)
        head = 0
      }
      if (!w.left) {
        waiting--
        return w
      }
    }
    return undefined
  }

  const release = () => {
    const w = next()
    if (w === undefined) free++
    else {
      wakeUps++
      Deferred.unsafeDone(w.granted, Effect.void)
    }
  }

  const acquire = Effect.suspend((): Effect.Effect<void> => {
    if (free > 0 && waiting === 0) {
      free--
      return Effect.void
    }
    const w: Waiter = { granted: Deferred.unsafeMake<void>(FiberId.none), left: false }
    queue.push(w)
    waiting++
    return Effect.onInterrupt(
      Deferred.await(w.granted),
      () =>
        Effect.flatMap(Deferred.isDone(w.granted), (handedOver) =>
          Effect.sync(() => {
            if (handedOver) {
              // The permit came as the interruption did: pass it on.
              release()
            } else {
              w.left = true
              waiting--
            }
          }))
    )
  })

  return {
    withPermit: (self) =>
      Effect.uninterruptibleMask((restore) =>
        Effect.zipRight(restore(acquire), Effect.ensuring(restore(self), Effect.sync(release)))
      ),
    state: Effect.sync(() => ({ free, waiting, wakeUps }))
  }
}

/** @internal */
export const make = (permits: number): Effect.Effect<Permits> => Effect.sync(() => unsafeMake(permits))
