/**
 * The one interface every runner decorator implements (Pants's `CommandRunner`): cached(bounded(local)).
 *
 * @internal
 */
import type * as Effect from "effect/Effect"
import type { MissingDigest } from "../../domain/Digest.js"
import type { Process, ProcessResult, SpawnError } from "../../domain/Process.js"
import type { SandboxError, SandboxerUnavailable } from "../../domain/Sandbox.js"
import type { StoreError } from "../../domain/StoreErrors.js"
import type { InvalidOutput } from "../../domain/TreeErrors.js"

/**
 * Whether a run may read the action cache and write it. Backtracking re-runs a producer with reads off and writes
 * on, so its fresh result replaces the stale entry.
 *
 * @internal
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

/** @internal */
export type RunError = MissingDigest | SandboxError | SandboxerUnavailable | SpawnError | StoreError | InvalidOutput

/** @internal */
export type Runner = (process: Process, policy: CachePolicy) => Effect.Effect<ProcessResult, RunError>
