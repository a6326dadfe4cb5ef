/**
 * One kind of LMDB store (files, directories, action cache) split into shards chosen by the digest's leading bits,
 * so that writers of different digests rarely queue for the same write lock.
 *
 * @internal
 */
import * as Effect from "effect/Effect"
import type * as Scope from "effect/Scope"
import * as path from "node:path"
import { StoreConfigConflict, StoreError } from "../../../../domain/StoreErrors.js"
import { ioError } from "../../../../os/IoError.js"
import * as Generation from "../../Generation.js"
import * as LmdbCommit from "./commit.js"
import * as LmdbFile from "./dataFile.js"
import * as LmdbEnvs from "./envs.js"

/** @internal */
export interface Shards {
  /** The store's root: removals move its generation on. */
  readonly root: string
  readonly kind: string
  readonly count: number
  readonly shift: number
  readonly settings: LmdbEnvs.EnvSettings
  /** The environments opened so far, by shard index: a shard is opened on first use (see {@link open}). */
  readonly opened: Array<LmdbEnvs.SharedEnv | undefined>
  /** Set when the scope closed and the environments were released: nothing is opened after that. */
  closed: boolean
  /** Bytes of the entries this process added (not those it found stored): what the store's cap counts. */
  readonly added: { bytes: number }
}

/** @internal */
export interface Lease {
  readonly until: number
  readonly size: number
}

/** @internal */
export interface Entry {
  readonly hash: string
  readonly value: Uint8Array
}

/** Moves the store's generation on: before anything is removed from it. @internal */
export const bumpGeneration = (shards: Shards): Effect.Effect<void, StoreError> =>
  Effect.try({
    try: () => Generation.bump(shards.root),
    catch: ioError(path.join(shards.root, "generation"), "cannot move the store's generation on")
  })

/** @internal */
export const isPowerOfTwo = (n: number): boolean => Number.isInteger(n) && n >= 1 && n <= 256 && (n & (n - 1)) === 0

/**
 * The shards of one kind. Shard 0 is opened at once (a store with other settings in this process, or a data file
 * LMDB must not map, is reported here); the others on first use, so that a run that touches a few entries opens a
 * few environments (each open costs about a millisecond, and every mapped environment makes each later `fork()`
 * of the process slower). Every environment opened is released with the scope.
 *
 * @internal
 */
export const open = (
  root: string,
  kind: string,
  shardCount: number,
  settings: LmdbEnvs.EnvSettings
): Effect.Effect<Shards, StoreError | StoreConfigConflict, Scope.Scope> =>
  Effect.gen(function*() {
    yield* LmdbEnvs.preload
    const shards: Shards = {
      root,
      kind,
      count: shardCount,
      shift: 8 - Math.log2(shardCount),
      settings,
      opened: Array.from({ length: shardCount }, () => undefined),
      closed: false,
      added: { bytes: 0 }
    }
    // All at once: each release waits on lmdb-js's threads (its last commit, its sync, its close), not on this one.
    yield* Effect.addFinalizer(() =>
      Effect.suspend(() => {
        shards.closed = true
        return Effect.forEach(shards.opened, (env) => env === undefined ? Effect.void : LmdbEnvs.release(env), {
          discard: true,
          concurrency: "unbounded"
        })
      })
    )
    // Every shard's data file is checked now, although most are opened later: a truncated one is reported when the
    // store is opened, as one line naming it, not as the failure of whichever process first reads that shard.
    yield* Effect.suspend(() => {
      for (let i = 1; i < shardCount; i++) {
        const unsafe = LmdbFile.check(dirOf(shards, i), settings.maxReaders)
        if (unsafe !== undefined) return Effect.fail(unsafe)
      }
      return Effect.void
    }).pipe(LmdbFile.settling)
    shards.opened[0] = yield* LmdbEnvs.acquire(dirOf(shards, 0), settings).pipe(
      Effect.map((env) => {
        // Held by `opened` (released with it above), not by a scope of its own.
        env.refs++
        return env
      }),
      Effect.scoped
    )
    return shards
  })

