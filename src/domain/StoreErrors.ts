/**
 * Failures of the Store that a caller can act on. `MissingDigest` lives in `Digest.ts`: it is the one the engine
 * matches on to backtrack.
 *
 * @since 0.1.0
 */
import * as Schema from "effect/Schema"

/**
 * The store could not do what was asked: I/O failed, LMDB failed, a reader table stayed full, bytes did not match
 * their digest. `reason` says which; `path` or `digest` names the thing.
 *
 * @since 0.1.0
 * @category errors
 */
export class StoreError extends Schema.TaggedError<StoreError>("kiln/StoreError")("StoreError", {
  reason: Schema.Literal("Io", "Lmdb", "ReadersFull", "DigestMismatch", "Corrupt", "Unsupported", "NoSpace"),
  detail: Schema.String,
  path: Schema.optional(Schema.String),
  digest: Schema.optional(Schema.String)
}) {
  override get message(): string {
    const what = this.path !== undefined ? `${this.path}: ` : this.digest !== undefined ? `${this.digest}: ` : ""
    return `${what}${this.detail}`
  }
}

/**
 * The store was opened again with settings that differ from the ones it already has (in this process, or on disk):
 * a second LMDB environment on the same files would break LMDB's locking, and another shard count would look for
 * every digest in the wrong shard.
 *
 * @since 0.1.0
 * @category errors
 */
export class StoreConfigConflict extends Schema.TaggedError<StoreConfigConflict>("kiln/StoreConfigConflict")(
  "StoreConfigConflict",
  {
    path: Schema.String,
    setting: Schema.String,
    existing: Schema.String,
    requested: Schema.String
  }
) {
  override get message(): string {
    return `${this.path}: the store is already open with ${this.setting}=${this.existing}; refusing to open it again with ${this.setting}=${this.requested}`
  }
}
