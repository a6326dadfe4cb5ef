/**
 * Runs processes hermetically: action cache → concurrency limit → a fresh sandbox per process. A tool that exits
 * non-zero is a `ProcessResult`; the error channel carries kiln's own failures, `MissingDigest` among them.
 *
 * @since 0.1.0
 */
import * as Context from "effect/Context"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as FiberSet from "effect/FiberSet"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as os from "node:os"
import * as path from "node:path"
import { actionDigest } from "../../domain/ActionKey.js"
import type { Digest, MissingDigest } from "../../domain/Digest.js"
import * as Permits from "../../domain/Permits.js"
import { type Process, ProcessResult, type SpawnError } from "../../domain/Process.js"
import { type LookupOptions, RemoteTier } from "../../domain/RemoteTier.js"
import type { SandboxError, SandboxerUnavailable } from "../../domain/Sandbox.js"
import type { StoreError } from "../../domain/StoreErrors.js"
import type { InvalidOutput } from "../../domain/TreeErrors.js"
import type * as UnsafeDirectory from "../../domain/UnsafeDirectory.js"
import { cacheDir } from "../../os/CacheDir.js"
import * as MountNamespace from "../../os/mounts/MountNamespace.js"
import * as PrivateRoot from "../../os/PrivateRoot.js"
import { HelperLifetime } from "../lifetime/HelperLifetime.js"
import { Sandboxes } from "../sandbox/Sandboxes.js"
import { Sandboxer } from "../sandboxer/Sandboxer.js"
import * as Spawner from "../spawner/Spawner.js"
import * as SharedTrees from "../store/SharedTrees.js"
import { Store } from "../store/Store.js"
import * as BoundedRunner from "./internal/bounded.js"
import * as CachedRunner from "./internal/cached.js"
import * as LocalRunner from "./internal/local.js"
import type { Runner } from "./internal/runner.js"
import * as TreeChecks from "./internal/treeChecks.js"

/**
 * Whether a run may read the action cache and write it. Backtracking re-runs a producer with reads off and writes
 * on, so its fresh result replaces the stale entry.
 *
 * @since 0.1.0
 * @category models
 */
export interface CachePolicy {
  readonly read: boolean
  readonly write: boolean
  /**
   * The caller has just looked this very process up (`lookup`) and missed: the runner reads the cache again only
   * under the action's lock, where another engine's result would show.
   */
  readonly missed?: boolean
}

/**
 * How a cache hit's content is checked, in the local action cache and in the remote cache (the runner's option is
 * the remote's too; `kiln --cache-content`). The default is {@link defaultCacheContent}.
 *
 * - `validate`: a local hit's blobs are all in the store; a remote hit's are checked present on the server
 *   (FindMissingBlobs over every file, trees included) and downloaded when something needs them.
 * - `fetch`: as `validate` locally; a remote hit's outputs are downloaded before it counts as a hit.
 * - `defer`: the entry is trusted, local or remote; a blob gone when something needs it re-runs its producer
 *   (backtracking).
 *
 * @since 0.1.0
 * @category models
 */
export type CacheContent = "fetch" | "validate" | "defer"

/**
 * The one default of `cacheContent`, for the runner and the remote cache alike: a hit is checked, and its bytes
 * come when needed.
 *
 * @since 0.1.0
 * @category models
 */
export const defaultCacheContent: CacheContent = "validate"

/**
 * @since 0.1.0
 * @category models
 */
