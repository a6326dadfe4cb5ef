/**
 * The sandboxer's protocol, shared by both ends. Only control data crosses the socket (digests, paths, process
 * groups, typed errors): the sandboxer opens the same store and reads the bytes itself.
 *
 * @since 0.1.0
 */
import * as Rpc from "@effect/rpc/Rpc"
import * as RpcGroup from "@effect/rpc/RpcGroup"
import { Schema } from "effect"
import { Digest } from "./Digest.js"

/**
 * A blob of the tree is absent from the store. The client turns it into the typed `MissingDigest` that backtracking
 * needs, and never restarts the sandboxer for it.
 *
 * @since 0.1.0
 * @category errors
 */
export class NotFound extends Schema.TaggedError<NotFound>("kiln/SandboxerRpc/NotFound")("NotFound", {
  digest: Digest
}) {}

/**
 * Anything else the sandboxer could not do (I/O, a store failure, shutting down), with its one-line reason.
 *
 * @since 0.1.0
 * @category errors
 */
export class FailedPrecondition
  extends Schema.TaggedError<FailedPrecondition>("kiln/SandboxerRpc/FailedPrecondition")("FailedPrecondition", {
    reason: Schema.String
  })
{
  override get message(): string {
    return this.reason
  }
}

/**
 * @since 0.1.0
 * @category rpcs
 */
export class SandboxerRpcs extends RpcGroup.make(
  /** Writes the tree `digest` into `destination` (mutable paths get writable copies). */
  Rpc.make("Materialize", {
    payload: {
      digest: Digest,
      destination: Schema.String,
      mutablePaths: Schema.Array(Schema.String),
      /** Adopt the destination first (as `Adopt { sandbox }` would), saving a round trip per process. */
      adopt: Schema.optional(Schema.Boolean)
    },
    error: Schema.Union(NotFound, FailedPrecondition)
  }),
  /**
   * Hands the sandboxer a process group and/or a sandbox to destroy if the engine dies: it SIGKILLs the group and
   * removes the sandbox before it exits.
   */
  Rpc.make("Adopt", {
    payload: { pgid: Schema.optional(Schema.Int), sandbox: Schema.optional(Schema.String) }
  }),
  /** The engine cleaned these up itself: forget them. */
  Rpc.make("Release", {
    payload: { pgid: Schema.optional(Schema.Int), sandbox: Schema.optional(Schema.String) }
  }),
  Rpc.make("Ping", { success: Schema.Struct({ pid: Schema.Int }) })
) {}
