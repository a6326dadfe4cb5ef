/**
 * Reading a file someone else wrote (a workspace's `package.json`, its `pnpm-workspace.yaml`) that must be a small
 * regular file: a symlink is not followed (a committed link would have kiln read a file outside the workspace), a
 * FIFO or device is refused without waiting on it or reading it forever (the open does not block, `fstat` says what
 * it is), and a file larger than the caller's bound is refused before it is read. Plain code without Effect: the no-op
 * check reads workspace files before anything is loaded.
 */
import * as fs from "node:fs"
import { errnoOf } from "./Errno.js"

export type Read =
  | { readonly _tag: "Read"; readonly text: string }
  | { readonly _tag: "Absent" }
  | { readonly _tag: "Refused"; readonly detail: string }

/** `file`'s text (UTF-8), if it is a regular file of at most `maxBytes` bytes; else whether it is absent, or why not. */
export const readSmallFile = (file: string, maxBytes: number): Read => {
  let fd: number
  try {
    fd = fs.openSync(file, fs.constants.O_RDONLY | fs.constants.O_NOFOLLOW | fs.constants.O_NONBLOCK)
  } catch (e) {
    const code = errnoOf(e)
    if (code === "ENOENT") return { _tag: "Absent" }
    return {
      _tag: "Refused",
      detail: code === "ELOOP" ? "is a symlink, which kiln does not follow" : `cannot read: ${code ?? String(e)}`
    }
  }
  try {
    const stat = fs.fstatSync(fd)
    if (!stat.isFile()) return { _tag: "Refused", detail: "is not a regular file" }
    if (stat.size > maxBytes) return { _tag: "Refused", detail: `is larger than ${maxBytes} bytes (${stat.size})` }
    // One byte more than it says: a file that grew since the `fstat` is refused, not read without end, nor in part.
    const bytes = Buffer.alloc(stat.size + 1)
    let read = 0
    for (let n = -1; n !== 0 && read < bytes.length;) {
      n = fs.readSync(fd, bytes, read, bytes.length - read, null)
      read += n
    }
    if (read > stat.size) return { _tag: "Refused", detail: "changed while kiln read it" }
    return { _tag: "Read", text: bytes.toString("utf8", 0, read) }
  } catch (e) {
    return { _tag: "Refused", detail: `cannot read: ${errnoOf(e) ?? String(e)}` }
  } finally {
    fs.closeSync(fd)
  }
}