export interface Service {
  readonly run: (
    process: Process,
    options?: {
      readonly cache?: CachePolicy
      /** Workspace directories that may stand in for shared trees of the input root (see `WorkspaceTree`). */
      readonly workspaceTrees?: ReadonlyArray<WorkspaceTree>
      /**
       * Told when the process starts: once it has one of the `concurrency` slots (or goes to the executor), not
       * while it waits for one; never for a cache hit. It may be told more than once (a remote run that falls back
       * to a local one).
       */
      readonly onStart?: Effect.Effect<void>
      /** Told when a process told `onStart` ends, its slot free again, however it ended. */
      readonly onEnd?: Effect.Effect<void>
      /**
       * Told what a process that runs here writes to stdout and stderr, as it writes it (looked at every 100 ms);
       * a remote one's output, and a hit's, are its result's only.
       */
      readonly onOutput?: (stream: "stdout" | "stderr", bytes: Uint8Array) => Effect.Effect<void>
      /**
       * A consumer waits for this result alone (the engine's next process in a chain): a process that runs here has
       * its result returned before its sandbox is closed, which then happens in the background.
       */
      readonly awaited?: boolean
    }
  ) => Effect.Effect<
    ProcessResult,
    MissingDigest | SandboxError | SandboxerUnavailable | SpawnError | StoreError | InvalidOutput
  >
  /**
   * Looks processes up in the action cache without running anything: the entries are read together (one read
   * transaction per store shard), and each hit's content is checked per `cacheContent`. None for a miss, a process
   * cached `never`, or a hit whose bytes are gone; a store that cannot be read counts as a miss. With
   * `aheadOfExecution` (a caller that runs what misses), the remote's answer for a process the executor will run comes
   * with its execution instead (`LookupOptions`).
   */
  readonly lookup: (
    processes: ReadonlyArray<Process>,
    options?: LookupOptions
  ) => Effect.Effect<Array<Option.Option<ProcessResult>>>
  /**
   * Gets ready to run processes without waiting: starts the spawner (and arms it as the watchdog), so that its
   * start-up overlaps whatever the caller does before its first run. A failure to start shows at that run.
   */
  readonly warmUp: Effect.Effect<void>
  /**
   * Starts the sandboxer (which lays out large sandboxes: a Node start) without waiting, for a caller that expects
   * to need it. A failure to start shows at the first process that needs it.
   */
  readonly warmUpSandboxer: Effect.Effect<void>
  /** Whether some process of this run (or a shared tree) was laid out by the sandboxer. */
  readonly sandboxerUsed: Effect.Effect<boolean>
  /**
   * Checks now that the workspace directories processes mounted held while they ran, for every process still waiting
   * for that check (they are checked together, a while after the first one ends, and when the runner closes: see
   * `ProcessResult.inputsCheck`); the tickets of those whose directories changed, of every check so far. A caller
   * that records results as cached (a run memo) settles first.
   */
  readonly settleInputs: Effect.Effect<ReadonlySet<number>>
  /**
   * Brings the files of a tree whose directories are in the store into it from the remote cache, if there is one
   * (a remote hit under `validate` or `defer` leaves them there until needed); false when it cannot.
   */
  readonly fetchTree: (root: Digest) => Effect.Effect<boolean>
  /**
   * How many processes are worth having in progress at once: those it runs at a time, locally and on a remote
   * executor, and room to look up and lay out the next ones meanwhile. A caller with more ready to run keeps the
   * rest waiting before they start, holding nothing, so that its memory does not grow with the graph. Absent: no
   * bound.
   */
  readonly inFlight?: number
}

/**
 * A directory of the caller's workspace that holds exactly the tree `digest` (its snapshot took it whole): where
 * the process's input root has that tree at `path`, the sandbox mounts the directory itself, read-only, rather than
 * the store's copy, and nothing is written. `unchanged` is asked after the process has ended (once for every process
 * that ended by then, however many mounted it: the same function is the same tree): if anything under it changed
 * meanwhile, the result is not cached (it may not be the tree's).
 *
 * @since 0.1.0
 * @category models
 */
export interface WorkspaceTree {
  /** Relative to the input root. */
  readonly path: string
  readonly abs: string
  readonly digest: Digest
  /** How many files and symlinks it holds (the runner's split need not read the tree to know it is large). */
  readonly files: number
  readonly unchanged: () => boolean
}

/**
 * @since 0.1.0
 * @category tags
 */
export class ProcessRunner extends Context.Tag("kiln/ProcessRunner")<ProcessRunner, Service>() {}

/**
 * @since 0.1.0
 * @category models
 */
