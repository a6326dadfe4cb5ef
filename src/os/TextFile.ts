/**
 * Text files kiln reads and writes: its own large ones (the run memo and its journal, saved walks, the stat index),
 * whose UTF-8 decoding of a megabyte costs several times the copy that latin1 is (bytes that are all ASCII are the
 * same characters either way); and those someone else wrote or named, which must be small regular files. A workspace's
 * `package.json` or kiln.json, a file the store's owner may have replaced, a `--summary` path: a symlink is not
 * followed (a committed link would have kiln read or overwrite a file outside the workspace), a FIFO or device is
 * refused without waiting on it or reading it forever (opens do not block, `fstat` says what it is), and a file larger
 * than the caller's bound is refused before it is read. Plain code without Effect: the no-op check uses it before
 * anything is loaded.
 */
import { isAscii } from "node:buffer"
import * as fs from "node:fs"
import { errnoOf } from "./Errno.js"
import { writeAll } from "./WriteAll.js"

/** `bytes` as text: UTF-8, decoded as latin1 when every byte is ASCII (the same characters, faster). */
export const decode = (bytes: Buffer): string => isAscii(bytes) ? bytes.toString("latin1") : bytes.toString("utf8")

/** The whole of a file (by path or open descriptor) as text; throws as `fs.readFileSync` does. */
export const read = (file: string | number): string => decode(fs.readFileSync(file))

/**
 * `file` opened to read, if it is a regular file (not a link, a FIFO or a device); throws otherwise, as an open that
 * fails does.
 */
export const openRegular = (file: string): number => {
  const fd = fs.openSync(file, fs.constants.O_RDONLY | fs.constants.O_NOFOLLOW | fs.constants.O_NONBLOCK)
  if (!fs.fstatSync(fd).isFile()) {
    fs.closeSync(fd)
    throw new Error(`${file}: not a regular file`)
  }
  return fd
}

export type Read =
  | { readonly _tag: "Read"; readonly text: string }
  | { readonly _tag: "Absent" }
  | { readonly _tag: "Refused"; readonly detail: string }

/**
 * `file`'s text (UTF-8), if it is a regular file of at most `maxBytes` bytes; else whether it is absent, or why not.
 * A symlink is refused unless `follow` (a path the user gave, such as a system's CA bundle, which is often a link).
 */
export const readSmallFile = (file: string, maxBytes: number, follow = false): Read => {
  let fd: number
  try {
    const { O_NOFOLLOW, O_NONBLOCK, O_RDONLY } = fs.constants
    fd = fs.openSync(file, O_RDONLY | O_NONBLOCK | (follow ? 0 : O_NOFOLLOW))
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

/**
 * {@link readSmallFile} of a file kiln keeps for itself (a store's layout, cap, usage, generation): its text, or
 * undefined when it is absent; one that is not a regular file, or is larger than `maxBytes`, throws (an I/O error its
 * caller reports): a FIFO a member of a store's group put there must not hang every command, deaf to signals.
 */
export const readOwnFile = (file: string, maxBytes: number): string | undefined => {
  const read = readSmallFile(file, maxBytes)
  if (read._tag === "Absent") return undefined
  if (read._tag === "Refused") throw new Error(`${file} ${read.detail}`)
  return read.text
}

/**
 * `file` opened to write with `flags` (made if absent), as a regular file and never through a symlink: its descriptor,
 * or why not (one phrase, to follow the flag and the path; `onLink` says what else to do than write through a link).
 */
const openToWrite = (file: string, flags: number, onLink: string): number | string => {
  let fd: number
  try {
    const { O_CREAT, O_NOFOLLOW, O_NONBLOCK, O_WRONLY } = fs.constants
    fd = fs.openSync(file, O_WRONLY | O_CREAT | O_NOFOLLOW | O_NONBLOCK | flags, 0o666)
  } catch (e) {
    const code = errnoOf(e)
    return code === "ELOOP"
      ? `is a symlink, which kiln does not write through${onLink}`
      : code === "ENXIO"
      ? "is a FIFO nothing reads"
      : code === "EISDIR"
      ? "is a directory"
      : `cannot be written: ${code ?? String(e)}`
  }
  try {
    if (fs.fstatSync(fd).isFile()) return fd
  } catch {
    // Not one to write to either way.
  }
  fs.closeSync(fd)
  return "is not a regular file"
}

/**
 * `file` opened to append to (made if absent): its descriptor, or why not. A log a workspace committed as a link
 * would otherwise have kiln append to whatever it points at.
 */
export const openAppend = (file: string): number | string => openToWrite(file, fs.constants.O_APPEND, "")

/** Writes `text` to `file`; undefined once written, else why not (one phrase, to follow the flag and the path). */
export const writeReportFile = (file: string, text: string): string | undefined => {
  const fd = openToWrite(file, fs.constants.O_TRUNC, " (`-` is stdout)")
  if (typeof fd === "string") return fd
  try {
    writeAll(fd, Buffer.from(text))
    return undefined
  } catch (e) {
    return `cannot be written: ${errnoOf(e) ?? String(e)}`
  } finally {
    fs.closeSync(fd)
  }
}
