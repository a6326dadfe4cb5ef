/**
 * The content-addressed store: file blobs, REAPI `Directory` protos and the action cache, each on sharded LMDB
 * under one root, plus large files kept outside LMDB so they can be hard-linked. Many kiln processes share one store
 * on disk at once.
 *
 * @since 0.1.0
 */
import * as Context from "effect/Context"
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import type * as Either from "effect/Either"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import type * as Scope from "effect/Scope"
import * as fs from "node:fs"
import * as path from "node:path"
import * as Digest from "../domain/Digest.js"
import type * as Directory from "../domain/Directory.js"
import { StoreConfigConflict, StoreError } from "../domain/StoreErrors.js"
import type { InputConflict, InvalidOutput } from "../domain/TreeErrors.js"
import type * as RunMemo from "../engine/RunMemo.js"
import { cacheDir } from "../os/CacheDir.js"
import { errnoOf, ioError } from "../os/Errno.js"
import { mkdirp } from "../os/Mkdirp.js"
import * as ActionLock from "./internal/actionLock.js"
import * as Capture from "./internal/capture.js"
import * as Core from "./internal/core.js"
import * as LargeFiles from "./internal/largeFiles.js"
import * as Sharded from "./internal/lmdb/shards.js"
import * as Maintenance from "./internal/maintenance.js"
import * as Materialize from "./internal/materialize.js"
import * as Refill from "./internal/refill.js"
import * as Snapshot from "./internal/snapshot.js"
import * as StatIndex from "./internal/statIndex.js"
import * as Tree from "./internal/tree.js"
import * as TreeMerge from "./internal/treeMerge.js"

const GiB = 1024 * 1024 * 1024

/**
 * @since 0.1.0
 * @category models
 */
