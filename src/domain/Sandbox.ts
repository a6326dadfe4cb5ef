/**
 * Sandboxes: fresh directories that hold exactly a process's declared inputs, and the errors of making, filling
 * and removing them.
 *
 * @since 0.1.0
 */
import * as Schema from "effect/Schema"
import { StoreError } from "./StoreErrors.js"

/**
 * When a sandbox is kept after its process instead of removed.
 *
 * @since 0.1.0
 * @category models
 */
export const KeepSandboxes = Schema.Literal("never", "on-failure", "always")

/**
 * @since 0.1.0
 * @category models
 */
export type KeepSandboxes = typeof KeepSandboxes.Type

/**
 * A sandbox could not be created, filled or removed. `path` names it; `errno` is the system's code when there is one.
 * A store that failed to fill it (`Materialize`) is its `cause`, whose `reason` says why: a full disk stays
 * `NoSpace`, which a caller may act on (free space) where other failures are bugs or broken stores.
 *
 * @since 0.1.0
 * @category errors
 */
export class SandboxError extends Schema.TaggedError<SandboxError>("kiln/SandboxError")("SandboxError", {
  reason: Schema.Literal("Create", "Materialize", "Remove", "Sweep"),
  path: Schema.String,
  detail: Schema.String,
  errno: Schema.optional(Schema.String),
  cause: Schema.optional(StoreError)
}) {
  override get message(): string {
    // A detail that names a path inside the sandbox (a store error while materializing) names the sandbox already.
    return this.detail.startsWith(`${this.path}/`) ? this.detail : `${this.path}: ${this.detail}`
  }
}

/**
 * The sandboxer process could not be started or reached even after a respawn.
 *
 * @since 0.1.0
 * @category errors
 */
export class SandboxerUnavailable
  extends Schema.TaggedError<SandboxerUnavailable>("kiln/SandboxerUnavailable")("SandboxerUnavailable", {
    reason: Schema.String,
    log: Schema.optional(Schema.String)
  })
{
  override get message(): string {
    return this.log === undefined
      ? `sandboxer unavailable: ${this.reason}`
      : `sandboxer unavailable: ${this.reason} (log: ${this.log})`
  }
}

/**
 * The store could not fill the sandbox at `path`: its error is kept as the cause, its message as the detail.
 *
 * @since 0.1.0
 * @category constructors
 */
export const materializeFailed = (path: string, cause: StoreError): SandboxError =>
  new SandboxError({ reason: "Materialize", path, detail: cause.message, cause })
