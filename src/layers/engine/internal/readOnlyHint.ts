/**
 * A hint for a process that failed writing under a read-only input tree (EROFS): the sandbox itself is writable, so
 * a path in it that is read-only is one of kiln's read-only mounts (a shared tree, a linked input), and the fix is a
 * `writableInputs` entry. Read from the tail of its stderr, as tools print it: Node's
 * `EROFS: read-only file system, mkdir '/mnt/node_modules/.vite-temp'`, coreutils' `mkdir: cannot create directory
 * 'x': Read-only file system`, a shell's `cannot create x: Read-only file system`.
 *
 * @internal
 */
import * as path from "node:path"
import type { Process } from "../../../domain/Process.js"

const READ_ONLY = /EROFS|read-only file system/i
// The typographic quotes as escapes: a character above U+00FF anywhere in the bundle makes V8 hold its whole source
// (which it keeps for lazy compilation) as a string of two bytes a character (scripts/bundle.mjs refuses one).
const QUOTED = /['"\u2018`]([^'"\u2019`]+)['"\u2019`]/
const SHELL = /cannot create ([^:]+): /

/** The path a line names, relative to the input root, if it lies in the sandbox. */
const inSandbox = (named: string, proc: Process): string | undefined => {
  let rel: string
  if (path.posix.isAbsolute(named)) {
    if (proc.execRoot === undefined || !named.startsWith(`${proc.execRoot}/`)) return undefined
    rel = path.posix.normalize(named.slice(proc.execRoot.length + 1))
  } else {
    rel = path.posix.normalize(path.posix.join(proc.workingDirectory, named))
  }
  return rel === "." || rel.startsWith("../") || rel === ".." ? undefined : rel.replace(/\/$/, "")
}

/**
 * The hint's line for a failed process's stderr tail, or undefined when the tail names no write under a read-only
 * path of its sandbox. A directory being made is suggested itself, a file its directory.
 *
 * @internal
 */
export const readOnlyHint = (tail: string, proc: Process): string | undefined => {
  for (const line of tail.split("\n").reverse()) {
    if (!READ_ONLY.test(line)) continue
    const named = QUOTED.exec(line)?.[1] ?? SHELL.exec(line)?.[1]
    const rel = named === undefined ? undefined : inSandbox(named.trim(), proc)
    if (rel === undefined) continue
    const making = /mkdir|create directory/i.test(line)
    const writable = making ? rel : path.posix.dirname(rel)
    if (writable === ".") continue
    return `kiln: ${rel} is in an input tree kiln mounts read-only; a process that writes there declares it: ` +
      `"writableInputs": ["${writable}"] (its path from the workspace root)`
  }
  return undefined
}
