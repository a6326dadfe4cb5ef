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
import type { Process } from "./Process.js"

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
export interface Service {
  /**
   * Looks processes up (each with its action key); a hit's outputs are in the local store, checked against their
   * digests, when it is returned. None for a miss, and for anything that went wrong.
   */
  readonly lookup: (
    requests: ReadonlyArray<{ readonly process: Process; readonly key: Digest }>
  ) => Effect.Effect<Array<Option.Option<Entry>>>
  /** Queues the upload of a result that ran and is in the local store (it goes up in the background). */
  readonly offer: (process: Process, key: Digest, entry: Entry) => Effect.Effect<void>
  /**
   * Downloads the files of a tree (its directories are in the local store) that the local store lacks: a hit taken
   * under `validate` or `defer` left them remote until something needs them. False when the remote cannot give
   * them all (then the process that made them must run again).
   */
  readonly fetchTree: (root: Digest) => Effect.Effect<boolean>
  /** One line on whether the remote has this action, and all its blobs (what `kiln explain` says of it). */
  readonly describe: (key: Digest) => Effect.Effect<string>
}

/**
 * @since 0.1.0
 * @category tags
 */
export class RemoteTier extends Context.Tag("kiln/RemoteTier")<RemoteTier, Service>() {}
