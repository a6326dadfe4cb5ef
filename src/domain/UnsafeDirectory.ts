/**
 * A directory kiln would keep its state in that another user owns or can write (see `os/PrivateDir.ts`): refused
 * before anything is read from it or made in it, as ssh refuses a `~/.ssh` others can write. The CLI exits 2.
 *
 * @since 0.1.0
 */
import * as Schema from "effect/Schema"
import { describe } from "./DirectoryFinding.js"

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
