/**
 * The content-addressed store: file blobs, REAPI `Directory` protos and the action cache, each on sharded LMDB
 * under one root, plus large files kept outside LMDB so they can be hard-linked. Many kiln processes share one store
 * on disk at once.
 *
 * @since 0.1.0
 */
import * as Context from "effect/Context"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import type * as Either from "effect/Either"
import * as ExecutionStrategy from "effect/ExecutionStrategy"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Scope from "effect/Scope"
import * as path from "node:path"
import * as Digest from "../../domain/Digest.js"
import type * as Directory from "../../domain/Directory.js"
import { type StoreConfigConflict, StoreError } from "../../domain/StoreErrors.js"
import type { InputConflict, InvalidOutput } from "../../domain/TreeErrors.js"
import type { UnsafeDirectory } from "../../domain/UnsafeDirectory.js"
import { cacheDir } from "../../os/CacheDir.js"
import { ioError } from "../../os/IoError.js"
import * as ActionLock from "./internal/actionLock.js"
import * as BlobMembers from "./internal/blobMembers.js"
import * as Capture from "./internal/capture.js"
import * as Core from "./internal/core.js"
import * as LargeFiles from "./internal/largeFiles.js"
import * as Sharded from "./internal/lmdb/shards.js"
import * as Materialize from "./internal/materialize.js"
import * as Refill from "./internal/refill.js"
import * as Snapshotting from "./internal/snapshot.js"
import { ensureLayout } from "./internal/storeFile.js"
import * as Tree from "./internal/tree.js"
import * as TreeMerge from "./internal/treeMerge.js"
import * as Usage from "./internal/usage.js"
import * as StatIndex from "./internal/walks/statIndex.js"
import * as WorkspaceSources from "./internal/workspaceSources.js"
import type * as Observation from "./SnapshotObservation.js"
import * as Session from "./SnapshotSession.js"

const GiB = 1024 * 1024 * 1024

/**
 * @since 0.1.0
 * @category models
 */
export interface Options {
  /** Default `$XDG_CACHE_HOME/kiln/store`, else `~/.cache/kiln/store`. */
  readonly root: string
  /**
   * Shards per store, a power of two up to 256, fixed when the store is created. Absent: the store's own count, or 4
   * for a new store. The open store's `options` always hold its count.
   */
  readonly shardCount?: number | undefined
  /**
   * LMDB reader-table slots per environment. The first process to open an environment fixes it for every process,
   * so every kiln process (the sandboxer too) must pass the same value. Default 4096.
   */
  readonly maxReaders: number
  /** Map size per shard, in bytes (address space, not disk: LMDB files grow as they fill). */
  readonly filesMapSize: number
  readonly directoriesMapSize: number
  readonly actionsMapSize: number
  /** How long an entry stored or used by a run is protected from GC. Default 2 h. */
  readonly leaseTimeMs: number
  /**
   * The store's cap: what `gc` shrinks it to when no target is given, and past which the `kiln` CLI collects after a
   * run (see `StoreCap`). Absent: the store's own (`kiln store cap`), else the smaller of 20 GiB and a tenth of its
   * disk. The open store's `options` hold the cap in force.
   */
  readonly maxSizeBytes?: number | undefined
}

/**
 * @since 0.1.0
 * @category constructors
 */
export const defaultRoot = (env: NodeJS.ProcessEnv = process.env): string => cacheDir("store", "KILN_STORE_DIR", env)

/**
 * @since 0.1.0
 * @category constructors
 */
export const defaultOptions = (overrides: Partial<Options> = {}): Options => ({
  root: defaultRoot(),
  maxReaders: 4096,
  filesMapSize: 16 * GiB,
  directoriesMapSize: 4 * GiB,
  actionsMapSize: 4 * GiB,
  leaseTimeMs: 2 * 60 * 60 * 1000,
  ...overrides
})

/**
 * Where a tree's entries go on disk.
 *
 * @since 0.1.0
 * @category models
 */
export interface TreeEntry {
  readonly path: string
  readonly type: "file" | "directory" | "symlink"
  readonly digest?: Digest.Digest
  readonly isExecutable?: boolean
  readonly target?: string
}

/**
 * @since 0.1.0
 * @category models
 */
export type SnapshotObservation = Observation.SnapshotObservation

