/**
 * Removes a tree that tools may have left read-only. `go mod download` extracts its module cache 0555/0444, and a
 * plain recursive delete then fails on every entry of every read-only directory; Pants ignored that error and leaked
 * whole sandboxes. Deleting an entry needs write permission on its directory, so every directory is made
 * owner-writable (and searchable) before its entries go. Portable, but for the mount check (see `Mounts.ts`).
 *
 * @internal
 */
import * as fs from "node:fs"
import * as path from "node:path"
import { errnoOf } from "./Errno.js"

const makeWritable = (dir: string, mode: number) => {
  if ((mode & 0o700) !== 0o700) fs.chmodSync(dir, (mode & 0o7777) | 0o700)
}

/** An entry another remover deleted first is gone, which is what was wanted. */
const gone = (e: unknown) => errnoOf(e) === "ENOENT"

/**
 * A directory that gained an entry while it was emptied (a dying engine's sandboxer finishing a write while
 * `kiln clean` or the next engine removes the sandbox) is emptied again, a bounded number of times.
 */
const ATTEMPTS = 5

/** Called after each directory was listed: tests use it to race a writer or another remover deterministically. */
type AfterList = (dir: string, names: ReadonlyArray<string>) => void

/**
 * A directory whose path is longer than this is moved up to the top of the tree being removed before it is emptied: a
 * process may nest directories deeper than any path the system takes (`PATH_MAX`, 4,096 bytes), and every call on
 * them by their path then fails (`ENAMETOOLONG`); a sandbox holding one could never be removed.
 */
const DEEPEST_PATH = 2048

/** Names of the directories moved up, unique within this process. */
let movedUp = 0

/**
 * With `careful`, each directory is made writable before it is emptied (a stat each); without, it is not. `top` is
 * the tree's root, where a directory too deep is moved to (see {@link DEEPEST_PATH}).
 */
const removeDir = (dir: string, careful: boolean, afterList?: AfterList, top = dir): void => {
  for (let attempt = 1;; attempt++) {
    try {
      if (careful) makeWritable(dir, fs.lstatSync(dir).mode)
      const entries = fs.readdirSync(dir, { withFileTypes: true })
      afterList?.(dir, entries.map((e) => e.name))
      for (const entry of entries) {
        let child = path.join(dir, entry.name)
        try {
          if (entry.isDirectory()) {
            if (child.length > DEEPEST_PATH) {
              const shallow = path.join(top, `.kiln-deep-${process.pid}-${++movedUp}`)
              fs.renameSync(child, shallow)
              child = shallow
            }
            removeDir(child, careful, afterList, top)
          } else {
            fs.unlinkSync(child)
          }
        } catch (e) {
          if (!gone(e)) throw e
        }
      }
      fs.rmdirSync(dir)
      return
    } catch (e) {
      if (gone(e)) return
      if (errnoOf(e) !== "ENOTEMPTY" || attempt === ATTEMPTS) throw e
    }
  }
}

/** What a read-only directory (or parent) makes a removal fail with. */
const denied = (e: unknown) => errnoOf(e) === "EACCES" || errnoOf(e) === "EPERM"

/**
 * Removes `target` (file, symlink or directory tree). Throws the first error that a writable fix-up cannot cure,
 * so the caller can report it with its path; an absent target is not an error.
 *
 * @internal
 */
export const removeTree = (target: string, afterList?: AfterList): void => {
  let st: fs.Stats
  try {
    st = fs.lstatSync(target)
  } catch (e) {
    if (errnoOf(e) === "ENOENT") return
    throw e
  }
  if (!st.isDirectory()) {
    try {
      fs.unlinkSync(target)
    } catch (e) {
      if (!denied(e)) throw e
      makeWritable(path.dirname(target), fs.lstatSync(path.dirname(target)).mode)
      fs.unlinkSync(target)
    }
    return
  }
  // Most trees are as kiln made them, writable: removed without a stat per directory (a sandbox's removal is on
  // every process's path). A tree a tool left read-only fails with EACCES, and is removed again, carefully.
  try {
    removeDir(target, false, afterList)
    return
  } catch (e) {
    if (!denied(e)) throw e
  }
  try {
    const parent = path.dirname(target)
    makeWritable(parent, fs.lstatSync(parent).mode)
  } catch {
    // The parent is not ours to change (/tmp's sticky bit, say): its write permission is not the obstacle then.
  }
  removeDir(target, true, afterList)
}
