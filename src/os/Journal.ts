/**
 * A journal: a file of JSON lines, appended one at a time and replayed in order. Each line goes out in one
 * `write(2)` of an `O_APPEND` file, so lines that several processes append at once land whole, one after another;
 * and each is led by a newline, so that a line a crash or a full disk cut short stays a line of its own, which
 * replay skips (a prefix of a JSON object never parses), rather than swallowing the next. Portable POSIX; nothing
 * here is Linux-specific. Plain code without Effect, synchronous: the CLI's no-op check replays one before Effect is
 * loaded.
 */
import * as fs from "node:fs"

/**
 * Appends `value` as one line, unless the journal would grow past `maxBytes`: then it writes nothing and returns
 * false (the caller merges the journal into what it journals, and starts it afresh).
 */
export const append = (file: string, value: object, maxBytes: number = Infinity): boolean => {
  const text = JSON.stringify(value)
  if (maxBytes !== Infinity) {
    const size = fs.statSync(file, { throwIfNoEntry: false })?.size ?? 0
    if (size + text.length > maxBytes) return false
  }
  // Never through a link, nor into a FIFO or device: a journal is a file of the store's own.
  const fd = fs.openSync(
    file,
    fs.constants.O_WRONLY | fs.constants.O_APPEND | fs.constants.O_CREAT | fs.constants.O_NOFOLLOW |
      fs.constants.O_NONBLOCK,
    0o666
  )
  try {
    if (!fs.fstatSync(fd).isFile()) throw new Error(`${file}: not a regular file`)
    fs.writeSync(fd, `\n${text}\n`)
  } finally {
    fs.closeSync(fd)
  }
  return true
}

/**
 * Calls `apply` with each line of a journal's `text` that is a whole JSON object, in order. A line cut short, or
 * anything else that is not an object, is skipped.
 */
export const replay = (text: string, apply: (value: Record<string, unknown>) => void): void => {
  for (const raw of text.split("\n")) {
    if (raw === "") continue
    let value: unknown
    try {
      value = JSON.parse(raw)
    } catch {
      continue // Cut short.
    }
    if (typeof value === "object" && value !== null && !Array.isArray(value)) apply(value as Record<string, unknown>)
  }
}