/**
 * An open stat index for one workspace (see `snapshotSession`, and the `SnapshotSession` module).
 *
 * @since 0.1.0
 * @category models
 */
export type SnapshotSession = Session.SnapshotSession

/**
 * What a session's snapshots tell as they hash files (see the `SnapshotSession` module).
 *
 * @since 0.1.0
 * @category models
 */
export type HashProgress = Session.HashProgress

/**
 * One of the snapshots `snapshotMany` takes: globs relative to the directory (`!` excludes; none: everything).
 *
 * @since 0.1.0
 * @category models
 */
export interface SnapshotRequest {
  readonly globs: ReadonlyArray<string>
  /** Say every path the snapshot read, with what was found there (the engine's run memo). */
  readonly observe?: boolean
}

/**
 * A snapshot's tree, and what it read to make it (empty unless its request said `observe`).
 *
 * @since 0.1.0
 * @category models
 */
export interface Snapshot {
  readonly digest: Digest.Digest
  readonly observations: ReadonlyArray<SnapshotObservation>
  /** Directories taken whole that may stand in for their trees (in a session; see `WholeDirectory`). */
  readonly wholeDirectories: ReadonlyArray<Observation.WholeDirectory>
  /**
   * The request's include globs that match no file or symlink of the tree, in their order (a glob matching only a
   * directory, or only what an exclude took out, is among them).
   */
  readonly unmatched: ReadonlyArray<string>
}

/**
 * A process's declared outputs, relative to where they are captured from.
 *
 * @since 0.1.0
 * @category models
 */
export interface Outputs {
  readonly outputFiles: ReadonlyArray<string>
  readonly outputDirectories: ReadonlyArray<string>
  /** Where captured symlinks may point (default `contained`: inside `root`). */
  readonly outputSymlinks?: Directory.SymlinkPolicy
}

/**
 * What `capture` stored: the outputs' tree, the digests of the blobs stored with it (in their order), and each file
 * captured (its absolute path) with its digest.
 *
 * @since 0.1.0
 * @category models
 */
export interface Captured {
  readonly tree: Digest.Digest
  readonly blobs: ReadonlyArray<Digest.Digest>
  readonly files: ReadonlyArray<readonly [string, Digest.Digest]>
}

/**
 * @since 0.1.0
 * @category models
 */
export interface MaterializeOptions {
  /** Paths (relative to the destination) that get writable copies, never hard links; `.` for all. */
  readonly mutablePaths?: ReadonlyArray<string>
  /**
   * Create the destination if it is missing (default true). A sandbox must already exist: one that is gone was
   * removed by its engine, and re-creating it would leave a directory without an owner behind.
   */
  readonly createDestination?: boolean
  /**
   * The destination may hold anything (a used sandbox): it is made to hold exactly the tree, reusing what it can of
   * what is there (see `Refill`).
   */
  readonly reuse?: boolean
  /**
   * With `reuse`: directories the caller makes next (a sandbox's working directory, its outputs' parents), which may
   * stay if they are there rather than be removed for the caller to make again. Ignored when the tree has a symlink.
   */
  readonly keepDirs?: ReadonlyArray<string>
}

/**
 * The content-addressed store and the action cache; maintenance (check, gc, stats, removal, reader slots) is
 * `StoreMaintenance`'s.
 *
 * @since 0.1.0
 * @category models
 */
