/**
 * The remote cache's errors: a call that failed (named by its endpoint, method and status code, never its headers),
 * and settings that cannot be used.
 *
 * @since 0.1.0
 */
import * as Schema from "effect/Schema"
import * as ProcessName from "../../domain/config/ProcessName.js"

/**
 * A remote call that failed. `code` is a gRPC status name (`UNAVAILABLE`, `NOT_FOUND`, …; an HTTP cache's answers
 * are mapped onto them), or `DIGEST_MISMATCH` when the bytes a server returned are not the ones asked for.
 *
 * @since 0.1.0
 * @category errors
 */
export class RemoteError extends Schema.TaggedError<RemoteError>("kiln/RemoteError")("RemoteError", {
  endpoint: Schema.String,
  method: Schema.String,
  code: Schema.String,
  detail: Schema.String,
  /** The server asked to be retried no sooner than this (`google.rpc.RetryInfo`). */
  retryDelayMs: Schema.optional(Schema.Number),
  /** The hash of a blob the server holds wrong bytes for (a digest mismatch): it is uploaded again. */
  corruptBlob: Schema.optional(Schema.String)
}) {
  override get message(): string {
    // The detail is the server's own words (a gRPC status message, an HTTP body): escaped, it reaches no terminal.
    const detail = this.detail ? `: ${ProcessName.printable(this.detail)}` : ""
    return `remote cache ${this.endpoint}: ${this.method} failed: ${this.code}${detail}`
  }
}

/**
 * Remote settings that cannot be used (a malformed URL, an unreadable certificate, a header whose `$VAR` is unset):
 * one line naming where the setting came from. Exit code 2.
 *
 * @since 0.1.0
 * @category errors
 */
export class InvalidRemoteSettings
  extends Schema.TaggedError<InvalidRemoteSettings>("kiln/InvalidRemoteSettings")("InvalidRemoteSettings", {
    source: Schema.String,
    detail: Schema.String
  })
{
  override get message(): string {
    return `${this.source}: ${this.detail}`
  }
}
