/**
 * A directory kiln would keep its state in that another user owns or can write (see `os/PrivateDir.ts`): refused
 * before anything is read from it or made in it, as ssh refuses a `~/.ssh` others can write. The CLI exits 2.
 *
 * @since 0.1.0
 */
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import * as PrivateDir from "../os/PrivateDir.js"

/**
 * `role` says which root (`store root`, `sandbox root`, `named caches directory`); `path` is the directory at fault
 * (the root, or a directory above it), with its `owner` and `mode`.
 *
 * @since 0.1.0
 * @category errors
 */
export class UnsafeDirectory extends Schema.TaggedError<UnsafeDirectory>("kiln/UnsafeDirectory")("UnsafeDirectory", {
  role: Schema.String,
  root: Schema.String,
  path: Schema.String,
  owner: Schema.Number,
  mode: Schema.Number,
  problem: Schema.String
}) {
  override get message(): string {
    return PrivateDir.describe(this.role, this.root, this)
  }
}

/**
 * Checks `root` as {@link PrivateDir.inspect} does, making it (0700) with `create` when it is missing.
 * A failure to look or to make it is left to whoever uses the root next, which reports it in its own terms.
 *
 * @since 0.1.0
 * @category constructors
 */
export const verify = (
  role: string,
  root: string,
  sharing: PrivateDir.Sharing,
  options: { readonly create?: boolean } = {}
): Effect.Effect<void, UnsafeDirectory> =>
  Effect.suspend(() => {
    let found: PrivateDir.Finding | undefined
    try {
      found = options.create === true ? PrivateDir.ensure(root, sharing) : PrivateDir.inspect(root, sharing)
    } catch {
      return Effect.void
    }
    return found === undefined ? Effect.void : Effect.fail(new UnsafeDirectory({ role, root, ...found }))
  })