export interface Service {
  /** The options it was opened with, its own shard count included. */
  readonly options: Options & { readonly shardCount: number }
  /** Stores file contents; with `expected`, fails with `DigestMismatch` unless the bytes hash to it. */
  readonly putFile: (bytes: Uint8Array, expected?: Digest.Digest) => Effect.Effect<Digest.Digest, StoreError>
  /** Many files in one go: one commit per shard. */
  readonly putFiles: (blobs: ReadonlyArray<Uint8Array>) => Effect.Effect<Array<Digest.Digest>, StoreError>
  /** Stores a file from disk, streaming it when it is large. */
  readonly putFilePath: (file: string) => Effect.Effect<Digest.Digest, StoreError>
  /** A file's bytes, checked against the digest; corrupt bytes are removed and reported missing. */
  readonly getFile: (digest: Digest.Digest) => Effect.Effect<Uint8Array, Digest.MissingDigest | StoreError>
  readonly hasFile: (digest: Digest.Digest) => Effect.Effect<boolean, StoreError>
  /**
   * Where a workspace snapshot of this process hashed the file `digest` and left it (a directory taken whole, read
   * from the workspace when needed; see `internal/workspaceSources.ts`), if it did: a file missing though it was
   * hashed there changed after it was hashed.
   */
  readonly hashedAt: (digest: Digest.Digest) => string | undefined
  readonly putDirectory: (dir: Directory.Directory) => Effect.Effect<Digest.Digest, StoreError>
  readonly getDirectory: (
    digest: Digest.Digest
  ) => Effect.Effect<Directory.Directory, Digest.MissingDigest | StoreError>
  readonly hasDirectory: (digest: Digest.Digest) => Effect.Effect<boolean, StoreError>
  /**
   * Walks a tree in one pass (failing with `MissingDigest` on an absent directory). With `complete`, fails with
   * `MissingDigest` naming the first absent file too; with `lease`, extends the leases of its directories and files
   * (those present; only stale leases cost a write). A cache hit asks for both, a process about to run for the lease
   * of its inputs, and the sandboxer, told a blob is missing, for `complete` alone.
   */
  readonly ensureTree: (
    root: Digest.Digest,
    options: { readonly complete?: boolean; readonly lease?: boolean }
  ) => Effect.Effect<void, Digest.MissingDigest | StoreError>
  /** Every entry of a tree, depth first, in name order. */
  readonly listTree: (root: Digest.Digest) => Effect.Effect<Array<TreeEntry>, Digest.MissingDigest | StoreError>
  /** Action-cache entries, in one read transaction per shard (this process's own writes of them landed first). */
  readonly getActionResults: (
    actionDigests: ReadonlyArray<Digest.Digest>
  ) => Effect.Effect<Array<Option.Option<Uint8Array>>, StoreError>
  /** Stores (or replaces) the result of an action. */
  readonly putActionResult: (actionDigest: Digest.Digest, payload: Uint8Array) => Effect.Effect<void, StoreError>
  /** Extends the leases of an action-cache entry and of file blobs (stdout, stderr) a hit is using. */
  readonly leaseUsed: (
    actionDigest: Digest.Digest,
    files: ReadonlyArray<Digest.Digest>
  ) => Effect.Effect<void, StoreError>
  /**
   * Runs `run` holding a lock on the action across every process on this store; while another live process holds
   * it, polls `whileWaiting` and returns its value as soon as it has one. A dead holder's lock is taken over.
   *
   * With `store`, the payload it gives for `run`'s value (if any) is stored as the action's result after `run`,
   * still under the lock but in the background: the caller does not wait for the payload (which may wait for a
   * check) or the commit (an fsync), another process finds the result as soon as the lock is free, this process's
   * own reads of the action wait for it, and closing the store waits for every such write.
   */
  readonly withActionLock: <A, E, R>(
    actionDigest: Digest.Digest,
    whileWaiting: Effect.Effect<Option.Option<A>, E, R>,
    run: Effect.Effect<A, E, R>,
    store?: (a: A) => Effect.Effect<Option.Option<Uint8Array>>
  ) => Effect.Effect<A, E | StoreError, R>
  /**
   * Waits for this process's action results still being stored in the background (`withActionLock`'s `store`):
   * a run that ends once they are committed leaves every entry in the store when it exits (a CI job that saves
   * the store's directory next saves them).
   */
  readonly actionsWritten: Effect.Effect<void>
  /**
   * Snapshots a directory (filtered by globs relative to it; `!` excludes) into the store. Within a session,
   * directories are listed once and files whose stat is unchanged since they were last hashed are not read.
   */
  readonly snapshot: (
    dir: string,
    globs?: ReadonlyArray<string>,
    session?: SnapshotSession
  ) => Effect.Effect<Digest.Digest, StoreError>
  /**
   * `snapshot` of one directory for each of many glob sets, their contents stored together (one commit per shard
   * for all), each with what it read if asked and the include globs that matched nothing: the engine snapshots every
   * process's own inputs so, for its run memo. Each succeeds or fails on its own; the outer error is a failure to
   * store.
   */
  readonly snapshotMany: (
    dir: string,
    requests: ReadonlyArray<SnapshotRequest>,
    session?: SnapshotSession
  ) => Effect.Effect<Array<Either.Either<Snapshot, StoreError>>, StoreError>
  /**
   * A snapshot session for a workspace: its persisted stat index, saved when the scope closes. With `lazy`, the index
   * is read only once a few files had to be hashed without it (a run that expects to look at few files). With
   * `progress`, its snapshots tell each file they hash, and when they finish.
   */
  readonly snapshotSession: (
    workspace: string,
    options?: Session.SessionOptions
  ) => Effect.Effect<SnapshotSession, never, Scope.Scope>
  /** Writes a tree onto disk. */
  readonly materialize: (
    digest: Digest.Digest,
    destination: string,
    options?: MaterializeOptions
  ) => Effect.Effect<void, Digest.MissingDigest | StoreError>
  /**
   * Lays trees over each other, each at a path (segments); a path two trees fill differently is a conflict. With
   * `rewrite`, the directories the merge makes are written even where the store shows them present.
   */
  readonly mergeTrees: (
    layers: ReadonlyArray<{ readonly digest: Digest.Digest; readonly at: ReadonlyArray<string> }>,
    options?: {
      readonly rewrite?: boolean
      /**
       * Commit the directories the merge makes in the background: this process sees them at once (a merged input
       * root is read by this process first); `written` waits for them before another process may need them.
       */
      readonly behind?: boolean
    }
  ) => Effect.Effect<Digest.Digest, Digest.MissingDigest | StoreError | InputConflict>
  /**
   * Waits for this process's merged trees still committing in the background (see `mergeTrees`' `behind`): what
   * another process reading the store needs. (Action results written in the background are not waited for.)
   */
  readonly written: Effect.Effect<void>
  /**
   * Captures the declared outputs under `root` (absent ones are left out) into a tree, storing `blobs` with them in
   * the same commits (a process's stdout and stderr).
   */
  readonly capture: (
    root: string,
    outputs: Outputs,
    blobs?: ReadonlyArray<Uint8Array>
  ) => Effect.Effect<Captured, StoreError | InvalidOutput>
}

