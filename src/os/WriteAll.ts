/**
 * Writing a whole buffer to a file descriptor: `write(2)` may write less than asked (a signal, a pipe, a nearly full
 * disk), so every writer loops until all of it is out. Portable POSIX; nothing here is Linux-specific. Plain code
 * without Effect, synchronous.
 */
import * as fs from "node:fs"

/**
 * Writes the first `length` bytes of `bytes` to `fd`: at `position` onwards when given (a positioned write, leaving
 * the file offset alone), else at the file's current offset.
 */
export const writeAll = (
  fd: number,
  bytes: Uint8Array,
  length: number = bytes.length,
  position: number | null = null
): void => {
  let off = 0
  while (off < length) off += fs.writeSync(fd, bytes, off, length - off, position === null ? null : position + off)
}