export interface Options {
  /** Default `$XDG_CACHE_HOME/kiln/store`, else `~/.cache/kiln/store`. */
  readonly root: string
  /** Shards per store, a power of two up to 256. Fixed when the store is created. Default 16. */
  readonly shardCount: number
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
  /** The size `gc` shrinks the store to when no target is given. Default 20 GiB. */
  readonly maxSizeBytes: number
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
  shardCount: 16,
  maxReaders: 4096,
  filesMapSize: 16 * GiB,
  directoriesMapSize: 4 * GiB,
  actionsMapSize: 4 * GiB,
  leaseTimeMs: 2 * 60 * 60 * 1000,
  maxSizeBytes: 20 * GiB,
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
 * A path a snapshot read, with its stat and what it found there: a file's hash, a symlink's target, a directory's
 * names (`kind` `a`: a glob's base that does not exist).
 *
 * @since 0.1.0
 * @category models
 */
export type SnapshotObservation = RunMemo.Seen

/**
 * An open stat index for one workspace (see `snapshotSession`).
 *
 * @since 0.1.0
 * @category models
 */
export interface SnapshotSession {
  readonly file: string
  /** Files whose content this session had to read: new, or changed since the index last saw them. */
  readonly hashed: number
}

/**
 * @since 0.1.0
 * @category models
 */
export type CheckReport = Maintenance.CheckReport
/**
 * @since 0.1.0
 * @category models
 */
export type GcReport = Maintenance.GcReport
/**
 * @since 0.1.0
 * @category models
 */
export type Stats = Maintenance.Stats

/**
 * @since 0.1.0
 * @category models
 */
export interface Service {
  readonly options: Options
  /** Stores file contents; with `expected`, fails with `DigestMismatch` unless the bytes hash to it. */
  readonly putFile: (bytes: Uint8Array, expected?: Digest.Digest) => Effect.Effect<Digest.Digest, StoreError>
  readonly putFiles: (blobs: ReadonlyArray<Uint8Array>) => Effect.Effect<Array<Digest.Digest>, StoreError>
  /** Stores a file from disk, streaming it when it is large. */
  readonly putFilePath: (file: string) => Effect.Effect<Digest.Digest, StoreError>
  /** A file's bytes, checked against the digest; corrupt bytes are removed and reported missing. */
  readonly getFile: (digest: Digest.Digest) => Effect.Effect<Uint8Array, Digest.MissingDigest | StoreError>
  readonly putDirectory: (dir: Directory.Directory) => Effect.Effect<Digest.Digest, StoreError>
  readonly getDirectory: (
    digest: Digest.Digest
  ) => Effect.Effect<Directory.Directory, Digest.MissingDigest | StoreError>
  readonly hasFile: (digest: Digest.Digest) => Effect.Effect<boolean, StoreError>
  readonly hasDirectory: (digest: Digest.Digest) => Effect.Effect<boolean, StoreError>
  /** Removes a digest from the file and directory stores; true when something was removed. */
  readonly remove: (digest: Digest.Digest) => Effect.Effect<boolean, StoreError>
  /** Extends the leases of a tree's directories and files (those present). */
  readonly leaseTree: (root: Digest.Digest) => Effect.Effect<void, Digest.MissingDigest | StoreError>
  /**
   * What a cache hit does with its output tree: fails with `MissingDigest` naming the first absent blob, else extends
   * the leases of the whole tree. One walk instead of `ensureDownloaded` and `leaseTree` each walking it.
   */
  readonly ensureLeased: (root: Digest.Digest) => Effect.Effect<void, Digest.MissingDigest | StoreError>
  /** Fails with `MissingDigest` naming the first blob of the tree (directory or file) that is absent. */
  readonly ensureDownloaded: (root: Digest.Digest) => Effect.Effect<void, Digest.MissingDigest | StoreError>
  /** Every entry of a tree, depth first, in name order. */
  readonly listTree: (root: Digest.Digest) => Effect.Effect<Array<TreeEntry>, Digest.MissingDigest | StoreError>
  readonly getActionResult: (actionDigest: Digest.Digest) => Effect.Effect<Option.Option<Uint8Array>, StoreError>
  /** Many action-cache entries in one go: one read transaction per shard. */
  readonly getActionResults: (
    actionDigests: ReadonlyArray<Digest.Digest>
  ) => Effect.Effect<Array<Option.Option<Uint8Array>>, StoreError>
  /** Stores (or replaces) the result of an action. */
  readonly putActionResult: (actionDigest: Digest.Digest, payload: Uint8Array) => Effect.Effect<void, StoreError>
  readonly removeActionResult: (actionDigest: Digest.Digest) => Effect.Effect<boolean, StoreError>
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
   * still under the lock but in the background: the caller does not wait for the commit (an fsync), another process
   * finds the result as soon as the lock is free, this process's own reads of the action wait for it, and closing
   * the store waits for every such write.
   */
  readonly withActionLock: <A, E, R>(
    actionDigest: Digest.Digest,
    whileWaiting: Effect.Effect<Option.Option<A>, E, R>,
    run: Effect.Effect<A, E, R>,
    store?: (a: A) => Option.Option<Uint8Array>
  ) => Effect.Effect<A, E | StoreError, R>
  /**
   * Snapshots a directory (filtered by globs relative to it; `!` excludes) into the store. Within a session,
   * directories are listed once and files whose stat is unchanged since they were last hashed are not read.
   */
  readonly snapshot: (
    dir: string,
    globs?: ReadonlyArray<string>,
    session?: SnapshotSession,
    /** Within a session, collects every path read, with what was found there (the engine's run memo). */
    observe?: Array<SnapshotObservation>
  ) => Effect.Effect<Digest.Digest, StoreError>
  /**
   * `snapshot` of one directory for each of many glob sets, their contents stored together (one commit per shard
   * for all): the engine snapshots every process's own inputs so. Each succeeds or fails on its own; the outer
   * error is a failure to store.
   */
  readonly snapshotMany: (
    dir: string,
    requests: ReadonlyArray<{
      readonly globs: ReadonlyArray<string>
      readonly observe?: Array<SnapshotObservation> | undefined
    }>,
    session?: SnapshotSession
  ) => Effect.Effect<Array<Either.Either<Digest.Digest, StoreError>>, StoreError>
  /**
   * A snapshot session for a workspace: its persisted stat index, saved when the scope closes. With `lazy`, the index
   * is read only once a few files had to be hashed without it (a run that expects to look at few files).
   */
  readonly snapshotSession: (
    workspace: string,
    options?: { readonly lazy?: boolean }
  ) => Effect.Effect<SnapshotSession, never, Scope.Scope>
  /** Writes a tree onto disk. */
  readonly materialize: (
    digest: Digest.Digest,
    destination: string,
    options?: Materialize.MaterializeOptions
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
  /** Waits for this process's writes still committing in the background (see `mergeTrees`' `behind`). */
  readonly written: Effect.Effect<void>
  /** Captures the declared outputs under `root` (absent ones are left out) into a tree. */
  readonly capture: (
    root: string,
    outputs: Capture.Outputs
  ) => Effect.Effect<Digest.Digest, StoreError | InvalidOutput>
  /**
   * `capture`, storing `blobs` too, in the same commits (a process's stdout and stderr with its outputs); says the
   * tree's digest and the blobs'. `read` collects each file captured (its absolute path), with its digest.
   */
  readonly captureWith: (
    root: string,
    outputs: Capture.Outputs,
    blobs: ReadonlyArray<Uint8Array>,
    read?: Array<readonly [string, Digest.Digest]>
  ) => Effect.Effect<readonly [Digest.Digest, ReadonlyArray<Digest.Digest>], StoreError | InvalidOutput>
  readonly check: (options?: { readonly repair?: boolean }) => Effect.Effect<CheckReport, StoreError>
  readonly gc: (options?: { readonly targetSizeBytes?: number }) => Effect.Effect<GcReport, StoreError>
  readonly stats: Effect.Effect<Stats, StoreError>
  /**
   * Clears reader slots that dead processes left in every shard (opening each), and says how many it cleared. A stale
   * slot keeps LMDB from reusing the pages freed after its snapshot; opening an environment clears them too, but
   * shards are opened on first use, so a process that died leaves its slots in shards nobody opens for a while.
   */
  readonly clearStaleReaders: Effect.Effect<number, StoreError>
  /**
   * Clears the reader slots of `pid`, a process that has died, waiting for the kernel to release its locks if need
   * be (see `Maintenance.clearReadersOf`), at most `within`; says how many stale slots it cleared.
   */
  readonly clearReadersOf: (pid: number, within: Duration.DurationInput) => Effect.Effect<number, StoreError>
}

/**
 * @since 0.1.0
 * @category tags
 */
export class Store extends Context.Tag("kiln/Store")<Store, Service>() {}

const LAYOUT = "kiln-store.json"
const FORMAT = 1

interface Layout {
  readonly format: number
  readonly shardCount: number
}

/**
 * The store records its layout on creation; opening it with another shard count would look for every digest in
 * the wrong shard, so it is refused. Two creators racing agree through `link`, which never replaces.
 */
const ensureLayout = (root: string, shardCount: number): Effect.Effect<void, StoreError | StoreConfigConflict> =>
  Effect.suspend((): Effect.Effect<void, StoreError | StoreConfigConflict> => {
    const file = path.join(root, LAYOUT)
    const read = (): Layout | undefined => {
      try {
        return JSON.parse(fs.readFileSync(file, "utf8")) as Layout
      } catch (e) {
        if (errnoOf(e) === "ENOENT") return undefined
        throw e
      }
    }
    try {
      // Private to its user when kiln makes it (it holds every cached blob and log); a store shared by a group is
      // one its owner made so, and keeps its mode.
      mkdirp(root, 0o700)
      let layout = read()
      if (layout === undefined) {
        const tmp = `${file}.${process.pid}.${Date.now()}.tmp`
        fs.writeFileSync(tmp, JSON.stringify({ format: FORMAT, shardCount }) + "\n", { mode: 0o644 })
        try {
          fs.linkSync(tmp, file)
        } catch (e) {
          if (errnoOf(e) !== "EEXIST") throw e
        } finally {
          fs.unlinkSync(tmp)
        }
        layout = read()!
      }
      if (layout.format !== FORMAT) {
        return Effect.fail(
          new StoreError({ reason: "Unsupported", detail: `unknown store format ${layout.format}`, path: file })
        )
      }
      if (layout.shardCount !== shardCount) {
        return Effect.fail(
          new StoreConfigConflict({
            path: root,
            setting: "shardCount",
            existing: String(layout.shardCount),
            requested: String(shardCount)
          })
        )
      }
      return Effect.void
    } catch (e) {
      return Effect.fail(
        e instanceof SyntaxError
          ? new StoreError({ reason: "Corrupt", detail: "the layout file is not valid JSON", path: file })
          : ioError(root, "cannot open the store")(e)
      )
    }
  })

const missing = (digest: Digest.Digest, kind: "file" | "directory") => new Digest.MissingDigest({ digest, kind })

/**
 * Opens the store; its LMDB environments are shared with every other Store open in this process on the same files,
 * and released when the scope closes.
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = (
  options: Partial<Options> = {}
): Effect.Effect<Service, StoreError | StoreConfigConflict, Scope.Scope> =>
  Effect.gen(function*() {
    const opts = defaultOptions(options)
    if (!Sharded.isPowerOfTwo(opts.shardCount)) {
      return yield* new StoreError({
        reason: "Unsupported",
        detail: `the shard count must be a power of two from 1 to 256, got ${opts.shardCount}`
      })
    }
    const root = path.resolve(opts.root)
    yield* ensureLayout(root, opts.shardCount)
    const settings = (mapSize: number) => ({ mapSize, maxReaders: opts.maxReaders })
    const core: Core.Core = {
      root,
      files: yield* Sharded.open(root, "files", opts.shardCount, settings(opts.filesMapSize)),
      directories: yield* Sharded.open(root, "directories", opts.shardCount, settings(opts.directoriesMapSize)),
      actions: yield* Sharded.open(root, "actions", opts.shardCount, settings(opts.actionsMapSize)),
      locks: yield* Sharded.open(root, "locks", 1, {
        mapSize: 64 * 1024 * 1024,
        maxReaders: opts.maxReaders,
        noSync: true
      }),
      large: LargeFiles.make(root),
      leaseTimeMs: opts.leaseTimeMs,
      verified: new Map(),
      committing: new Map()
    }
    const getDirectory = (digest: Digest.Digest) =>
      Effect.flatMap(
        Core.getDirectory(core, digest),
        Option.match({ onNone: () => Effect.fail(missing(digest, "directory")), onSome: Effect.succeed })
      )
    // Action-cache writes still committing in the background, by action hash (see withActionLock).
    const writing = new Map<string, Deferred.Deferred<void>>()
    const inBackground = (hash: string, effect: Effect.Effect<void>) =>
      Effect.gen(function*() {
        const done = yield* Deferred.make<void>()
        writing.set(hash, done)
        yield* Effect.forkDaemon(Effect.ensuring(
          effect,
          Effect.zipRight(
            Effect.sync(() => writing.get(hash) === done && writing.delete(hash)),
            Deferred.succeed(done, undefined)
          )
        ))
      })
    let merges = 0
    /** Waits for this process's own pending writes of these actions: a read after a run sees its result. */
    const settled = (digests: ReadonlyArray<Digest.Digest>) =>
      Effect.suspend(() => {
        if (writing.size === 0) return Effect.void
        const waits = digests.flatMap((d) => {
          const w = writing.get(d.hash)
          return w === undefined ? [] : [Deferred.await(w)]
        })
        return waits.length === 0 ? Effect.void : Effect.all(waits, { discard: true })
      })
    // Registered after the LMDB environments were opened, so it runs before they close.
    yield* Effect.addFinalizer(() =>
      Effect.suspend(() => Effect.all([...writing.values()].map(Deferred.await), { discard: true }))
    )
    const service: Service = {
      options: { ...opts, root },
      putFile: (bytes, expected) =>
        Effect.map(Core.putFiles(core, [bytes], expected === undefined ? undefined : [expected]), (d) => d[0]!),
      putFiles: (blobs) => Core.putFiles(core, blobs),
      putFilePath: (file) =>
        Effect.flatMap(
          Effect.try({ try: () => fs.statSync(file), catch: ioError(file, "cannot store") }),
          (st) =>
            st.size >= LargeFiles.THRESHOLD
              ? LargeFiles.putFromPath(core.large, file, Core.leaseUntil(core), core.leaseTimeMs)
              : Effect.flatMap(
                Effect.try({ try: () => fs.readFileSync(file), catch: ioError(file, "cannot read") }),
                (bytes) => Effect.map(Core.putFiles(core, [bytes]), (d) => d[0]!)
              )
        ),
      getFile: (digest) =>
        Effect.flatMap(
          Core.getFile(core, digest),
          Option.match({ onNone: () => Effect.fail(missing(digest, "file")), onSome: Effect.succeed })
        ),
      putDirectory: (dir) => Effect.map(Core.putDirectories(core, [dir]), (d) => d[0]!),
      getDirectory,
      hasFile: (digest) => Core.hasFile(core, digest),
      hasDirectory: (digest) => Core.hasDirectory(core, digest),
      remove: (digest) =>
        Effect.map(
          Effect.all([Core.removeFile(core, digest), Core.removeDirectory(core, digest)]),
          ([a, b]) => a || b
        ),
      leaseTree: (root) => Core.leaseTree(core, root),
      ensureDownloaded: (root) => Core.ensureDownloaded(core, root),
      ensureLeased: (root) => Core.ensureLeased(core, root),
      listTree: (root) => {
        const dirs = new Map<string, Directory.Directory>()
        return Effect.zipRight(
          Core.walkTree(core, root, (p, dir) => dirs.set(p, dir)),
          Effect.sync(() => {
            const out: Array<TreeEntry> = []
            const go = (prefix: string, dir: Directory.Directory) => {
              const join = (name: string) => prefix === "" ? name : `${prefix}/${name}`
              const names = [
                ...dir.files.map((f) => ({ name: f.name, f })),
                ...dir.directories.map((d) => ({ name: d.name, d })),
                ...dir.symlinks.map((s) => ({ name: s.name, s }))
              ].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0))
              for (const n of names) {
                if ("f" in n) {
                  out.push({ path: join(n.name), type: "file", digest: n.f.digest, isExecutable: n.f.isExecutable })
                } else if ("d" in n) {
                  out.push({ path: join(n.name), type: "directory", digest: n.d.digest })
                  go(join(n.name), dirs.get(join(n.name))!)
                } else {
                  out.push({ path: join(n.name), type: "symlink", target: n.s.target })
                }
              }
            }
            go("", dirs.get("")!)
            return out
          })
        )
      },
      getActionResult: (actionDigest) =>
        Effect.zipRight(settled([actionDigest]), Core.getActionResult(core, actionDigest)),
      getActionResults: (actionDigests) =>
        Effect.zipRight(settled(actionDigests), Core.getActionResults(core, actionDigests)),
      putActionResult: (actionDigest, payload) =>
        Effect.zipRight(settled([actionDigest]), Core.putActionResult(core, actionDigest, payload)),
      leaseUsed: (actionDigest, files) =>
        Effect.zipRight(
          Sharded.lease(core.actions, [actionDigest.hash], Core.leaseUntil(core), core.leaseTimeMs),
          Effect.forEach(files.filter((f) => !Digest.isEmpty(f)), (f) =>
            f.sizeBytes >= LargeFiles.THRESHOLD
              ? Effect.asVoid(LargeFiles.lease(core.large, f.hash, Core.leaseUntil(core), core.leaseTimeMs))
              : Sharded.lease(core.files, [f.hash], Core.leaseUntil(core), core.leaseTimeMs), { discard: true })
        ),
      removeActionResult: (actionDigest) =>
        Effect.zipRight(
          settled([actionDigest]),
          Effect.map(Sharded.removeBatch(core.actions, [actionDigest.hash]), (r) => r.length > 0)
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
                Option.match(store(a), {
                  onNone: () => Effect.void,
                  onSome: (payload) =>
                    Core.putActionResult(core, actionDigest, payload).pipe(
                      Effect.catchAll((e) =>
                        Effect.logWarning(
                          `could not store the result of action ${Digest.format(actionDigest)}: ${e.message}`
                        )
                      )
                    )
                }),
              background: (effect) => inBackground(actionDigest.hash, effect)
            }
          }
        ),
      snapshot: (dir, globs, session, observe) =>
        Snapshot.snapshot(core, dir, globs, session as StatIndex.StatIndex | undefined, observe),
      snapshotMany: (dir, requests, session) =>
        Snapshot.snapshotMany(core, dir, requests, session as StatIndex.StatIndex | undefined),
      snapshotSession: (workspace, options) =>
        Effect.acquireRelease(
          Effect.sync(() => StatIndex.open(root, workspace, options) as SnapshotSession),
          (index) =>
            Effect.try(() => StatIndex.save(index as StatIndex.StatIndex)).pipe(
              Effect.catchAll((e) => Effect.logWarning(`could not save the stat index: ${e.error}`))
            )
        ),
      materialize: (digest, destination, options) => Materialize.materialize(core, digest, destination, options),
      capture: (root, outputs) => Capture.capture(core, root, outputs),
      captureWith: (root, outputs, blobs, read) => Capture.captureWith(core, root, outputs, blobs, read),
      mergeTrees: (layers, options) =>
        options?.behind === true && options.rewrite !== true
          ? TreeMerge.merge(core, layers, false, (root) =>
            Tree.finishBehind(core, root, (commit) =>
              inBackground(
                `merge ${merges++}`,
                commit.pipe(Effect.catchAll((e) => Effect.logWarning(`could not store merged inputs: ${e.message}`)))
              )))
          : TreeMerge.merge(core, layers, options?.rewrite ?? false),
      written: Effect.suspend(() => Effect.all([...writing.values()].map(Deferred.await), { discard: true })),
      check: (options) => Maintenance.check(core, options?.repair ?? false),
      gc: (options) => Maintenance.gc(core, options?.targetSizeBytes ?? opts.maxSizeBytes),
      stats: Maintenance.stats(core, opts.shardCount),
      clearStaleReaders: Maintenance.clearStaleReaders(core),
      clearReadersOf: (pid, within) => Maintenance.clearReadersOf(core, pid, Duration.toMillis(within))
    }
    return service
  })

/**
 * @since 0.1.0
 * @category layers
 */
export const layer = (options: Partial<Options> = {}): Layer.Layer<Store, StoreError | StoreConfigConflict> =>
  Layer.scoped(Store, make(options))

/**
 * When this process skipped writing `digest` because it found the store holding it, if it did: what a message about
 * bytes found missing later names, since the copy it relied on was someone else's.
 *
 * @since 0.1.0
 * @category diagnostics
 */
export const skippedWriteAt = (digest: Digest.Digest): Date | undefined => {
  const at = Sharded.skippedWrite(digest.hash)
  return at === undefined ? undefined : new Date(at)
}

/**
 * The most entries a directory may hold for `materialize` with `reuse` to refill it rather than empty it: beyond
 * that, listing and comparing it costs more than writing the tree afresh.
 *
 * @since 0.1.0
 * @category constants
 */
export const REUSE_MAX_ENTRIES: number = Refill.MAX_ENTRIES

/**
 * Files of at least this many bytes are kept outside LMDB, each a read-only file of its own that sandboxes may
 * hard-link: anything that moves files into the store's keeping treats them apart.
 *
 * @since 0.1.0
 * @category constants
 */
export const LARGE_FILE_BYTES: number = LargeFiles.THRESHOLD
