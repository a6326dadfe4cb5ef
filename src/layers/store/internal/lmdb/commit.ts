/**
 * What a failed LMDB commit means, and what it leaves behind. When a commit fails (a full disk, most often), lmdb-js
 * rejects the write's promise with a bare "Commit failed", keeps the reason in a second promise (`commitError`) that
 * it rejects whether or not anyone listens, rejects a promise of its own that no caller holds (see {@link watch}),
 * and never settles that commit's flush: `flushed` and `close()` then wait forever. So the store turns the failure
 * into a `StoreError` naming the shard (a full file system is `NoSpace`, as LMDB reports a short write as EIO), claims
 * the promises nobody else can, and closes such an environment after a commit that writes nothing.
 *
 * @internal
 */
import * as Effect from "effect/Effect"
import * as Size from "../../../../domain/Size.js"
import { StoreError } from "../../../../domain/StoreErrors.js"
import { describeErrno, errnoOf } from "../../../../os/Errno.js"
import { freeBytes } from "./dataFile.js"
import type { SharedEnv } from "./envs.js"

const failed = new WeakSet<SharedEnv>()

/** Below this many free bytes, a failed commit is taken for a full disk. */
const NEARLY_FULL = 1024 * 1024

const commitErrorOf = (e: unknown): PromiseLike<unknown> | undefined => {
  if (typeof e !== "object" || e === null || !("commitError" in e)) return undefined
  const c = e.commitError
  return typeof c === "object" && c !== null && "then" in c && typeof c.then === "function"
    ? c as PromiseLike<unknown>
    : undefined
}

/** Claims the `commitError` a "Commit failed" carries: the same failure, reported by whoever holds the write. */
const claimCommitError = (e: unknown): void => {
  commitErrorOf(e)?.then(undefined, () => undefined)
}

/**
 * The failure of a write to `shard` as a StoreError naming the shard; remembers that the shard has a failed commit.
 *
 * @internal
 */
export const failure = (shard: SharedEnv, action: string, e: unknown): StoreError => {
  const commit = commitErrorOf(e)
  // The same failure this error reports; lmdb-js rejects it even when nobody holds it, which would end the process.
  claimCommitError(e)
  const text = describeErrno(e)
  const code = errnoOf(e)
  const free = commit !== undefined || code === "EIO" ? freeBytes(shard.path) : undefined
  if (code === "ENOSPC" || code === "EDQUOT" || (free !== undefined && free < NEARLY_FULL)) {
    return new StoreError({
      reason: "NoSpace",
      detail: `${action}: no space left on device (ENOSPC)`,
      path: shard.path
    })
  }
  return new StoreError({
    reason: text.includes("MDB_MAP_FULL") ? "NoSpace" : "Lmdb",
    detail: `${action}: ${text}`,
    path: shard.path
  })
}

interface TreeStats {
  readonly treeBranchPageCount?: number
  readonly treeLeafPageCount?: number
  readonly overflowPages?: number
}

const pagesOf = (t: TreeStats | undefined) =>
  (t?.treeBranchPageCount ?? 0) + (t?.treeLeafPageCount ?? 0) + (t?.overflowPages ?? 0)

/** Pages inside the data file that no tree uses (freed by earlier commits), which a commit can reuse without growing it. */
const reusableBytes = (shard: SharedEnv): number => {
  try {
    const env = shard.env.getStats() as TreeStats & {
      readonly pageSize: number
      readonly lastPageNumber: number
      readonly free?: TreeStats
    }
    const used = pagesOf(env) + pagesOf(env.free) + 2 +
      [shard.content, shard.leases, shard.locks].reduce((n, db) => n + pagesOf(db?.getStats() as TreeStats), 0)
    return Math.max(0, env.lastPageNumber + 1 - used) * env.pageSize
  } catch {
    return 0
  }
}

/** Bytes that writes of this process have reserved and not yet finished. */
let reserved = 0

/** Bytes this process has reserved for writes, ever: what an earlier answer about free bytes did not see. */
let reservedEver = 0

/**
 * The last answer about each store's free bytes, when it was had, and how much this process had reserved then: a
 * `statfs` for every write costs more than a small write's commit, and far from a full disk the answer a moment ago,
 * less what every write since reserved, is as good. Kept per store, not per shard: its shards are directories on its
 * file system, and a run writes to each of them only now and then.
 */
const lastFree = new Map<string, { readonly bytes: number; readonly at: number; readonly reservedThen: number }>()
/** How long an answer is used, and how far from full the disk must stay for it to be. */
const FREE_FRESH_MS = 200
const FREE_MARGIN = 256 * 1024 * 1024

