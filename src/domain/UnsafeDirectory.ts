/**
 * A directory kiln would keep its state in that another user owns or can write (see `os/PrivateDir.ts`): refused
 * before anything is read from it or made in it, as ssh refuses a `~/.ssh` others can write. The CLI exits 2.
 *
 * @since 0.1.0
 */
import * as Schema from "effect/Schema"
import * as path from "node:path"

/** What makes a directory unsafe: the directory, its owner and mode, and why. */
export interface Finding {
  readonly path: string
  readonly owner: number
  readonly mode: number
  readonly problem: string
}

/** `0777`, `2770`: a mode as `chmod` takes it. */
export const octal = (mode: number): string => (mode & 0o7777).toString(8).padStart(4, "0")

/** One line naming the root, the directory at fault with its owner and mode, and why. */
export const describe = (role: string, root: string, f: Finding): string => {
  const what = `(owner uid ${f.owner}, mode ${octal(f.mode)})`
  return path.resolve(root) === f.path
    ? `refusing the ${role} ${f.path} ${what}: it ${f.problem}`
    : `refusing the ${role} ${path.resolve(root)}: ${f.path} ${what} ${f.problem}`
}

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
    return describe(this.role, this.root, this)
  }
}
