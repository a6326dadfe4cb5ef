/**
 * The one interface every runner decorator implements (Pants's `CommandRunner`): cached(bounded(local)).
 *
 * @internal
 */
import type * as Effect from "effect/Effect"
import type { MissingDigest } from "../../../domain/Digest.js"
import type { Process, ProcessResult, SpawnError } from "../../../domain/Process.js"
import type { SandboxError, SandboxerUnavailable } from "../../../domain/Sandbox.js"
import type { StoreError } from "../../../domain/StoreErrors.js"
import type { InvalidOutput } from "../../../domain/TreeErrors.js"
import type { CachePolicy, WorkspaceTree } from "../ProcessRunner.js"

/** The cache policy of one run, and what the caller's workspace offers its sandbox. @internal */
export interface RunPolicy extends CachePolicy {
  readonly workspaceTrees?: ReadonlyArray<WorkspaceTree>
  /** Told when the process starts: it has a slot and is about to be spawned (or sent to the executor). */
  readonly onStart?: Effect.Effect<void>
  /** Told when it ends: its slot is free again (its outputs are yet to be stored). */
  readonly onEnd?: Effect.Effect<void>
  /** Told what a local process writes, as it writes it (see `follow.ts`); a remote one's comes with its result. */
  readonly onOutput?: (stream: "stdout" | "stderr", bytes: Uint8Array) => Effect.Effect<void>
  /** A consumer waits for this result alone: it is handed over before the sandbox is closed (see `local.ts`). */
  readonly awaited?: boolean
}

/** @internal */
export type RunError = MissingDigest | SandboxError | SandboxerUnavailable | SpawnError | StoreError | InvalidOutput

/** @internal */
export type Runner = (proc: Process, policy: RunPolicy) => Effect.Effect<ProcessResult, RunError>
