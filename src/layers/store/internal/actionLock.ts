/**
 * A lock per action digest, across processes, so that two engines that need the same uncached action at the same
 * moment run it once. It lives in a small LMDB environment of its own, committed synchronously (such a commit
 * takes microseconds; handing it to lmdb-js's write thread and waiting for the answer took milliseconds on a busy
 * engine, twice per process) and, like every shard, without an fsync (see `lmdb/unsynced.ts`): LMDB's write lock
 * makes test-and-set atomic across processes, nothing is a file to unlink while another process holds it, and a
 * lock whose owner died (pid gone, or pid recycled with another start time) is taken over.
 *
 * @internal
 */
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import type * as Digest from "../../../domain/Digest.js"
import { StoreError } from "../../../domain/StoreErrors.js"
import * as Proc from "../../../os/Proc.js"
import * as LmdbCommit from "./lmdb/commit.js"
import * as LmdbEnvs from "./lmdb/envs.js"
import * as Sharded from "./lmdb/shards.js"

const me = Proc.self()
const mine = Buffer.from(JSON.stringify({ pid: me.pid, startTime: me.startTime }))

/** A synchronous write transaction on the lock of `hash`; its failure names the shard. */
const onLock = <A>(
  shards: Sharded.Shards,
  hash: string,
  action: string,
  f: (locks: NonNullable<LmdbEnvs.SharedEnv["locks"]>, key: Buffer) => A
): Effect.Effect<A, StoreError> =>
  Effect.suspend(() => {
    const shard = Sharded.shardOf(shards, hash)
    if (shard instanceof StoreError) return Effect.fail(shard)
    const locks = shard.locks
    if (locks === undefined) {
      return Effect.fail(new StoreError({ reason: "Lmdb", detail: `${action}: no lock table here`, path: shard.path }))
    }
    const key = Sharded.keyOf(hash)
    const unmarked = LmdbEnvs.markWritten([shard], action)
    if (unmarked !== undefined) return Effect.fail(unmarked)
    return Effect.try({
      try: () => shard.env.transactionSync(() => f(locks, key)),
      catch: (e) => LmdbCommit.failure(shard, action, e)
    })
  })

const tryAcquire = (shards: Sharded.Shards, hash: string): Effect.Effect<boolean, StoreError> =>
  onLock(shards, hash, "action lock", (locks, key) => {
    const held = locks.getBinary(key)
    if (held !== undefined) {
      if (Buffer.compare(held, mine) === 0) return true
      try {
        const owner = JSON.parse(held.toString("utf8")) as Proc.Owner
        if (Proc.ownerAlive(owner)) return false
      } catch {
        // An unreadable owner cannot be waited for: take the lock over.
      }
    }
    locks.putSync(key, mine)
    return true
  })

const release = (shards: Sharded.Shards, hash: string): Effect.Effect<void> =>
  onLock(shards, hash, "could not release the action lock", (locks, key) => {
    const held = locks.getBinary(key)
    if (held !== undefined && Buffer.compare(held, mine) === 0) locks.removeSync(key)
  }).pipe(Effect.catchAll((e) => Effect.logWarning(e.message)))

/**
 * Runs `run` holding the lock for `action`. While another live process holds it, polls `whileWaiting` (which looks
 * for the result the holder will store) and returns its value as soon as it has one, without running.
 *
 * @internal
 */
export const withActionLock = <A, E, R>(
  shards: Sharded.Shards,
  action: Digest.Digest,
  whileWaiting: Effect.Effect<Option.Option<A>, E, R>,
  run: Effect.Effect<A, E, R>,
  options: {
    /**
     * Finishes after `run` succeeded, still holding the lock, without the caller waiting: `background` runs it (and
     * then the release). Storing the result this way keeps its commit off the caller's path, while another process
     * waiting for the lock still finds the result once the lock is free.
     */
    readonly after?: {
      readonly finish: (a: A) => Effect.Effect<void>
      readonly background: (effect: Effect.Effect<void>) => Effect.Effect<void>
    }
    readonly poll?: Duration.DurationInput
  } = {}
): Effect.Effect<A, E | StoreError, R> =>
  Effect.gen(function*() {
    const poll = options.poll ?? Duration.millis(50)
    const after = options.after
    const unlock = release(shards, action.hash)
    for (;;) {
      // Only `run` (and the wait) can be interrupted: a lock taken is always released, or handed to `background`.
      const ran = yield* Effect.uninterruptibleMask((restore) =>
        Effect.flatMap(tryAcquire(shards, action.hash), (acquired) => {
          if (!acquired) return Effect.succeedNone
          if (after === undefined) return Effect.asSome(Effect.ensuring(restore(run), unlock))
          return Effect.flatMap(
            Effect.onExit(restore(run), (exit) => exit._tag === "Success" ? Effect.void : unlock),
            (a) => Effect.as(after.background(Effect.ensuring(after.finish(a), unlock)), Option.some(a))
          )
        })
      )
      if (Option.isSome(ran)) return ran.value
      const done = yield* whileWaiting
      if (Option.isSome(done)) return done.value
      yield* Effect.sleep(poll)
    }
  })