const dirOf = (shards: Shards, index: number) => path.join(shards.root, shards.kind, index.toString(16))

/** The environment of shard `index`, opened now if it is not yet. @internal */
export const envAt = (shards: Shards, index: number): LmdbEnvs.SharedEnv | StoreError => {
  if (shards.closed) {
    return new StoreError({ reason: "Lmdb", detail: "the store is closed", path: dirOf(shards, index) })
  }
  const known = shards.opened[index]
  if (known !== undefined) return known
  const opened = LmdbEnvs.openSync(dirOf(shards, index), shards.settings)
  if (opened instanceof StoreConfigConflict) {
    return new StoreError({ reason: "Lmdb", detail: opened.message, path: opened.path })
  }
  if (opened instanceof StoreError) return opened
  shards.opened[index] = opened
  return opened
}

/** The environment of the shard that holds `hash`, opened on first use. @internal */
export const shardOf = (shards: Shards, hash: string): LmdbEnvs.SharedEnv | StoreError =>
  envAt(shards, shards.shift === 8 ? 0 : parseInt(hash.slice(0, 2), 16) >> shards.shift)

/** Every shard's environment, opening those not yet open: for scans over the whole store. @internal */
export const allEnvs = (shards: Shards): Effect.Effect<Array<LmdbEnvs.SharedEnv>, StoreError> =>
  Effect.suspend(() => {
    const envs: Array<LmdbEnvs.SharedEnv> = []
    for (let i = 0; i < shards.count; i++) {
      const env = envAt(shards, i)
      if (env instanceof StoreError) return Effect.fail(env)
      envs.push(env)
    }
    return Effect.succeed(envs)
  })

/** @internal */
export const keyOf = (hash: string): Buffer => Buffer.from(hash, "hex")

/** @internal */
export const encodeLease = (lease: Lease): Buffer => {
  const b = Buffer.allocUnsafe(16)
  b.writeDoubleLE(lease.until, 0)
  b.writeDoubleLE(lease.size, 8)
  return b
}

/** @internal */
export const decodeLease = (b: Uint8Array | undefined): Lease | undefined => {
  if (b === undefined || b.length !== 16) return undefined
  const buf = Buffer.from(b.buffer, b.byteOffset, 16)
  return { until: buf.readDoubleLE(0), size: buf.readDoubleLE(8) }
}

/** A read of the shard that holds `hash` (opened on first use). */
const readShard = <A>(
  shards: Shards,
  hash: string,
  f: (shard: LmdbEnvs.SharedEnv) => A
): Effect.Effect<A, StoreError> =>
  Effect.suspend(() => {
    const shard = shardOf(shards, hash)
    return shard instanceof StoreError ? Effect.fail(shard) : LmdbEnvs.read(shard, () => f(shard))
  })

/** @internal */
export const has = (shards: Shards, hash: string): Effect.Effect<boolean, StoreError> =>
  readShard(shards, hash, (shard) => shard.content.doesExist(keyOf(hash)))

/** A fresh copy of the value. @internal */
export const get = (shards: Shards, hash: string): Effect.Effect<Buffer | undefined, StoreError> =>
  readShard(shards, hash, (shard) => shard.content.getBinary(keyOf(hash)))

/**
 * Lends the value to `f` without copying: the view is valid only until the next read, so `f` must consume it
 * synchronously.
 *
 * @internal
 */
export const withValue = <A>(
  shards: Shards,
  hash: string,
  f: (bytes: Uint8Array | undefined) => A
): Effect.Effect<A, StoreError> =>
  readShard(shards, hash, (shard) => {
    const b = shard.content.getBinaryFast(keyOf(hash))
    // getBinaryFast returns a window on a 16 MiB shared buffer whose `length` is overridden: slice it first.
    return f(b === undefined ? undefined : b.subarray(0, b.length))
  })