/**
 * @since 0.1.0
 * @category tags
 */
export class Store extends Context.Tag("kiln/Store")<Store, Service>() {}

/** Opens the store's sharded environments under `root` (each shard on first use). */
const openCore = (
  opts: Options,
  root: string
): Effect.Effect<Core.Core, StoreError | StoreConfigConflict | UnsafeDirectory, Scope.Scope> =>
  Effect.gen(function*() {
    const notPowerOfTwo = (n: number, path?: string) =>
      new StoreError({
        reason: "Unsupported",
        detail: `the shard count must be a power of two from 1 to 256, got ${n}`,
        ...(path !== undefined ? { path } : {})
      })
    if (opts.shardCount !== undefined && !Sharded.isPowerOfTwo(opts.shardCount)) {
      return yield* notPowerOfTwo(opts.shardCount)
    }
    const shardCount = yield* ensureLayout(root, opts.shardCount)
    if (!Sharded.isPowerOfTwo(shardCount)) return yield* notPowerOfTwo(shardCount, root)
    const settings = (mapSize: number) => ({ mapSize, maxReaders: opts.maxReaders })
    // The four kinds are released together when the store closes (a scope whose finalizers run in parallel), as the
    // shards of each kind are: closing waits on lmdb-js's threads, one environment after another took ~1 ms each.
    const kinds = yield* Scope.fork(yield* Effect.scope, ExecutionStrategy.parallel)
    const open = (kind: string, count: number, s: Parameters<typeof Sharded.open>[3]) =>
      Sharded.open(root, kind, count, s).pipe(Scope.extend(kinds))
    return {
      root,
      files: yield* open("files", shardCount, settings(opts.filesMapSize)),
      directories: yield* open("directories", shardCount, settings(opts.directoriesMapSize)),
      actions: yield* open("actions", shardCount, settings(opts.actionsMapSize)),
      locks: yield* open("locks", 1, { mapSize: 64 * 1024 * 1024, maxReaders: opts.maxReaders, lockTable: true }),
      large: LargeFiles.make(root),
      leaseTimeMs: opts.leaseTimeMs,
      verified: new Map(),
      committing: new Map(),
      sources: WorkspaceSources.make()
    }
  })