export interface Options {
  /** At most this many processes at once. Default: the CPU count. */
  readonly concurrency?: number
  /** How a cache hit's content is checked (see {@link CacheContent}). Default {@link defaultCacheContent}. */
  readonly cacheContent?: CacheContent
  /** Default `$KILN_NAMED_CACHES_DIR`, else `$XDG_CACHE_HOME/kiln/named_caches`, else `~/.cache/kiln/named_caches`. */
  readonly namedCachesDir?: string
  /** Between SIGTERM and SIGKILL of a process group that timed out or was interrupted. Default 3 s. */
  readonly grace?: Duration.DurationInput
  /**
   * How long after a process that mounted workspace directories ends they are checked, with those of every process
   * that ended meanwhile. Default: 50 times what the check costs, from one to ten seconds (`treeChecks.ts`).
   */
  readonly inputsCheckDelay?: Duration.DurationInput
  /**
   * Input subtrees of at least this many files are shared between sandboxes, mounted read-only, rather than written
   * into each (see `SharedTrees`); 0 writes every tree. Default `$KILN_SHARED_TREE_MIN_FILES`, else 1,000.
   */
  readonly sharedTreeMinFiles?: number
}

/**
 * The path every local process sees its sandbox at on this machine (its `Process.execRoot`), or `undefined` where
 * the path cannot be pinned (no mount namespaces, or `KILN_MOUNT_NAMESPACES=0`): then each runs at its sandbox's own
 * path. Tried once per process.
 *
 * @since 0.1.0
 * @category constructors
 */
export const execRoot = (): string | undefined => MountNamespace.execRoot().root

/**
 * @since 0.1.0
 * @category constructors
 */
export const defaultNamedCachesDir = (env: NodeJS.ProcessEnv = process.env): string =>
  cacheDir("named_caches", "KILN_NAMED_CACHES_DIR", env)

/**
 * @since 0.1.0
 * @category constructors
 */