/** @internal */
export const getLease = (shards: Shards, hash: string): Effect.Effect<Lease | undefined, StoreError> =>
  readShard(shards, hash, (shard) => decodeLease(shard.leases.getBinary(keyOf(hash))))

const writeFailed = (shard: LmdbEnvs.SharedEnv) => (e: unknown) => LmdbCommit.failure(shard, "write failed", e)

const groupByShard = <T extends { readonly hash: string }>(
  shards: Shards,
  items: ReadonlyArray<T>
): Map<LmdbEnvs.SharedEnv, Array<T>> | StoreError => {
  const groups = new Map<LmdbEnvs.SharedEnv, Array<T>>()
  for (const item of items) {
    const shard = shardOf(shards, item.hash)
    if (shard instanceof StoreError) return shard
    let group = groups.get(shard)
    if (group === undefined) groups.set(shard, group = [])
    group.push(item)
  }
  return groups
}

/**
 * Entries this process did not write because its read snapshot showed them present with a fresh lease (another
 * process had written them), by hash: when one of them later turns out missing, the error can say so. The
 * failure it is kept for (a merged input root gone from the store with no one removing it) has been seen twice in
 * the fault harness and not explained yet. Bounded: the oldest go first.
 */
const skipped = new Map<string, number>()
const SKIPPED_KEPT = 4096

/** When (ms since the epoch) this process skipped writing `hash` because it found it present, if it did. @internal */
export const skippedWrite = (hash: string): number | undefined => skipped.get(hash)

/**
 * Stores entries: one read pass decides what to write, then queued puts that lmdb-js commits as one transaction
 * per shard on its write thread (a `transaction()` callback would copy every value on the main thread, and each
 * call would wait for its own commit before the caller could hash the next batch). Unless `overwrite` (the action
 * cache replaces stale results), an entry already present keeps its bytes; its lease is extended when less than
 * half of it is left (Pants never refreshes a re-stored entry's lease, so GC removed hot entries first). Two
 * processes storing the same digest at once both write the same bytes, which is harmless.
 *
 * @internal
 */
export const putBatch = (
  shards: Shards,
  entries: ReadonlyArray<Entry>,
  leaseUntil: number,
  leaseTimeMs: number,
  overwrite = false
): Effect.Effect<void, StoreError> => putBatches([{ shards, entries, overwrite }], leaseUntil, leaseTimeMs)

/**
 * {@link putBatch} for several stores at once (a snapshot's files and its directories), committed together: one wait
 * for all of their commits rather than a fiber for each (forking two fibers and joining them took more of the
 * engine's thread than the writes).
 *
 * @internal
 */
