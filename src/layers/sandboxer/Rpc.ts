/**
 * The sandboxer's protocol, shared by both ends. Only control data crosses the socket (digests, paths, typed
 * errors): the sandboxer opens the same store and reads the bytes itself.
 */
import * as Rpc from "@effect/rpc/Rpc"
import * as RpcGroup from "@effect/rpc/RpcGroup"
import * as Schema from "effect/Schema"
import { Digest } from "../../domain/Digest.js"
import { StoreError } from "../../domain/StoreErrors.js"

/**
 * A blob of the tree is absent from the store. The client turns it into the typed `MissingDigest` that backtracking
 * needs, and never restarts the sandboxer for it.
 */
export class NotFound extends Schema.TaggedError<NotFound>("kiln/SandboxerRpc/NotFound")("NotFound", {
  digest: Digest
}) {}

/**
 * Anything else the sandboxer could not do (I/O, a store failure, shutting down), with its one-line reason; a store
 * failure also whole, as its `cause`, so that the engine keeps its reason (a full disk is `NoSpace`).
 */
export class FailedPrecondition
  extends Schema.TaggedError<FailedPrecondition>("kiln/SandboxerRpc/FailedPrecondition")("FailedPrecondition", {
    reason: Schema.String,
    cause: Schema.optional(StoreError)
  })
{
  override get message(): string {
    return this.reason
  }
}

export class SandboxerRpcs extends RpcGroup.make(
  /** Writes the tree `digest` into `destination` (mutable paths get writable copies). */
  Rpc.make("Materialize", {
    payload: {
      digest: Digest,
      destination: Schema.String,
      mutablePaths: Schema.Array(Schema.String),
      /**
       * Whether to create `destination` (default true). A sandbox exists already; if it is gone, its engine removed
       * it, and writing into it again would leave a tree nobody removes.
       */
      createDestination: Schema.optional(Schema.Boolean)
    },
    error: Schema.Union(NotFound, FailedPrecondition)
  }),
  /**
   * Watches one more sandbox root (beyond those given on the command line): if the engine dies, the sandboxes it
   * owns there are removed and the process groups working in them SIGKILLed.
   */
  Rpc.make("Watch", { payload: { root: Schema.String } }),
  Rpc.make("Ping", { success: Schema.Struct({ pid: Schema.Int }) })
) {}
