/**
 * The fair semaphore of the bounded runner: at most n at once, granted first in first out, interruptible while
 * waiting without losing a permit, and a release wakes one waiter, not all of them.
 */
import { assert, describe, it } from "@effect/vitest"
import { Deferred, Effect, Fiber } from "effect"
import * as Permits from "../../src/domain/Permits.js"

describe("Permits", () => {
  it.effect("at most n hold a permit at once, and they are granted in the order asked", () =>
    Effect.gen(function*() {
      const permits = yield* Permits.make(2)
      let holding = 0
      let most = 0
      const order: Array<number> = []
      yield* Effect.forEach(Array.from({ length: 200 }, (_, i) => i), (i) =>
        permits.withPermit(Effect.gen(function*() {
          order.push(i)
          holding++
          most = Math.max(most, holding)
          yield* Effect.yieldNow()
          yield* Effect.yieldNow()
          holding--
        })), { concurrency: "unbounded", discard: true })
      assert.strictEqual(most, 2)
      assert.deepStrictEqual(order, Array.from({ length: 200 }, (_, i) => i))
      assert.deepInclude(yield* permits.state, { free: 2, waiting: 0 })
    }))

  it.effect("a waiter interrupted in line leaves it; one interrupted as its permit came passes the permit on", () =>
    Effect.gen(function*() {
      const permits = yield* Permits.make(1)
      const gate = yield* Deferred.make<void>()
      const holder = yield* Effect.fork(permits.withPermit(Deferred.await(gate)))
      yield* Effect.yieldNow()
      const first = yield* Effect.fork(permits.withPermit(Effect.never))
      const second = yield* Effect.fork(permits.withPermit(Effect.succeed("second ran")))
      yield* Effect.yieldNow()
      assert.deepInclude(yield* permits.state, { free: 0, waiting: 2 })
      // The holder finishes, which hands the permit to `first`, and `first` is interrupted before it can run.
      yield* Deferred.succeed(gate, undefined)
      yield* Fiber.interrupt(first)
      yield* Fiber.join(holder)
      assert.strictEqual(yield* Fiber.join(second), "second ran")
      assert.deepInclude(yield* permits.state, { free: 1, waiting: 0 })

      // Interrupted while still in line: the next one still gets its turn.
      const gate2 = yield* Deferred.make<void>()
      const holder2 = yield* Effect.fork(permits.withPermit(Deferred.await(gate2)))
      yield* Effect.yieldNow()
      const leaver = yield* Effect.fork(permits.withPermit(Effect.void))
      const stayer = yield* Effect.fork(permits.withPermit(Effect.succeed("stayer ran")))
      yield* Effect.yieldNow()
      yield* Fiber.interrupt(leaver)
      assert.deepInclude(yield* permits.state, { free: 0, waiting: 1 })
      yield* Deferred.succeed(gate2, undefined)
      yield* Fiber.join(holder2)
      assert.strictEqual(yield* Fiber.join(stayer), "stayer ran")
      assert.deepInclude(yield* permits.state, { free: 1, waiting: 0 })
    }))

  it.effect("a release wakes one waiter: each of 2,000 queued for one permit is woken exactly once", () =>
    Effect.gen(function*() {
      const permits = yield* Permits.make(1)
      let ran = 0
      // Effect's Semaphore woke every waiter on each release (~2,000² wake-ups here), and each lost race left a
      // stack frame behind in the waiter.
      yield* Effect.forEach(
        Array.from({ length: 2000 }, (_, i) => i),
        () => permits.withPermit(Effect.sync(() => void ran++)),
        { concurrency: "unbounded", discard: true }
      )
      assert.strictEqual(ran, 2000)
      const state = yield* permits.state
      assert.deepInclude(state, { free: 1, waiting: 0 })
      assert.isAtMost(state.wakeUps, 1999)
    }))
})