export const putBatches = (
  batches: ReadonlyArray<
    { readonly shards: Shards; readonly entries: ReadonlyArray<Entry>; readonly overwrite?: boolean }
  >,
  leaseUntil: number,
  leaseTimeMs: number
): Effect.Effect<void, StoreError> =>
  Effect.suspend(() => {
    const writes: Array<() => Array<Promise<unknown>>> = []
    // What new entries add to the store, counted once they are committed (see `usage.ts`).
    const adds: Array<[{ bytes: number }, number]> = []
    const shardsWritten: Array<LmdbEnvs.SharedEnv> = []
    const sizes: Array<number> = []
    for (const { entries, overwrite = false, shards } of batches) {
      if (entries.length === 0) continue
      const groups = groupByShard(shards, entries)
      if (groups instanceof StoreError) return Effect.fail(groups)
      for (const [shard, group] of groups) {
        const plan = LmdbEnvs.readSync(shard, () => {
          const now = Date.now()
          return group.map((entry) => {
            if (overwrite) return "both" as const
            const key = keyOf(entry.hash)
            const lease = decodeLease(shard.leases.getBinary(key))
            if (lease === undefined || !shard.content.doesExist(key)) return "both" as const
            if (lease.until - now < leaseTimeMs / 2) return "lease" as const
            skipped.delete(entry.hash)
            skipped.set(entry.hash, now)
            if (skipped.size > SKIPPED_KEPT) skipped.delete(skipped.keys().next().value!)
            return "none" as const
          })
        })
        if (plan instanceof StoreError) return Effect.fail(plan)
        if (plan.every((p) => p === "none")) continue
        group.forEach((e, i) => plan[i] !== "none" && sizes.push(e.value.length))
        let added = 0
        group.forEach((e, i) => plan[i] === "both" && (added += e.value.length))
        if (added > 0) adds.push([shards.added, added])
        shardsWritten.push(shard)
        writes.push(() => {
          const out: Array<Promise<unknown>> = []
          group.forEach((entry, i) => {
            if (plan[i] === "none") return
            const key = keyOf(entry.hash)
            // A stale lease is renewed with the bytes too: a GC that removed the entry after the read pass (its own
            // re-check found the lease expired) is undone by this commit, never left as a lease without content.
            out.push(
              shard.content.put(key, Buffer.from(entry.value.buffer, entry.value.byteOffset, entry.value.length))
            )
            out.push(shard.leases.put(key, encodeLease({ until: leaseUntil, size: entry.value.length })))
          })
          return out
        })
      }
    }
    // Nothing to write (everything present with a fresh lease, as in a run where nothing changed): no commit to wait
    // for, so no asynchronous hop either.
    if (writes.length === 0) return Effect.void
    const unmarked = LmdbEnvs.markWritten(shardsWritten, "write failed")
    if (unmarked !== undefined) return Effect.fail(unmarked)
    const room = LmdbCommit.reserve(batches[0]!.shards.root, shardsWritten, sizes)
    if (room instanceof StoreError) return Effect.fail(room)
    return Effect.ensuring(
      Effect.tap(
        commitAll(writes.map((w, i) => [shardsWritten[i]!, () => Promise.all(w())] as const)),
        () => Effect.sync(() => adds.forEach(([counter, bytes]) => (counter.bytes += bytes)))
      ),
      room.release
    )
  })

/**
 * Waits for writes to several shards, each failure named by its shard. One promise for all of them rather than a
 * fiber per shard: a store write happens several times per process run, and forking was most of its cost.
 */
const commitAll = <A>(
  jobs: ReadonlyArray<readonly [LmdbEnvs.SharedEnv, () => PromiseLike<A>]>
): Effect.Effect<Array<A>, StoreError> =>
  Effect.tryPromise({
    try: () =>
      Promise.all(jobs.map(([shard, job]) => {
        try {
          return Promise.resolve(job()).catch((e) => Promise.reject(writeFailed(shard)(e)))
        } catch (e) {
          return Promise.reject(writeFailed(shard)(e))
        }
      })),
    catch: (e) => e instanceof StoreError ? e : writeFailed(jobs[0]![0])(e)
  })

/**
 * Extends the leases of present entries (absent ones are skipped). Reads first, so that leases that are still
 * fresh cost no write transaction.
 *
 * @internal
 */
