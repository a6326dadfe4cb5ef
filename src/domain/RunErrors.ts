/**
 * Why a run cannot go on with a process whose bytes are gone: nothing of this run produced them, or re-running
 * their producer as often as allowed did not bring them back.
 *
 * @since 0.1.0
 */
import * as Schema from "effect/Schema"

/**
 * A process kept missing bytes after re-running their producer as often as allowed (`maxBacktracks`).
 *
 * @since 0.1.0
 * @category errors
 */
export class BacktrackLimit extends Schema.TaggedError<BacktrackLimit>("kiln/BacktrackLimit")("BacktrackLimit", {
  attempts: Schema.Number,
  digest: Schema.String
}) {
  override get message(): string {
    return `gave up after ${this.attempts} backtracks (missing ${this.digest})`
  }
}

/**
 * Bytes a process needed are gone and no process of this run produced them: nothing to re-run.
 *
 * @since 0.1.0
 * @category errors
 */
export class NoProducer extends Schema.TaggedError<NoProducer>("kiln/NoProducer")("NoProducer", {
  digest: Schema.String,
  consumer: Schema.String,
  /** What the missing blob was read as (`file`, `directory`). */
  kind: Schema.optional(Schema.String),
  /** Whether a second look, after the failure, finds it in the store after all (a read that went wrong). */
  presentNow: Schema.optional(Schema.Boolean),
  /** When this process skipped writing it because the store already held it (ISO time), if it did. */
  skippedWriteAt: Schema.optional(Schema.String),
  /** The workspace file it was hashed from and left in (see `Store.hashedAt`), which has changed since. */
  hashedAt: Schema.optional(Schema.String)
}) {
  override get message(): string {
    if (this.hashedAt !== undefined) {
      return `${this.hashedAt}, an input of \`${this.consumer}\`, changed after this run hashed it (${this.digest}): ` +
        `run again once it stops changing`
    }
    const what = this.kind === undefined || this.kind === "blob" ? "blob" : this.kind
    const now = this.presentNow === undefined
      ? ""
      : this.presentNow
      ? " (a second look finds it in the store: the read that missed it went wrong)"
      : " (a second look does not find it either)"
    const skipped = this.skippedWriteAt === undefined
      ? ""
      : `; this process did not write it at ${this.skippedWriteAt} because the store held it then`
    return `missing ${what} ${this.digest} needed by \`${this.consumer}\`, and no process of this run produced it${now}${skipped}`
  }
}
