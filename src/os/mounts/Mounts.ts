/**
 * File systems mounted inside a tree. A process running as root can bind-mount anything into its sandbox and exit
 * without unmounting it; removing the sandbox as `rm -rf` does would then delete what is mounted there (a bind mount
 * shares the device number of what it is mounted on, so only the mount table tells). Linux-specific: the table is
 * `/proc/self/mountinfo`; a port reads its own (`getmntinfo` on macOS).
 *
 * @internal
 */
import * as fs from "node:fs"
import * as NativeAddon from "../native/Addon.js"

/** A mount point's path as /proc/self/mountinfo writes it, with space, tab, newline and backslash escaped. */
const unescape = (p: string) => p.replace(/\\([0-7]{3})/g, (_, o: string) => String.fromCharCode(parseInt(o, 8)))

/** The mount point `p` as /proc/self/mountinfo writes it. */
const escape = (p: string) => p.replace(/[ \t\n\\]/g, (c) => `\\${c.charCodeAt(0).toString(8).padStart(3, "0")}`)

let table: { fd: number; buffer: Buffer; text?: string } | undefined

/** Whether the table behind `fd` changed since it was last read, through kiln's addon; undefined without it. */
const changedSince = (fd: number): boolean | undefined => {
  const changed = NativeAddon.exports()?.mountsChanged
  if (typeof changed !== "function") return undefined
  try {
    return changed(fd) !== false
  } catch {
    return undefined
  }
}

/**
 * The mount table as text. The file stays open: reading a seq_file again from offset 0 makes it afresh (a mount made
 * since shows), without the open, fstat and close of a read of the whole file each time (a sandbox is checked every
 * time it is pooled). With kiln's addon it is read again only once the kernel says it changed (asked before the
 * read, so a change during the read is seen next time): the kernel's making of the text was most of that check
 * (docs/bench-log.md).
 */
const readTable = (): string | undefined => {
  try {
    table ??= { fd: fs.openSync("/proc/self/mountinfo", "r"), buffer: Buffer.allocUnsafe(64 * 1024) }
    if (table.text !== undefined && changedSince(table.fd) === false) return table.text
    let length = 0
    for (;;) {
      if (length === table.buffer.length) {
        const bigger = Buffer.allocUnsafe(table.buffer.length * 2)
        table.buffer.copy(bigger)
        table.buffer = bigger
      }
      const n = fs.readSync(table.fd, table.buffer, length, table.buffer.length - length, length)
      if (n === 0) return table.text = table.buffer.toString("utf8", 0, length)
      length += n
    }
  } catch {
    return undefined
  }
}

/**
 * The first mount point at or under `dir`, if any. Where /proc is absent, none.
 *
 * @internal
 */
export const mountUnder = (dir: string): string | undefined => {
  const text = readTable()
  // Most tables do not name the directory at all: then nothing is mounted at or under it.
  if (text === undefined || !text.includes(escape(dir))) return undefined
  for (const line of text.split("\n")) {
    const at = line.split(" ")[4]
    if (at === undefined) continue
    const mounted = unescape(at)
    if (mounted === dir || mounted.startsWith(`${dir}/`)) return mounted
  }
  return undefined
}

/**
 * Throws, naming the mount point, when a file system is mounted at or under `dir`: what is mounted there is not the
 * tree's to delete.
 *
 * @internal
 */
export const refuseMounted = (dir: string): void => {
  const at = mountUnder(dir)
  if (at !== undefined) throw new Error(`a file system is mounted at ${at}: left in place, with what is under it`)
}