/** Free bytes for a write of `needed` bytes to `dir` in the store at `root`, beside `inFlight` ones. */
const freeFor = (root: string, dir: string, inFlight: number, needed: number): number | undefined => {
  const now = performance.now()
  const known = lastFree.get(root)
  const before = reservedEver
  reservedEver += needed
  if (known !== undefined && now - known.at < FREE_FRESH_MS) {
    const bytes = known.bytes - (before - known.reservedThen)
    if (bytes - inFlight - needed > FREE_MARGIN) return bytes
  }
  const bytes = freeBytes(dir)
  if (bytes === undefined) lastFree.delete(root)
  else lastFree.set(root, { bytes, at: now, reservedThen: before })
  return bytes
}

/**
 * Reserves room on the disk for writing values of these sizes to these shards, or refuses the write before LMDB
 * tries it: LMDB would fail it too, but only after printing its own errors on stderr, and after failing the other
 * shards' commits of the batch as well. A value over about 2 KiB takes whole overflow pages; a commit also copies
 * the pages on its way to each tree's root and writes the free list (the slack per shard). Pages freed inside the
 * data files count as room; so do the reservations of this process's writes in flight, against it. (Writers in
 * other processes can still fill the disk first: that failure is reported by {@link failure}.) Release the
 * reservation when the writes are done.
 *
 * @internal
 */
export const reserve = (
  root: string,
  shards: ReadonlyArray<SharedEnv>,
  sizes: ReadonlyArray<number>
): StoreError | { readonly release: Effect.Effect<void> } => {
  let needed = shards.length * 64 * 1024
  for (const n of sizes) needed += (n > 2000 ? Math.ceil((n + 16) / 4096) * 4096 : n + 64) + 64
  const free = shards.length === 0 ? undefined : freeFor(root, shards[0]!.path, reserved, needed)
  if (
    free !== undefined && free < reserved + needed &&
    free + shards.reduce((n, shard) => n + reusableBytes(shard), 0) < reserved + needed
  ) {
    return new StoreError({
      reason: "NoSpace",
      detail: `write failed: no space left on device (${Size.format(free)} free, the write needs about ${
        Size.format(reserved + needed)
      })`,
      path: shards[0]!.path
    })
  }
  reserved += needed
  return { release: Effect.sync(() => void (reserved -= needed)) }
}

/**
 * Notes every failed commit of `shard`'s environment, whoever wrote it: lmdb-js calls `aftercommit` listeners without
 * a txnid when a commit fails. (A write whose caller was interrupted meanwhile is never caught.)
 *
 * And claims the promise lmdb-js makes for each event turn's batch of writes: it starts the batch (after the
 * `beforecommit` listeners, in the same task) with a write of its own whose promise it keeps to itself, and rejects it
 * with "Commit failed" when the commit fails. Nobody else can hold it, so without this a full disk would end any
 * program using the store with an unhandled rejection; the failure itself reaches the caller of each write of the
 * batch, as a `StoreError`. The microtask runs right after that task, while the batch's promise is still the
 * environment's `committed` one (no write can come in between).
 *
 * @internal
 */
export const watch = (shard: SharedEnv): void => {
  shard.env.on("aftercommit", (e: { readonly txnId?: number }) => {
    if (e.txnId === undefined) failed.add(shard)
  })
  shard.env.on("beforecommit", () =>
    queueMicrotask(() => {
      shard.env.committed.then(() => undefined, claimCommitError)
    }))
}

/** Whether a commit of this environment has failed. @internal */
export const hasFailed = (shard: SharedEnv): boolean => failed.has(shard)

const ABSENT = Buffer.alloc(32)

/**
 * Closes an environment one of whose commits failed: a commit that removes an absent key writes no page, so it goes
 * through on a full disk too, and settles the flush that `close()` waits for; `beforeClose` runs once it has. When
 * even that fails, the handle is left open, with a warning, until the process exits.
 *
 * @internal
 */
export const closeAfterFailure = (shard: SharedEnv, beforeClose: Effect.Effect<void>): Effect.Effect<void> =>
  Effect.tryPromise({
    try: () => shard.content.remove(ABSENT),
    catch: (e) => failure(shard, "cannot close after a failed commit", e)
  }).pipe(
    Effect.zipRight(Effect.promise(async () => {
      await shard.env.flushed
    })),
    Effect.zipRight(beforeClose),
    Effect.zipRight(Effect.promise(() => shard.env.close())),
    Effect.catchAll((e) => Effect.logWarning(`${e.message}; it stays open until the process exits`))
  )
