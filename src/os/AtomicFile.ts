/**
 * Replacing a file all at once: what is written goes to a temp file beside it, which is renamed over it, so that a
 * reader (another kiln process, a tool in the workspace) sees the old file or the new one, never part of one, and a
 * crash leaves at most a stray temp file (removed on the spot when the write fails; a full disk leaves a partial
 * one). Portable POSIX (`rename(2)` within a directory is atomic); nothing here is Linux-specific. Plain code without
 * Effect, synchronous: the CLI's no-op check imports it before Effect is loaded.
 */
import * as fs from "node:fs"
import { randomHex } from "./LazyCrypto.js"
import { writeAll } from "./WriteAll.js"

/** A temp path beside `file` (`<file>.<pid>.<random>.tmp`): unique to this process and this write. */
export const tempPathOf = (file: string): string => `${file}.${process.pid}.${randomHex(4)}.tmp`

/**
 * Makes `file` what `make` puts at the temp path it is given (`tmp`, {@link tempPathOf} unless said): renamed over
 * it, or removed if anything throws. Returns false, changing nothing, when `make` returns false.
 */
export const replace = (
  file: string,
  make: (tmp: string) => boolean | void,
  tmp: string = tempPathOf(file)
): boolean => {
  try {
    if (make(tmp) === false) return false
    fs.renameSync(tmp, file)
    return true
  } catch (e) {
    try {
      fs.rmSync(tmp, { force: true })
    } catch {
      // The write's own error is the one to report; a temp file left behind is named like one, for cleanups.
    }
    throw e
  }
}

/** How {@link write} writes. */
export interface Options {
  /** The new file's mode, set exactly (umask aside); else 0o666 less the umask, as `writeFileSync` does. */
  readonly mode?: number
  /** fsync the data before the rename: for a file that must be whole on disk once it has its name. */
  readonly fsync?: boolean
  /** Called with the written temp file just before the rename (to set its times, or remove what it supersedes). */
  readonly beforeRename?: (tmp: string) => void
}

/** Replaces `file` with `data` (see {@link replace}). */
export const write = (file: string, data: string | Uint8Array, options: Options = {}): void => {
  replace(file, (tmp) => {
    const fd = fs.openSync(tmp, "wx", 0o666)
    try {
      const bytes = typeof data === "string" ? Buffer.from(data) : data
      writeAll(fd, bytes)
      if (options.mode !== undefined) fs.fchmodSync(fd, options.mode)
      if (options.fsync === true) fs.fsyncSync(fd)
    } finally {
      fs.closeSync(fd)
    }
    options.beforeRename?.(tmp)
  })
}
