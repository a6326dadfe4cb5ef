/**
 * The engine: runs a graph of processes from `kiln.json` concurrently, each on its own inputs plus its deps'
 * outputs, writes successful outputs back into the workspace, and backtracks when bytes it relied on are gone: it
 * re-runs the process of this run that produced them (cache reads off, writes on) and retries the consumer.
 *
 * @since 0.1.0
 */
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import type { Config, InvalidConfig } from "../../domain/config/Config.js"
import type * as Digest from "../../domain/Digest.js"
import type { MissingDigest } from "../../domain/Digest.js"
import type { ProcessResult, SandboxKind, SpawnError, UndeclaredWrites } from "../../domain/Process.js"
import { RemoteTier } from "../../domain/RemoteTier.js"
import type { BacktrackLimit, NoProducer } from "../../domain/RunErrors.js"
import type { SandboxError, SandboxerUnavailable } from "../../domain/Sandbox.js"
import type { StoreError } from "../../domain/StoreErrors.js"
import type { InputConflict, InvalidOutput } from "../../domain/TreeErrors.js"
import { ProcessRunner } from "../runner/ProcessRunner.js"
import { type HashProgress, Store } from "../store/Store.js"
import { Workspace } from "../workspace/Workspace.js"
import * as Explain from "./internal/explain.js"
import * as Logs from "./internal/logs.js"
import * as Plan from "./internal/plan.js"
import * as Run from "./internal/run.js"
import * as Verify from "./internal/verify.js"

export {
  /**
   * @since 0.1.0
   * @category errors
   */
  BacktrackLimit,
  /**
   * @since 0.1.0
   * @category errors
   */
  NoProducer
} from "../../domain/RunErrors.js"

/**
 * @since 0.1.0
 * @category models
 */
export type CacheMode = "read-write" | "read" | "write" | "off"

/**
 * @since 0.1.0
 * @category models
 */
export interface ProcessReport {
  readonly name: string
  readonly actionDigest: string | null
  readonly source: "ran" | "cache-hit" | "remote-cache" | "remote" | "skipped" | "error"
  readonly exitCode: number | null
  readonly timedOut: boolean
  readonly durationMs: number
  readonly backtracks: number
  /** Milliseconds from the start of the run. */
  readonly startMs: number
  readonly timings: Readonly<Record<string, number>>
  /** Its stdout and stderr as stored (`hash/size`), when it has a result: `kiln logs` and `--output-logs` read them. */
  readonly stdoutDigest?: string
  readonly stderrDigest?: string
  /**
   * Why it failed, was skipped or errored; for a failed tool, the last lines of its stdout and of its stderr (see
   * `RunOptions.failureLines`).
   */
  readonly detail?: string
  /** A line of advice on a failed tool's output (a write under a read-only input tree), also at the end of `detail`. */
  readonly hint?: string
  /** What kept it from producing a result or from writing its outputs back, typed (absent for a tool's exit). */
  readonly error?: ProcessFailure
  /** A command that re-runs a failed process exactly. */
  readonly reproduce?: string
  /** Whether it succeeded and its outputs are in the workspace. */
  readonly ok: boolean
  /** The sandbox it had, when it ran here (see `Process.SandboxKind`). */
  readonly sandbox?: SandboxKind
  /** What it wrote in its sandbox beyond its declared outputs, when it ran here (see `Process.UndeclaredWrites`). */
  readonly undeclaredWrites?: UndeclaredWrites
}

/**
 * @since 0.1.0
 * @category models
 */
export interface RunReport {
  readonly processes: ReadonlyArray<ProcessReport>
  readonly ran: number
  /** Hits of the local cache and of the remote one. */
  readonly cacheHits: number
  /** Hits served by the remote cache. */
  readonly remoteCacheHits: number
  /** Processes that ran on a remote executor (counted in `ran` too). */
  readonly remoteExecuted: number
  readonly failed: number
  readonly backtracks: number
  readonly wallMs: number
}

/**
 * @since 0.1.0
 * @category models
 */
export type Event =
  /** Its tool started: it has one of the runner's slots (a process waiting for one has not started). */
  | { readonly _tag: "Started"; readonly name: string }
  /** Its tool ended and gave its slot back; its outputs are being stored and written back. */
  | { readonly _tag: "Exited"; readonly name: string }
  /** What its tool wrote, as it wrote it (only under `RunOptions.followOutput`, and only for a local run). */
  | {
    readonly _tag: "Output"
    readonly name: string
    readonly stream: "stdout" | "stderr"
    readonly bytes: Uint8Array
  }
  | { readonly _tag: "Finished"; readonly report: ProcessReport }

/**
 * @since 0.1.0
 * @category models
 */