/** This process's writes still committing in the background: action results by action hash, and merges. */
interface Background {
  /** Runs `effect` in the background under `key`; closing the store waits for it. */
  readonly run: (key: string, effect: Effect.Effect<void>) => Effect.Effect<void>
  /** Waits for this process's own pending writes of these actions: a read after a run sees its result. */
  readonly settled: (digests: ReadonlyArray<Digest.Digest>) => Effect.Effect<void>
  readonly all: Effect.Effect<void>
}

/** Must be made after the LMDB environments were opened: its finalizer then runs before they close. */
const background = (): Effect.Effect<Background, never, Scope.Scope> =>
  Effect.gen(function*() {
    // The latest write of each key, for a read of it; and every write, for `all` (a second write of an action, a
    // re-run's, may start while the first still waits for its check).
    const writing = new Map<string, Deferred.Deferred<void>>()
    const pending = new Set<Deferred.Deferred<void>>()
    const all = Effect.suspend(() => Effect.all([...pending].map(Deferred.await), { discard: true }))
    yield* Effect.addFinalizer(() => all)
    return {
      run: (key, effect) =>
        Effect.gen(function*() {
          const done = yield* Deferred.make<void>()
          writing.set(key, done)
          pending.add(done)
          yield* Effect.forkDaemon(Effect.ensuring(
            effect,
            Effect.zipRight(
              Effect.sync(() => {
                if (writing.get(key) === done) writing.delete(key)
                pending.delete(done)
              }),
              Deferred.succeed(done, undefined)
            )
          ))
        }),
      settled: (digests) =>
        Effect.suspend(() => {
          if (writing.size === 0) return Effect.void
          const waits = digests.flatMap((d) => {
            const w = writing.get(d.hash)
            return w === undefined ? [] : [Deferred.await(w)]
          })
          return waits.length === 0 ? Effect.void : Effect.all(waits, { discard: true })
        }),
      all
    }
  })

/** The action cache, and the cross-process lock a run of an action holds. */
const actionMembers = (
  core: Core.Core,
  bg: Background
): Pick<Service, "getActionResults" | "putActionResult" | "leaseUsed" | "withActionLock" | "actionsWritten"> => ({
  actionsWritten: bg.all,
  getActionResults: (actionDigests) =>
    Effect.zipRight(bg.settled(actionDigests), Core.getActionResults(core, actionDigests)),
  putActionResult: (actionDigest, payload) =>
    Effect.zipRight(bg.settled([actionDigest]), Core.putActionResult(core, actionDigest, payload)),
  leaseUsed: (actionDigest, files) =>
    Effect.zipRight(
      Sharded.lease(core.actions, [actionDigest.hash], Core.leaseUntil(core), core.leaseTimeMs),
      Effect.forEach(files.filter((f) => !Digest.isEmpty(f)), (f) =>
        f.sizeBytes >= LargeFiles.THRESHOLD
          ? Effect.asVoid(LargeFiles.lease(core.large, f.hash, Core.leaseUntil(core), core.leaseTimeMs))
          : Sharded.lease(core.files, [f.hash], Core.leaseUntil(core), core.leaseTimeMs), { discard: true })
    ),
  withActionLock: (actionDigest, whileWaiting, run, store) =>
    ActionLock.withActionLock(
      core.locks,
      actionDigest,
      whileWaiting,
      run,
      store === undefined ? {} : {
        after: {
          finish: (a) =>
            Effect.flatMap(store(a), (payload) =>
              Option.isNone(payload) ? Effect.void : Core.putActionResult(core, actionDigest, payload.value).pipe(
                Effect.catchAll((e) =>
                  Effect.logWarning(`could not store the result of action ${Digest.format(actionDigest)}: ${e.message}`)
                )
              )),
          background: (effect) =>
            bg.run(actionDigest.hash, effect)
        }
      }
    )
})

type TreeMembers =
  | "snapshot"
  | "snapshotMany"
  | "snapshotSession"
  | "materialize"
  | "mergeTrees"
  | "written"
  | "capture"