export const lease = (
  shards: Shards,
  hashes: ReadonlyArray<string>,
  leaseUntil: number,
  leaseTimeMs: number
): Effect.Effect<void, StoreError> =>
  Effect.suspend(() => {
    const stale: Array<[LmdbEnvs.SharedEnv, Array<{ hash: string }>]> = []
    const groups = groupByShard(shards, hashes.map((hash) => ({ hash })))
    if (groups instanceof StoreError) return Effect.fail(groups)
    for (const [shard, group] of groups) {
      const now = Date.now()
      const found = LmdbEnvs.readSync(shard, () =>
        group.filter(({ hash }) => {
          const l = decodeLease(shard.leases.getBinary(keyOf(hash)))
          return l !== undefined && l.until - now < leaseTimeMs / 2
        }))
      if (found instanceof StoreError) return Effect.fail(found)
      if (found.length > 0) stale.push([shard, found])
    }
    if (stale.length === 0) return Effect.void
    const unmarked = LmdbEnvs.markWritten(stale.map(([shard]) => shard), "cannot extend leases")
    if (unmarked !== undefined) return Effect.fail(unmarked)
    return Effect.asVoid(commitAll(stale.map(([shard, group]) =>
      [shard, () =>
        shard.env.transaction(() => {
          for (const { hash } of group) {
            const key = keyOf(hash)
            const l = decodeLease(shard.leases.getBinary(key))
            if (l !== undefined) shard.leases.putSync(key, encodeLease({ until: leaseUntil, size: l.size }))
          }
        })] as const
    )))
  })

/**
 * Removes entries. With `onlyIfExpiredAt`, an entry whose lease was extended past that time meanwhile (by another
 * process) is kept: GC decides on a scan, and the decision is re-checked inside the write transaction.
 *
 * @internal
 */
export const removeBatch = (
  shards: Shards,
  hashes: ReadonlyArray<string>,
  onlyIfExpiredAt?: number
): Effect.Effect<Array<string>, StoreError> =>
  hashes.length === 0
    ? Effect.succeed([])
    : Effect.zipRight(bumpGeneration(shards), removeAll(shards, hashes, onlyIfExpiredAt))

const groupsOf = (shards: Shards, hashes: ReadonlyArray<string>) =>
  Effect.suspend(() => {
    const groups = groupByShard(shards, hashes.map((hash) => ({ hash })))
    return groups instanceof StoreError ? Effect.fail(groups) : Effect.succeed([...groups])
  })

const removeAll = (
  shards: Shards,
  hashes: ReadonlyArray<string>,
  onlyIfExpiredAt?: number
): Effect.Effect<Array<string>, StoreError> =>
  Effect.flatMap(groupsOf(shards, hashes), (groups) => {
    const unmarked = LmdbEnvs.markWritten(groups.map(([shard]) => shard), "cannot remove entries")
    if (unmarked !== undefined) return Effect.fail(unmarked)
    return Effect.map(
      commitAll(groups.map(([shard, group]) =>
        [shard, () =>
          shard.env.transaction(() => {
            const removed: Array<string> = []
            for (const { hash } of group) {
              const key = keyOf(hash)
              if (onlyIfExpiredAt !== undefined) {
                const l = decodeLease(shard.leases.getBinary(key))
                if (l !== undefined && l.until > onlyIfExpiredAt) continue
              }
              const hadContent = shard.content.removeSync(key)
              const hadLease = shard.leases.removeSync(key)
              if (hadContent || hadLease) removed.push(hash)
            }
            return removed
          })] as const
      )),
      (xs) => xs.flat()
    )
  })

/** Every lease row: the index GC works from without reading any value. @internal */
export const scanLeases = (
  shard: LmdbEnvs.SharedEnv
): Effect.Effect<Array<{ hash: string; lease: Lease }>, StoreError> =>
  LmdbEnvs.read(shard, () => {
    const out: Array<{ hash: string; lease: Lease }> = []
    for (const { key, value } of shard.leases.getRange({})) {
      const lease = decodeLease(value)
      out.push({ hash: Buffer.from(key).toString("hex"), lease: lease ?? { until: 0, size: 0 } })
    }
    return out
  })

/** Visits every content entry; `f` sees a view valid only during the call. @internal */
export const forEachContent = (
  shard: LmdbEnvs.SharedEnv,
  f: (hash: string, value: Uint8Array) => void
): Effect.Effect<void, StoreError> =>
  LmdbEnvs.read(shard, () => {
    for (const { key, value } of shard.content.getRange({})) f(Buffer.from(key).toString("hex"), value)
  })