export interface RunOptions {
  readonly workspace: string
  readonly config: Config
  /** Default: every process. Their transitive deps run too. */
  readonly targets?: ReadonlyArray<string>
  readonly cache?: CacheMode
  readonly keepGoing?: boolean
  readonly maxBacktracks?: number
  readonly onEvent?: (event: Event) => Effect.Effect<void>
  /** Told of every input file the run's snapshots hash (new, or changed since the stat index saw it). */
  readonly onHashing?: HashProgress
  /**
   * Runs before each attempt of a process, once its input tree is known, with the results so far (tests use it to
   * delete bytes at a precise moment: after a producer finished, before its consumer materializes).
   */
  readonly beforeAttempt?: (
    name: string,
    input: Digest.Digest,
    resultOf: (name: string) => ProcessResult | undefined
  ) => Effect.Effect<void>
  /** The `--store-dir` to print in reproduce commands. */
  readonly storeDir?: string
  /**
   * More `kiln exec` arguments for reproduce commands, unquoted: the options of the run that its processes' results
   * depend on (its sandbox root, remote, store settings), so that the command re-runs a process as the run did.
   */
  readonly reproduceArgs?: ReadonlyArray<string>
  /** Whether `onEvent` is told what processes write as they write it (`Output` events). Default false. */
  readonly followOutput?: boolean
  /** How many of the last lines of a failed tool's stdout, and of its stderr, its report's `detail` holds (20). */
  readonly failureLines?: number
  /** The config file's name, for errors about its fields. Default `kiln.json`. */
  readonly configName?: string
  /**
   * sha256 of the config file's bytes, recorded in the run memo so that the CLI can tell, before it loads the
   * engine, that the config is the one a run validated.
   */
  readonly configHash?: string
  /** The config file's text, which the run memo keeps for the CLI to compare when it is small. */
  readonly configText?: string
  /** Whether processes whose run memo holds are taken as hits without a look at the store (default true). */
  readonly memo?: boolean
  /**
   * Whose outputs are written into the workspace: every process's (the default), or only those asked for: the
   * targets, or with none named, the processes nothing else in the run depends on. The others' outputs stay in the
   * store (or on the remote, under `--cache-content defer`), their digests known: a build whose intermediate outputs
   * only remote processes read never downloads them.
   */
  readonly writeBack?: "all" | "requested"
  /**
   * Where the workspace's lock is kept (one run at a time writes into a workspace; see `internal/workspaceLock.ts`).
   * Default: under the store's root, so that runs on one store exclude each other; the CLI gives the user's cache
   * directory, so that runs on different stores do too.
   */
  readonly lockDir?: string
}

/**
 * Why a process has no result (a tool that exits non-zero has one): its inputs (a glob that matches nothing is an
 * `InvalidConfig`), the store, its sandbox or sandboxer, its spawn, or missing bytes it could not get back.
 *
 * @since 0.1.0
 * @category errors
 */
export type ProcessFailure =
  | InvalidConfig
  | MissingDigest
  | StoreError
  | InputConflict
  | InvalidOutput
  | SandboxError
  | SandboxerUnavailable
  | SpawnError
  | BacktrackLimit

/**
 * @since 0.1.0
 * @category models
 */
export interface Service {
  /** `InvalidConfig`: kiln.json asks for something kiln refuses before anything runs (see `symlinkedPaths`). */
  readonly run: (options: RunOptions) => Effect.Effect<RunReport, NoProducer | InvalidConfig>
  /**
   * Why `name` would run or hit: its action digest, whether the cache has it, and what changed since its last
   * recorded run (input files by path, env, argv, deps' outputs). Deps are assumed to produce what they did then.
   */
  readonly explain: (options: {
    readonly workspace: string
    readonly config: Config
    readonly name: string
    readonly configName?: string
  }) => Effect.Effect<Array<string>, InvalidConfig | StoreError | MissingDigest | InputConflict>
  /** {@link Service.explain} of several processes, as data, their inputs snapshotted together. */
  readonly explainAll: (options: {
    readonly workspace: string
    readonly config: Config
    readonly names: ReadonlyArray<string>
    readonly configName?: string
  }) => Effect.Effect<Array<Explanation>, InvalidConfig | StoreError | MissingDigest | InputConflict>
  /**
   * The dry run: whether a run would take each of `names` from the cache or run it (a process whose dep would run
   * runs too), found as a run's lookups find it, without running anything or writing the workspace. Its deps are
   * looked at, not listed. A process whose inputs cannot be read would run (and fail): its reason says why.
   */
  readonly plan: (options: {
    readonly workspace: string
    readonly config: Config
    readonly names: ReadonlyArray<string>
    readonly configName?: string
  }) => Effect.Effect<Array<Planned>, StoreError | MissingDigest | InputConflict>
  /**
   * Re-runs processes whose results the cache holds (`names`, default every one; `sample` of them at random), each
   * in a fresh sandbox with the cache off, and compares their outputs and exit with the cached result: a process
   * that does not reproduce would poison a shared cache. Never changes an entry, unless `evict` removes those that
   * did not reproduce. Reports come in the order of `names`.
   */
  readonly verify: (options: VerifyOptions) => Effect.Effect<Array<VerifiedProcess>>
  /**
   * What the last recorded run of `name` in `workspace` printed (a hit's: the cached result's), with its action
   * digest and how it failed, if it did; `"unrecorded"` when this store has no run of it recorded with its logs.
   * `MissingDigest`: the store no longer holds them.
   */
  readonly logs: (options: {
    readonly workspace: string
    readonly name: string
  }) => Effect.Effect<ProcessLogs | "unrecorded", StoreError | MissingDigest>
}

