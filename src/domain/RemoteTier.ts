/**
 * A cache behind the local action cache (a remote one), as the runner sees it: asked for what the local cache
 * missed, and offered what ran. The runner looks up locally first and writes a remote hit into the local cache,
 * so the next run is local. Remote trouble is never the runner's error: a lookup that fails is a miss, and an offer
 * only queues an upload.
 *
 * @since 0.1.0
 */
import * as Context from "effect/Context"
import type * as Effect from "effect/Effect"
import type * as Option from "effect/Option"
import type { Digest } from "./Digest.js"
import type { Process, SpawnError } from "./Process.js"

/**
 * A result as the action cache holds it.
 *
 * @since 0.1.0
 * @category models
 */
export interface Entry {
  readonly exitCode: number | null
  readonly signal: string | null
  readonly timedOut: boolean
  readonly stdoutDigest: Digest
  readonly stderrDigest: Digest
  readonly outputDigest: Digest
  readonly durationMs: number
}

/**
 * @since 0.1.0
 * @category models
 */
export interface LookupOptions {
  /**
   * The caller runs what misses, and the processes the executor will be asked to run are looked up beside that
   * instead of before it: they are answered none at once, and each one's execution takes its own lookup's hit, if it
   * has one, without executing (a run's lookups before its graph). A caller that only looks (explain, verify) leaves
   * this off.
   */
  readonly aheadOfExecution?: boolean
}

/**
 * @since 0.1.0
 * @category models
 */
export interface Service {
  /**
   * Looks processes up (each with its action key); a hit's outputs are in the local store, checked against their
   * digests, when it is returned. None for a miss, and for anything that went wrong.
   */
  readonly lookup: (
    requests: ReadonlyArray<{ readonly process: Process; readonly key: Digest }>,
    options?: LookupOptions
  ) => Effect.Effect<Array<Option.Option<Entry>>>
  /**
   * Queues the upload of a result that ran and is in the local store (it goes up in the background);
   * `executedRemotely`: it ran on the executor, which keeps it already unless it is apart from the cache.
   */
  readonly offer: (process: Process, key: Digest, entry: Entry, executedRemotely?: boolean) => Effect.Effect<void>
  /**
   * Downloads the files of a tree (its directories are in the local store) that the local store lacks: a hit taken
   * under `validate` or `defer` left them remote until something needs them. False when the remote cannot give
   * them all (then the process that made them must run again).
   */
  readonly fetchTree: (root: Digest) => Effect.Effect<boolean>
  /** One line on whether the remote has this action, and all its blobs (what `kiln explain` says of it). */
  readonly describe: (key: Digest) => Effect.Effect<string>
  /** Executions the remote executor runs at once: 0 without an executor (every process then runs here). */
  readonly executorJobs: number
  /**
   * Runs a process on the remote executor, when there is one and the process may run there; its outputs are in the
   * local store when it returns. None: run it locally (no executor, a process that must stay local, or one the
   * executor could not take, with fallback on). With fallback off, a process the executor could not take fails.
   */
  readonly execute: (
    process: Process,
    key: Digest,
    options?: {
      /** The server must run it, not answer from its cache (a re-run because its cached result's bytes are gone). */
      readonly skipCache?: boolean
    }
  ) => Effect.Effect<Option.Option<Executed>, SpawnError>
}

/**
 * A process's run on a remote executor.
 *
 * @since 0.1.0
 * @category models
 */
export interface Executed {
  readonly exitCode: number | null
  readonly timedOut: boolean
  readonly stdoutDigest: Digest
  readonly stderrDigest: Digest
  readonly outputDigest: Digest
  /**
   * The executor answered from its action cache, nothing ran: a remote cache hit, taken as a lookup's hit is (its
   * outputs checked and fetched per `--cache-content`, counted among the remote hits, not the executions).
   */
  readonly cached?: boolean
  /** Milliseconds: upload, the execution as the client saw it, download, and the server's queue and run times. */
  readonly timings: Readonly<Record<string, number>>
}

/**
 * @since 0.1.0
 * @category tags
 */
export class RemoteTier extends Context.Tag("kiln/RemoteTier")<RemoteTier, Service>() {}
