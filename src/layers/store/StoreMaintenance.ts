/**
 * Whole-store maintenance on an open store: `check` (every entry's bytes against its key), `gc` (least recently
 * leased first, never a leased entry), `stats`, taking a blob out, and clearing the LMDB reader slots dead processes
 * left. None of it is what a build asks of a content-addressed store: `kiln store …`, the sandboxer's post-mortem
 * and tests use it.
 *
 * It works on the very store `Store.make` opened (its shards, its caches of verified directories), not on a second
 * open of the same files, so it is built from a `Store` service: {@link layer} requires `Store`.
 *
 * @since 0.1.0
 */
import * as Context from "effect/Context"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import type * as Digest from "../../domain/Digest.js"
import { StoreError } from "../../domain/StoreErrors.js"
import { ioError } from "../../os/IoError.js"
import * as Core from "./internal/core.js"
import * as LmdbFile from "./internal/lmdb/dataFile.js"
import * as Maintenance from "./internal/maintenance.js"
import * as UsageFile from "./internal/usage.js"
import { Store } from "./Store.js"
import type * as StoreModule from "./Store.js"

/**
 * @since 0.1.0
 * @category models
 */
export type StoreKind = "files" | "directories" | "actions" | "large-files" | "shared-trees"

/**
 * A corrupt entry `check` found.
 *
 * @since 0.1.0
 * @category models
 */
export interface Problem {
  readonly store: StoreKind
  readonly key: string
  readonly problem: string
}

/**
 * @since 0.1.0
 * @category models
 */
export interface CheckReport {
  readonly checked: number
  readonly problems: ReadonlyArray<Problem>
  readonly repaired: number
}

/**
 * @since 0.1.0
 * @category models
 */
export interface GcReport {
  readonly targetBytes: number
  readonly beforeBytes: number
  readonly afterBytes: number
  readonly removedEntries: number
  readonly removedBytes: number
  readonly leasedBytes: number
  /** Stray temp files, and the temp directories of shared trees whose writer died. */
  readonly strayFilesRemoved: number
  /** Shared trees no live process uses whose lease had ended or whose digest left the store. */
  readonly sharedTreesRemoved: number
  /** Shared trees kept because a live process uses them. */
  readonly sharedTreesInUse: number
  /**
   * Files kept beside the entries for directories that are gone (a workspace's stat index, a directory's saved walk),
   * removed, and their bytes: a deleted checkout's or a temporary workspace's.
   */
  readonly goneDirectoryFiles: number
  readonly goneDirectoryBytes: number
  /** False when leased entries alone exceed the target. */
  readonly reachedTarget: boolean
}

/**
 * @since 0.1.0
 * @category models
 */
export interface KindStats {
  readonly entries: number
  readonly bytes: number
  readonly leased: number
}

/**
 * @since 0.1.0
 * @category models
 */
export interface Stats {
  readonly root: string
  readonly shardCount: number
  readonly files: KindStats
  readonly directories: KindStats
  readonly actions: KindStats
  readonly largeFiles: KindStats
  /** Bytes the store takes on disk (LMDB data files, which do not shrink, plus large files). */
  readonly diskBytes: number
  /** Reader-table slots held by other processes, across every environment, and those whose process is gone. */
  readonly readers: { readonly inUse: number; readonly stale: number; readonly maxPerEnvironment: number }
}

/**
 * The store's cap, and where it came from: the one asked for (`--store-max-size`, `Store.Options.maxSizeBytes`), the
 * store's own ({@link setCap}), else the smaller of 20 GiB and a tenth of the disk the store is on.
 *
 * @since 0.1.0
 * @category models
 */
export interface Cap {
  readonly bytes: number
  readonly source: "option" | "store" | "default"
}

/**
 * What the store holds, known without scanning it: the last collection's measure plus what processes added since
 * (an estimate that only over-counts; see {@link usageOf}).
 *
 * @since 0.1.0
 * @category models
 */
export interface Usage {
  /** The last collection's measure, or undefined when none was taken. */
  readonly measuredBytes: number | undefined
  readonly measuredAtMs: number | undefined
  /** What processes added since. */
  readonly addedBytes: number
  /** The measure plus what was added since. */
  readonly estimateBytes: number
  /** The length of the record of additions: past a bound, a collection is due and starts it again. */
  readonly journalBytes: number
}

/**
 * A shard `setAsideUnsafe` moved out of the store, and why.
 *
 * @since 0.1.0
 * @category models
 */
export interface SetAside {
  readonly file: string
  readonly problem: string
  readonly movedTo: string
}

/**
 * @since 0.1.0
 * @category models
 */
