/**
 * A bounded listing of a directory tree, for deciding whether what a directory holds is small enough to reuse.
 * Linux and macOS alike (plain `readdir`/`lstat`).
 */
import * as fs from "node:fs"

export type Kind = "file" | "dir" | "other"

/**
 * Every entry under `root`, by path relative to it (`a/b`), without following symlinks; undefined when there are
 * more than `max` (too big to be worth reusing), a directory cannot be read, or one is another file system's.
 */
export const scan = (root: string, max: number): Map<string, Kind> | undefined => {
  const found = new Map<string, Kind>()
  let dev: number
  try {
    const st = fs.lstatSync(root)
    if (!st.isDirectory()) return undefined
    dev = st.dev
  } catch {
    return undefined
  }
  const stack = [""]
  // Paths joined with "/": a name readdir gives needs no normalizing, and path.join's made most of a scan's garbage.
  while (stack.length > 0) {
    const rel = stack.pop()!
    const dir = rel === "" ? root : `${root}/${rel}`
    let entries: Array<fs.Dirent>
    try {
      entries = fs.readdirSync(dir, { withFileTypes: true })
    } catch {
      return undefined
    }
    for (const e of entries) {
      const r = rel === "" ? e.name : `${rel}/${e.name}`
      let kind: Kind = e.isDirectory() ? "dir" : e.isFile() ? "file" : "other"
      if (kind === "other" && !e.isSymbolicLink() && !e.isFIFO() && !e.isSocket()) {
        // A file system that does not fill in the type (DT_UNKNOWN).
        try {
          const st = fs.lstatSync(`${dir}/${e.name}`)
          kind = st.isDirectory() ? "dir" : st.isFile() ? "file" : "other"
        } catch {
          return undefined
        }
      }
      found.set(r, kind)
      if (found.size > max) return undefined
      if (kind === "dir") {
        // A mount point (a bind mount a process made as root): what is under it is not the sandbox's.
        try {
          if (fs.lstatSync(`${dir}/${e.name}`).dev !== dev) return undefined
        } catch {
          return undefined
        }
        stack.push(r)
      }
    }
  }
  return found
}