export const make = (options: Options = {}) =>
  Effect.gen(function*() {
    const store = yield* Store
    const sandboxes = yield* Sandboxes
    // The spawner is this process's watchdog: with a HelperLifetime beneath the Store, it stays until the Store has
    // released its environments (see HelperLifetime), not only until this layer closes.
    const lifetime = yield* Effect.serviceOption(HelperLifetime)
    const spawner = yield* Spawner.make(Option.isSome(lifetime) ? { endWith: lifetime.value.addFinalizer } : {})
    const sandboxer = yield* Sandboxer
    const watched = new Set<string>()
    // The spawner is the watchdog: it is up before any process runs, and nothing else is started unless this
    // process dies (then it starts the sandboxer's post-mortem, which removes the sandboxes under these roots).
    const watch = (root: string) =>
      watched.has(root) ? Effect.void : Effect.flatMap(sandboxer.postMortem([...watched, root]), (postMortem) => {
        watched.add(root)
        return Option.isSome(postMortem) ? spawner.arm(postMortem.value) : Effect.void
      })
    const namedCachesDir = path.resolve(options.namedCachesDir ?? defaultNamedCachesDir())
    // Named caches are inputs no digest vouches for: a directory another user owns or can write is refused, as the
    // store's root is (and, like it, one a group shares on purpose is not).
    yield* PrivateRoot.verify("named caches directory", namedCachesDir, "group")
    const concurrency = Math.max(1, options.concurrency ?? os.availableParallelism())
    const minFiles = options.sharedTreeMinFiles ?? SharedTrees.minFilesFrom()
    // Closed before the spawner and the store it removes sandboxes with and releases leases on: its fibers (closings,
    // uninterruptible) are awaited. A closing yields first: the consumers its run released go before it.
    const closings = yield* FiberSet.make<void>()
    // Uploads waiting for a check of their inputs: closed after the checks' own closing has answered them all.
    const waitingUploads = yield* FiberSet.make<void>()
    const treeChecks = yield* TreeChecks.make(
      options.inputsCheckDelay !== undefined ? { delay: options.inputsCheckDelay } : {}
    )
    const local = LocalRunner.make(store, sandboxer, sandboxes, spawner, {
      namedCachesDir,
      closeLater: (closing) =>
        Effect.asVoid(FiberSet.run(closings, Effect.uninterruptible(Effect.zipRight(Effect.yieldNow(), closing)))),
      grace: options.grace ?? Duration.seconds(3),
      watch,
      running: yield* Permits.make(concurrency),
      sharedTrees: minFiles > 0 ? yield* SharedTrees.make(store, { minFiles }) : undefined,
      treeChecks
    })
    // As many sandboxes again as processes running: the next ones are filled, and the last ones captured, while
    // those run. (A sandbox held through its whole run made half of a cold process's time a wait for the store's
    // commits, with the CPUs idle.)
    const bounded = yield* BoundedRunner.make(concurrency * 2, local)
    // A process that runs is a span; a cache hit is not: the span cost a large share of a hit, and a hit is
    // in the result (`source: "cache-hit"`). No stack trace: capturing one per process cost more than a hit does.
    const traced: Runner = (process, policy) =>
      bounded(process, policy).pipe(
        Effect.withSpan("ProcessRunner.run", {
          attributes: { description: process.description },
          captureStackTrace: false
        })
      )
    const remote = yield* Effect.serviceOption(RemoteTier)
    // A remote executor takes what it may run (at its own bound, not --concurrency's); the rest runs here.
    const executed: Runner = Option.isNone(remote) ?
      traced :
      (process, policy) =>
        Effect.flatMap(
          Effect.zipRight(
            policy.onStart ?? Effect.void,
            Effect.ensuring(
              remote.value.execute(process, actionDigest(process), { skipCache: !policy.read }),
              policy.onEnd ?? Effect.void
            )
          ),
          (ran) =>
            Option.isNone(ran)
              ? traced(process, policy)
              : Effect.succeed(
                new ProcessResult({
                  ...ran.value,
                  signal: null,
                  actionDigest: actionDigest(process),
                  durationMs: 0,
                  // An answer from the executor's action cache (`cached_result`) is a remote hit, not an execution.
                  source: ran.value.cached === true ? "remote-cache" : "remote",
                  timings: ran.value.timings
                }, true)
              )
        )
    const cached = CachedRunner.make(
      store,
      executed,
      options.cacheContent ?? defaultCacheContent,
      treeChecks,
      (upload) => Effect.asVoid(FiberSet.run(waitingUploads, Effect.uninterruptible(upload))),
      Option.getOrUndefined(remote)
    )
    let warming = false
    const service: Service = {
      lookup: cached.lookup,
      warmUp: Effect.suspend(() => {
        if (warming) {
          return Effect.void
        }
        warming = true
        return Effect.zipRight(
          spawner.warmUp,
          watch(sandboxes.root).pipe(
            Effect.catchAll((e) => Effect.logDebug(`could not arm the watchdog ahead of time: ${e.message}`))
          )
        )
      }),
      warmUpSandboxer: sandboxer.start.pipe(
        Effect.catchAll((e) => Effect.logDebug(`could not start the sandboxer ahead of time: ${e.message}`))
      ),
      sandboxerUsed: sandboxer.used,
      // With the uploads that waited for it queued: the run's own flush of the remote then sends them.
      settleInputs: Effect.zipLeft(treeChecks.settle, FiberSet.awaitEmpty(waitingUploads)),
      run: (process, opts) =>
        cached.run(process, {
          ...(opts?.cache ?? { read: true, write: true }),
          ...(opts?.workspaceTrees !== undefined ? { workspaceTrees: opts.workspaceTrees } : {}),
          ...(opts?.onStart !== undefined ? { onStart: opts.onStart } : {}),
          ...(opts?.onEnd !== undefined ? { onEnd: opts.onEnd } : {}),
          ...(opts?.onOutput !== undefined ? { onOutput: opts.onOutput } : {}),
          ...(opts?.awaited === true ? { awaited: true } : {})
        }),
      fetchTree: (root) => Option.isSome(remote) ? remote.value.fetchTree(root) : Effect.succeed(false),
      // Twice what the bounded runner admits (itself twice the local concurrency): enough to have the next processes
      // looked up and laid out while the others run; the figures barely moved between 4 and 64 (report.md). Twice
      // the executor's jobs too: a whole wave uploaded and waiting for its slots while the one before runs, so that
      // the slots it frees all at once are taken at once, not as its processes finish bringing their outputs back.
      inFlight: Math.max(8, concurrency * 4) + (Option.isSome(remote) ? 2 * remote.value.executorJobs : 0)
    }
    return service
  })

/**
 * @since 0.1.0
 * @category layers
 */
export const layer = (
  options: Options = {}
): Layer.Layer<ProcessRunner, UnsafeDirectory.UnsafeDirectory, Store | Sandboxer | Sandboxes> =>
  Layer.scoped(ProcessRunner, make(options))
