/**
 * Records kiln keeps per directory (a workspace's stat index and run memo, a directory's saved walk), files of
 * megabytes that name the directory they are of: which directory that is, read from the file's first or last few
 * kilobytes without reading (or parsing) the rest, and whether it is gone, so that its records can go too. The
 * store's own and the engine's (in its folder of the store, `Layout.ownedDirectory`) are read alike.
 *
 * @internal
 */
import * as fs from "node:fs"
import * as path from "node:path"
import { errnoOf } from "../../os/Errno.js"

/** How much of a file's start or end is read. */
const EDGE_BYTES = 4096

/**
 * The value of the string field `name` among the first bytes of the JSON object in `file` (`at: "head"`), or among
 * its last, as its final field (`"tail"`); undefined when it is not there or the file cannot be read.
 */
const stringField = (file: string, name: string, at: "head" | "tail"): string | undefined => {
  let fd: number | undefined
  try {
    // A record is a regular file the store wrote: a symlink is not followed out of the store, and a FIFO or device
    // put there is neither waited on nor read.
    fd = fs.openSync(file, fs.constants.O_RDONLY | fs.constants.O_NOFOLLOW | fs.constants.O_NONBLOCK)
    const st = fs.fstatSync(fd)
    if (!st.isFile()) return undefined
    const size = st.size
    const length = Math.min(EDGE_BYTES, size)
    const edge = Buffer.alloc(length)
    const n = fs.readSync(fd, edge, 0, length, at === "head" ? 0 : size - length)
    const text = edge.subarray(0, n).toString("utf8")
    const value = `"${name}":("(?:[^"\\\\]|\\\\.)*")`
    const m = new RegExp(at === "head" ? `^\\{[^]*?${value}` : `[,{]${value}\\}\\s*$`).exec(text)
    if (m === null) return undefined
    const parsed: unknown = JSON.parse(m[1]!)
    return typeof parsed === "string" ? parsed : undefined
  } catch {
    return undefined
  } finally {
    if (fd !== undefined) fs.closeSync(fd)
  }
}

/** The absolute path the record `file` names in its field `name` (among its first fields, or as its last). */
export const directoryNamedIn = (file: string, name: string, at: "head" | "tail"): string | undefined => {
  const value = stringField(file, name, at)
  return value !== undefined && path.isAbsolute(value) ? value : undefined
}

/** Whether `abs` is gone: nothing there, or a path through a file. Anything else (no permission) keeps its records. */
export const isGone = (abs: string): boolean => {
  try {
    fs.lstatSync(abs)
    return false
  } catch (e) {
    const code = errnoOf(e)
    return code === "ENOENT" || code === "ENOTDIR"
  }
}

/** Removes `file` (a symlink itself, not what it names): its size, or undefined when it was gone already. */
export const remove = (file: string): number | undefined => {
  try {
    const size = fs.lstatSync(file).size
    fs.unlinkSync(file)
    return size
  } catch (e) {
    if (errnoOf(e) === "ENOENT") return undefined
    throw e
  }
}