export interface Service {
  readonly check: (options?: { readonly repair?: boolean }) => Effect.Effect<CheckReport, StoreError>
  /** Shrinks the store to the target (default: the store's `maxSizeBytes`). */
  readonly gc: (options?: { readonly targetSizeBytes?: number }) => Effect.Effect<GcReport, StoreError>
  readonly stats: Effect.Effect<Stats, StoreError>
  /**
   * Removes a digest from the file and directory stores (the store's generation moves on first); true when
   * something was removed.
   */
  readonly remove: (digest: Digest.Digest) => Effect.Effect<boolean, StoreError>
  /**
   * Removes an action-cache entry (`kiln verify --evict`: a result that did not reproduce); true when there was one.
   * The blobs it names stay, for the GC to judge.
   */
  readonly removeActionResult: (actionDigest: Digest.Digest) => Effect.Effect<boolean, StoreError>
  /**
   * Clears reader slots that dead processes left in every shard (opening each), and says how many it cleared. A stale
   * slot keeps LMDB from reusing the pages freed after its snapshot; opening an environment clears them too, but
   * shards are opened on first use, so a process that died leaves its slots in shards nobody opens for a while.
   */
  readonly clearStaleReaders: Effect.Effect<number, StoreError>
  /**
   * Clears the reader slots of `pid`, a process that has died, waiting at most `within` for the kernel to release
   * its locks if need be; says how many stale slots it cleared.
   */
  readonly clearReadersOf: (pid: number, within: Duration.DurationInput) => Effect.Effect<number, StoreError>
}

/**
 * @since 0.1.0
 * @category tags
 */
export class StoreMaintenance extends Context.Tag("kiln/StoreMaintenance")<StoreMaintenance, Service>() {}

/**
 * Maintenance of an open store. `store` must be one `Store.make` returned (maintenance works on its internals); any
 * other object is a programming error, thrown.
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = (store: StoreModule.Service): Service => {
  const core = Core.coreOf(store)
  const { maxSizeBytes, shardCount } = store.options
  return {
    check: (options) => Maintenance.check(core, options?.repair ?? false),
    gc: (options) =>
      Effect.tap(
        Maintenance.gc(core, options?.targetSizeBytes ?? maxSizeBytes ?? UsageFile.DEFAULT_CAP_BYTES),
        // A collection is the only measure of the whole store: what decides the next one starts from it.
        (report) =>
          Effect.try({
            try: () => UsageFile.noteMeasured(core.root, report.afterBytes, Date.now()),
            catch: ioError(core.root, "cannot record the store's size")
          })
      ),
    stats: Maintenance.stats(core, shardCount),
    remove: (digest) =>
      Effect.map(
        Effect.all([Core.removeFile(core, digest), Core.removeDirectory(core, digest)]),
        ([a, b]) => a || b
      ),
    removeActionResult: (actionDigest) => Core.removeActionResult(core, actionDigest),
    clearStaleReaders: Maintenance.clearStaleReaders(core),
    clearReadersOf: (pid, within) => Maintenance.clearReadersOf(core, pid, Duration.toMillis(within))
  }
}

/**
 * Bytes of the entries `store` (one `Store.make` returned) has added so far: what its closing will add to the store's
 * usage record, less the background writes still in flight.
 *
 * @since 0.1.0
 * @category maintenance
 */
export const addedSoFar = (store: StoreModule.Service): number => Core.addedBytes(Core.coreOf(store))

/**
 * @since 0.1.0
 * @category layers
 */
export const layer: Layer.Layer<StoreMaintenance, never, Store> = Layer.effect(
  StoreMaintenance,
  Effect.map(Store, make)
)

/**
 * Moves every shard of the store under `root` whose LMDB file is unsafe to open (truncated: LMDB would crash on it)
 * into `<root>/corrupt/`, and says where each went; the store can then be opened, and the shard is created afresh.
 * Runs on a closed store: the open is what it makes safe.
 *
 * @since 0.1.0
 * @category maintenance
 */
export const setAsideUnsafe: (root: string) => Effect.Effect<Array<SetAside>, StoreError> = LmdbFile.setAsideUnsafe

const storeRootError = (root: string, what: string) => (e: unknown): StoreError =>
  e instanceof UsageFile.CapFileError
    ? new StoreError({ reason: "Unsupported", detail: e.problem, path: e.file })
    : ioError(root, what)(e)

/**
 * The cap of the store under `root`: `explicit` when given, else the store's own, else the default (see {@link Cap}).
 *
 * @since 0.1.0
 * @category cap
 */
export const capOf = (root: string, explicit?: number): Effect.Effect<Cap, StoreError> =>
  Effect.try({ try: () => UsageFile.capOf(root, explicit), catch: storeRootError(root, "cannot read the store's cap") })

/**
 * Sets the cap of the store under `root` (kept in the store, for every process that opens it without asking for
 * one), or with `undefined` removes it, so that the default applies again.
 *
 * @since 0.1.0
 * @category cap
 */
export const setCap = (root: string, bytes: number | undefined): Effect.Effect<void, StoreError> =>
  Effect.try({ try: () => UsageFile.setCap(root, bytes), catch: storeRootError(root, "cannot set the store's cap") })

/**
 * What the store under `root` holds, as far as its record of collections and additions says (see {@link Usage}).
 *
 * @since 0.1.0
 * @category cap
 */
export const usageOf = (root: string): Effect.Effect<Usage, StoreError> =>
  Effect.try({ try: () => UsageFile.usageOf(root), catch: storeRootError(root, "cannot read the store's usage") })

/**
 * Whether a collection is due: the store is over its cap by its estimate, or its record of additions has grown long,
 * or it was never measured and a process added to it.
 *
 * @since 0.1.0
 * @category cap
 */
export const collectionDue: (usage: Usage, cap: Cap) => boolean = UsageFile.collectionDue

/**
 * What a collection started because the store is over its cap shrinks it to: below the cap, so that the runs after
 * it do not each start one.
 *
 * @since 0.1.0
 * @category cap
 */
export const collectionTarget: (cap: Cap) => number = UsageFile.collectionTarget
