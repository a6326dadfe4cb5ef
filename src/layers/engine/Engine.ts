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
import type { Config, InvalidConfig } from "../../domain/Config.js"
import type * as Digest from "../../domain/Digest.js"
import type { MissingDigest } from "../../domain/Digest.js"
import type { ProcessResult, SandboxKind, SpawnError } from "../../domain/Process.js"
import { RemoteTier } from "../../domain/RemoteTier.js"
import type { BacktrackLimit, NoProducer } from "../../domain/RunErrors.js"
import type { SandboxError, SandboxerUnavailable } from "../../domain/Sandbox.js"
import type { StoreError } from "../../domain/StoreErrors.js"
import type { InputConflict, InvalidOutput } from "../../domain/TreeErrors.js"
import { ProcessRunner } from "../runner/ProcessRunner.js"
import { type HashProgress, Store } from "../store/Store.js"
import { Workspace } from "../workspace/Workspace.js"
import * as Explain from "./internal/explain.js"
import * as Run from "./internal/run.js"

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
  /** Why it failed, was skipped or errored; for a failed process, the tail of its stderr. */
  readonly detail?: string
  /** What kept it from producing a result or from writing its outputs back, typed (absent for a tool's exit). */
  readonly error?: ProcessFailure
  /** A command that re-runs a failed process exactly. */
  readonly reproduce?: string
  /** Whether it succeeded and its outputs are in the workspace. */
  readonly ok: boolean
  /** The sandbox it had, when it ran here (see `Process.SandboxKind`). */
  readonly sandbox?: SandboxKind
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
  | { readonly _tag: "Started"; readonly name: string }
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
      Effect.scoped(Explain.explain(store, { ...options, ...(remote !== undefined ? { remote } : {}) }))
  }
})

/**
 * @since 0.1.0
 * @category layers
 */
export const layer: Layer.Layer<Engine, never, Store | ProcessRunner | Workspace> = Layer.effect(Engine, make)
