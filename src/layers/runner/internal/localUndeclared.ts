/**
 * What a process that ran here wrote in its sandbox beyond its declared outputs: the files there, once its group is
 * gone, that are neither among its inputs nor under an output (#38 §5). A build step that writes a file nobody
 * declared loses it (it is neither cached nor written back), which is worth a line.
 *
 * The walk looks only where the process could write: a shared tree is mounted read-only in the process's namespace
 * (and is an empty directory from here), a named cache and a writable input are the process's to write, and its
 * private /tmp is not in the sandbox at all; symlinks are never followed. It reads directories only (a stat of each
 * directory, none of any file), and stops once it has met `BOUND` entries that are not inputs, so that a process
 * that wrote a million files costs no more than one that wrote a few thousand: the count is then a lower bound.
 *
 * @internal
 */
import * as Effect from "effect/Effect"
import * as fs from "node:fs"
import { outputSegments, type Process, type UndeclaredWrites } from "../../../domain/Process.js"
import { describeErrno } from "../../../os/Errno.js"
import type * as Store from "../../store/Store.js"
import type * as SharedInputs from "./sharedInputs.js"

/** Entries met that are not inputs (new files and directories) before the walk stops. */
export const BOUND = 10_000

/** How many of the paths found are kept: the first found, then sorted. */
export const SAMPLE = 10

/**
 * The paths, relative to the input root, under which nothing is looked at; undefined when that is the whole root (an
 * output directory that is the input root itself).
 */
const skippedOf = (proc: Process, shared: ReadonlyArray<{ readonly path: string }>): Set<string> | undefined => {
  const rootRelative = (rel: string) => outputSegments(rel)?.join("/")
  const wd = outputSegments(proc.workingDirectory) ?? []
  const skipped = new Set<string>()
  for (const s of shared) skipped.add(s.path)
  for (const rel of [...proc.writablePaths, ...Object.values(proc.namedCaches)]) {
    const r = rootRelative(rel)
    if (r !== undefined && r !== "") skipped.add(r)
  }
  for (const out of [...proc.outputFiles, ...proc.outputDirectories]) {
    const s = outputSegments(out)
    if (s === undefined) continue
    if (wd.length + s.length === 0) return undefined
    skipped.add([...wd, ...s].join("/"))
  }
  return skipped
}

/**
 * A directory of at most this many bytes is read whole: one call, cheaper than reading it in batches (a sandbox's
 * directories are small). Its size grows with its entries (on ext4, tmpfs, btrfs, xfs), so a larger one, which a
 * process may have filled with a million files, is read in batches and no further than the bound.
 */
const SMALL_DIR_BYTES = 256 * 1024

/**
 * The entries of the directory `rel` under `root`, each with whether it is a directory (a symlink is not), in name
 * order, less those `skipped`; read until more than `budget` of them are not `inputs` (`met` counts those).
 */
const listDir = (
  root: string,
  rel: string,
  inputs: ReadonlySet<string>,
  skipped: ReadonlySet<string>,
  budget: number,
  unreadable: Array<string>
) => {
  const entries: Array<readonly [string, boolean]> = []
  let met = 0
  /** Takes one entry; false once the budget is spent. */
  const take = (d: fs.Dirent): boolean => {
    const at = rel === "" ? d.name : `${rel}/${d.name}`
    if (skipped.has(at)) return true
    if (!inputs.has(at)) met++
    entries.push([at, d.isDirectory()])
    return met <= budget
  }
  // `rel` is made of names readdir gave, joined with "/": nothing to normalize.
  const abs = rel === "" ? root : `${root}/${rel}`
  let dir: fs.Dir | undefined
  try {
    if (fs.lstatSync(abs).size <= SMALL_DIR_BYTES) {
      for (const d of fs.readdirSync(abs, { withFileTypes: true })) if (!take(d)) break
    } else {
      dir = fs.opendirSync(abs, { bufferSize: 128 })
      for (let d = dir.readSync(); d !== null && take(d); d = dir.readSync());
    }
  } catch (e) {
    unreadable.push(`${rel === "" ? "." : rel}: ${describeErrno(e)}`)
  } finally {
    dir?.closeSync()
  }
  entries.sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0))
  return { entries, met }
}

/**
 * The files under `root` (the sandbox, holding the input tree `entries` less `layout`'s shared trees) that `proc`
 * wrote outside its declared outputs; undefined when there are none. A directory that cannot be read (the process
 * took its permissions away) is passed over, said at debug level: this is a report on the run, not a check of it.
 *
 * @internal
 */
export const undeclaredWrites = (
  root: string,
  proc: Process,
  layout: SharedInputs.Layout,
  entries: ReadonlyArray<Store.TreeEntry>
): Effect.Effect<UndeclaredWrites | undefined> =>
  Effect.suspend(() => {
    const skipped = skippedOf(proc, layout.shared)
    if (skipped === undefined) return Effect.succeed(undefined)
    const inputs = new Set<string>()
    for (const e of entries) inputs.add(e.path)
    const sample: Array<string> = []
    const unreadable: Array<string> = []
    let count = 0
    let met = 0
    // Each directory's entries in name order, and the sample sorted: the same paths are named every run.
    const dirs = [""]
    while (dirs.length > 0 && met <= BOUND) {
      const rel = dirs.pop()!
      const listed = listDir(root, rel, inputs, skipped, BOUND - met, unreadable)
      met += listed.met
      const subdirs: Array<string> = []
      for (const [at, isDir] of listed.entries) {
        if (isDir) subdirs.push(at)
        else if (!inputs.has(at)) {
          count++
          if (sample.length < SAMPLE) sample.push(at)
        }
      }
      for (let i = subdirs.length - 1; i >= 0; i--) dirs.push(subdirs[i]!)
    }
    const found: UndeclaredWrites | undefined = count === 0 ? undefined : {
      count,
      sample: sample.sort(),
      ...(met > BOUND ? { truncated: true } : {})
    }
    return unreadable.length === 0 ? Effect.succeed(found) : Effect.as(
      Effect.logDebug(`${proc.description}: not looked at for undeclared writes: ${unreadable.join("; ")}`),
      found
    )
  })