/**
 * @since 0.1.0
 * @category models
 */
export interface ProcessLogs {
  readonly actionDigest: string
  /** How that run failed, when it did (`exit 3`). */
  readonly failed?: string
  readonly stdoutDigest: Digest.Digest
  readonly stderrDigest: Digest.Digest
  readonly stdout: Uint8Array
  readonly stderr: Uint8Array
}

/**
 * One process of a dry run (`Service.plan`).
 *
 * @since 0.1.0
 * @category models
 */
export interface Planned {
  readonly name: string
  readonly deps: ReadonlyArray<string>
  readonly status: "hit" | "run"
  /** Why, in a few words. */
  readonly reason: string
  /** The action a run would look up; null when a dep must run first (or its inputs cannot be read). */
  readonly actionDigest: string | null
}

/**
 * Why one process would run or hit the cache (`Service.explainAll`).
 *
 * @since 0.1.0
 * @category models
 */
export interface Explanation {
  readonly name: string
  readonly status: "hit" | "run"
  /** "in the cache", "not in the cache" or "never cached". */
  readonly reason: string
  readonly actionDigest: string
  /** The action of its last recorded run, if one is recorded and it differs. */
  readonly lastActionDigest: string | null
  /** What changed since its last run, one line each (or why nothing did). */
  readonly changes: ReadonlyArray<string>
  /** What the explanation assumed (a dep that would run first, one never recorded as its input). */
  readonly notes: ReadonlyArray<string>
  /** What the remote cache says of the action, when the run would use one. */
  readonly remote: string | null
}

/**
 * The lines `kiln explain` prints of an explanation: the verdict, then what changed, indented.
 *
 * @since 0.1.0
 * @category formatting
 */
export const explanationLines = (explanation: Explanation): Array<string> => Explain.linesOf(explanation)

/**
 * @since 0.1.0
 * @category models
 */
export interface VerifyOptions {
  readonly workspace: string
  readonly config: Config
  /** Default: every process the cache may hold (not `cache: "never"`). */
  readonly names?: ReadonlyArray<string>
  /** Re-run only this many of the cached ones, chosen at random. */
  readonly sample?: number
  /**
   * Remove the entries that did not reproduce from the local action cache (with `remoteEntries`, the local copy of
   * each, if any: REAPI and Bazel's HTTP cache give a client no way to remove one from the server).
   */
  readonly evict?: boolean
  /** Compare with the remote cache's entries (the engine's `RemoteTier`) instead of the local ones. */
  readonly remoteEntries?: boolean
  readonly configName?: string
}

/**
 * @since 0.1.0
 * @category models
 */
export interface VerifiedProcess {
  readonly name: string
  readonly actionDigest: string
  /**
   * `reproduced`: the same outputs and exit; `differs`; `not-cached`: nothing to compare with; `error`: it could not
   * be re-run (`detail` says why).
   */
  readonly status: "reproduced" | "differs" | "not-cached" | "error"
  readonly differences: ReadonlyArray<OutputDifference>
  /** Its exit code in the cached result and now, when they differ. */
  readonly exitCodes?: { readonly cached: number | null; readonly fresh: number | null }
  readonly detail?: string
  /** Whether its entry was removed (`evict`). */
  readonly evicted?: boolean
}

/**
 * @since 0.1.0
 * @category models
 */
export interface OutputDifference {
  readonly path: string
  readonly change: "changed" | "added" | "missing"
  readonly line?: { readonly number: number; readonly cached: string; readonly fresh: string }
}

/**
 * @since 0.1.0
 * @category tags
 */
export class Engine extends Context.Tag("kiln/Engine")<Engine, Service>() {}

/**
 * @since 0.1.0
 * @category constructors
 */
export const make: Effect.Effect<Service, never, Store | ProcessRunner | Workspace> = Effect.gen(function*() {
  const store = yield* Store
  const runner = yield* ProcessRunner
  const workspaceWriter = yield* Workspace
  const remote = Option.getOrUndefined(yield* Effect.serviceOption(RemoteTier))
  return {
    run: (options) => Effect.scoped(Run.run(store, runner, workspaceWriter, options)),
    explain: (options) =>
      Effect.scoped(Explain.explain(store, { ...options, ...(remote !== undefined ? { remote } : {}) })),
    explainAll: (options) =>
      Effect.scoped(Explain.explainAll(store, { ...options, ...(remote !== undefined ? { remote } : {}) })),
    plan: (options) => Effect.scoped(Plan.plan(store, runner, options)),
    verify: (options) => Effect.scoped(Verify.verify(store, runner, options, remote)),
    logs: (options) => Logs.logs(store, options)
  }
})

/**
 * @since 0.1.0
 * @category layers
 */
export const layer: Layer.Layer<Engine, never, Store | ProcessRunner | Workspace> = Layer.effect(Engine, make)