/** Trees to and from disk, and merged. */
const treeMembers = (core: Core.Core, bg: Background): Pick<Service, TreeMembers> => {
  let merges = 0
  return {
    snapshot: (dir, globs, session) =>
      Snapshotting.snapshot(core, dir, globs, session === undefined ? undefined : StatIndex.of(session)),
    snapshotMany: (dir, requests, session) =>
      Snapshotting.snapshotMany(core, dir, requests, session === undefined ? undefined : StatIndex.of(session)),
    snapshotSession: (workspace, options) =>
      Effect.acquireRelease(
        Effect.sync(() => Session.open(core.root, workspace, options)),
        (session) =>
          Effect.try(() => Session.save(session)).pipe(
            Effect.catchAll((e) => Effect.logWarning(`could not save the stat index: ${e.error}`))
          )
      ),
    materialize: (digest, destination, options) => Materialize.materialize(core, digest, destination, options),
    capture: (root, outputs, blobs) => Capture.capture(core, root, outputs, blobs),
    mergeTrees: (layers, options) =>
      options?.behind === true && options.rewrite !== true
        ? TreeMerge.merge(core, layers, false, (root) =>
          Tree.finishBehind(core, root, (commit) =>
            bg.run(
              `merge ${merges++}`,
              commit.pipe(Effect.catchAll((e) => Effect.logWarning(`could not store merged inputs: ${e.message}`)))
            )))
        : TreeMerge.merge(core, layers, options?.rewrite ?? false),
    written: bg.all
  }
}

/**
 * Opens the store; its LMDB environments are shared with every other Store open in this process on the same files,
 * and released when the scope closes.
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = (
  options: Partial<Options> = {}
): Effect.Effect<Service, StoreError | StoreConfigConflict | UnsafeDirectory, Scope.Scope> =>
  Effect.gen(function*() {
    const opts = defaultOptions(options)
    const root = path.resolve(opts.root)
    const core = yield* openCore(opts, root)
    const cap = yield* Effect.try({
      try: () => Usage.capOf(root, opts.maxSizeBytes),
      catch: (e) =>
        e instanceof Usage.CapFileError
          ? new StoreError({ reason: "Unsupported", detail: e.problem, path: e.file })
          : ioError(root, "cannot read the store's cap")(e)
    })
    // After the background writes (closed first), before the environments: what this process added is counted.
    yield* Effect.addFinalizer(() =>
      Effect.try({
        try: () => Usage.noteAdded(root, Core.addedBytes(core)),
        catch: ioError(root, "cannot note what this process added to the store")
      }).pipe(
        // Only the estimate suffers (the next collection measures the store): no reason to fail the closing.
        Effect.catchAll((e) => Effect.logDebug(e.message))
      )
    )
    // Apart: an action's result may wait for a check of its inputs (`withActionLock`), and a sandbox laid out by
    // another process waits only for the merged trees it reads (`written`).
    const actionWrites = yield* background()
    const treeWrites = yield* background()
    const service: Service = {
      options: { ...opts, root, shardCount: core.files.count, maxSizeBytes: cap.bytes },
      ...BlobMembers.make(core),
      ...actionMembers(core, actionWrites),
      ...treeMembers(core, treeWrites)
    }
    return Core.register(service, core)
  })

/**
 * @since 0.1.0
 * @category layers
 */
export const layer = (
  options: Partial<Options> = {}
): Layer.Layer<Store, StoreError | StoreConfigConflict | UnsafeDirectory> => Layer.scoped(Store, make(options))

/**
 * When this process skipped writing `digest` because the store held it, if it did (for messages about missing bytes).
 *
 * @since 0.1.0
 * @category diagnostics
 */
export const skippedWriteAt = (digest: Digest.Digest): Date | undefined => {
  const at = Sharded.skippedWrite(digest.hash)
  return at === undefined ? undefined : new Date(at)
}

/**
 * The most entries a directory may hold for `materialize` with `reuse` to refill it rather than write it afresh.
 *
 * @since 0.1.0
 * @category constants
 */
export const REUSE_MAX_ENTRIES: number = Refill.MAX_ENTRIES

/**
 * Files of at least this many bytes are kept outside LMDB, each a read-only file of its own that sandboxes hard-link.
 *
 * @since 0.1.0
 * @category constants
 */
export const LARGE_FILE_BYTES: number = LargeFiles.THRESHOLD
