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
import type { CachePolicy } from "../ProcessRunner.js"

export type { CachePolicy }

/** @internal */
export type RunError = MissingDigest | SandboxError | SandboxerUnavailable | SpawnError | StoreError | InvalidOutput

/** @internal */
export type Runner = (process: Process, policy: CachePolicy) => Effect.Effect<ProcessResult, RunError>
