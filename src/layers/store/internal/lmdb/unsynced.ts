/**
 * Crash safety for LMDB environments committed without an fsync. Every commit is written with `MDB_NOSYNC`: an fsync
 * per commit, several per process run, was a large part of a cold build's time (report.md, "Issue #25, session 21").
 * A process that dies loses nothing that way (its pages are in the page cache), but a machine that goes down may
 * have written some of a commit's pages and not others, and LMDB then follows page numbers into garbage (a crash of
 * the process that reads it, past any error handling). Syncing only at the end is not enough by itself: without an
 * fsync LMDB reuses freed pages at once, so even the last synced state may be overwritten on disk.
 *
 * So a process that writes a store first leaves a marker in `<root>/unsynced/`, named by the boot, its pid and start
 * time, and makes it durable before its first commit. When it closes an environment it wrote, it syncs it; once all
 * are synced it removes the marker. Opening a shard then tells the cases apart:
 * - a marker of an earlier boot: the machine went down while that process had commits not on disk. Every shard of
 *   the store is refused, with `kiln store check --repair` to set them aside (kiln never discards one on its own).
 * - a marker of a process of this boot that is gone: its commits are in the page cache; they are synced now, and the
 *   marker removed.
 * - a marker of a live process: it is still writing.
 *
 * @internal
 */
import * as Effect from "effect/Effect"
import * as fs from "node:fs"
import * as path from "node:path"
import { bootIdText } from "../../../../os/BootId.js"
import { describeErrno, errnoOf } from "../../../../os/Errno.js"
import * as Proc from "../../../../os/Proc.js"

/** The LMDB kinds of a store root, as `Store.make` lays them out: `<root>/<kind>/<shard>/`. */
export const KINDS = ["files", "directories", "actions", "locks"]

const DIR = "unsynced"

/** The store root of an environment at `<root>/<kind>/<shard>`. */
const rootOf = (envDir: string): string => path.dirname(path.dirname(envDir))

const bootNow = (): string => (bootIdText() ?? "").trim() || "unknown"

/** This process's marker in each store root it has written since it last synced all it wrote there. */
const marked = new Map<string, { readonly file: string; readonly written: Set<string> }>()

/** File systems that cannot fsync a directory (some FUSE ones) say so; their stores are written all the same. */
const CANNOT_FSYNC = new Set(["EINVAL", "ENOSYS", "ENOTSUP", "EOPNOTSUPP"])

const fsyncPath = (p: string): void => {
  const fd = fs.openSync(p, "r")
  try {
    fs.fsyncSync(fd)
  } catch (e) {
    if (!CANNOT_FSYNC.has(errnoOf(e) ?? "")) throw e
  } finally {
    fs.closeSync(fd)
  }
}

/**
 * Notes that this process is about to commit to the environment in `envDir`: its store's marker is made (and on disk)
 * first if it has none. Returns the error when the marker cannot be made: the commit must not go ahead then.
 *
 * @internal
 */
export const mark = (envDir: string): Error | undefined => {
  const root = rootOf(envDir)
  const known = marked.get(root)
  if (known !== undefined) {
    known.written.add(envDir)
    return undefined
  }
  try {
    const dir = path.join(root, DIR)
    if (fs.mkdirSync(dir, { recursive: true }) !== undefined) fsyncPath(root)
    const me = Proc.self()
    const file = path.join(dir, `${bootNow()}_${me.pid}_${me.startTime}`)
    fs.closeSync(fs.openSync(file, "w"))
    // The marker's name must reach the disk before any page of the commits it covers.
    fsyncPath(dir)
    marked.set(root, { file, written: new Set([envDir]) })
    return undefined
  } catch (e) {
    return new Error(`cannot mark the store as being written (${path.join(root, DIR)}): ${describeErrno(e)}`)
  }
}

/**
 * Syncs the environment in `envDir` if this process wrote it (`sync` is LMDB's `mdb_env_sync`, run off the main
 * thread), and removes the store's marker once nothing this process wrote there is unsynced. A sync that fails
 * leaves the marker: the store is then checked as if this process had died.
 *
 * @internal
 */
export const settle = (envDir: string, sync: (done: (error?: unknown) => void) => void): Effect.Effect<void> =>
  Effect.suspend(() => {
    const root = rootOf(envDir)
    const m = marked.get(root)
    if (m === undefined || !m.written.has(envDir)) return Effect.void
    return Effect.async<void, unknown>((resume) => {
      sync((error) => resume(error === undefined || error === null ? Effect.void : Effect.fail(error)))
    }).pipe(
      Effect.flatMap(() =>
        Effect.try(() => {
          m.written.delete(envDir)
          if (m.written.size > 0 || marked.get(root) !== m) return
          marked.delete(root)
          fs.rmSync(m.file, { force: true })
          fsyncPath(path.dirname(m.file))
        })
      ),
      Effect.catchAll((e) =>
        Effect.logWarning(`could not sync the LMDB environment ${envDir}: ${describeErrno(e)}; its marker stays`)
      )
    )
  })

interface Marker {
  readonly boot: string
  readonly pid: number
  readonly startTime: string
}

const parse = (name: string): Marker | undefined => {
  const [boot, pid, startTime] = name.split("_")
  return boot === undefined || pid === undefined || startTime === undefined || !/^\d+$/.test(pid)
    ? undefined
    : { boot, pid: Number(pid), startTime }
}

/** The names in `dir`; none when it does not exist. */
const namesIn = (dir: string): Array<string> => {
  try {
    return fs.readdirSync(dir)
  } catch (e) {
    if (errnoOf(e) === "ENOENT") return []
    throw e
  }
}

/** fdatasyncs every data file of the store (what a process that is gone left in the page cache). */
const syncAll = (root: string): void => {
  for (const kind of KINDS) {
    for (const shard of namesIn(path.join(root, kind))) {
      let fd: number
      try {
        fd = fs.openSync(path.join(root, kind, shard, "data.mdb"), "r")
      } catch (e) {
        if (errnoOf(e) === "ENOENT" || errnoOf(e) === "ENOTDIR") continue
        throw e
      }
      try {
        fs.fdatasyncSync(fd)
      } finally {
        fs.closeSync(fd)
      }
    }
  }
}

/** Roots found without a marker of an earlier boot (none can appear later in this boot). */
const clean = new Set<string>()

/**
 * Why the environment in `envDir` may be torn (a marker of an earlier boot in its store), or undefined. Markers of
 * processes of this boot that are gone are settled on the way: their stores' data files are synced, and the markers
 * removed.
 *
 * @internal
 */
export const problemOf = (envDir: string): string | undefined => {
  const root = rootOf(envDir)
  if (clean.has(root)) return undefined
  let names: Array<string>
  try {
    names = namesIn(path.join(root, DIR))
  } catch {
    // Unreadable: the open that follows reports what is wrong with the store, if anything.
    return undefined
  }
  const boot = bootNow()
  for (const name of names) {
    const marker = parse(name)
    if (marker === undefined) continue
    if (marker.boot !== boot) {
      return `the machine went down while kiln (pid ${marker.pid}) was writing to this store, before it synced ` +
        `(${path.join(root, DIR, name)}), so its LMDB files may be torn`
    }
    if (Proc.ownerAlive(marker)) continue
    try {
      syncAll(root)
      fs.rmSync(path.join(root, DIR, name), { force: true })
    } catch {
      // Left for the next opener: the commits are safe until the machine goes down.
    }
  }
  clean.add(root)
  return undefined
}

/**
 * Removes the markers of earlier boots under `root`, once `kiln store check --repair` has set every shard aside.
 *
 * @internal
 */
export const clearEarlierBoots = (root: string): void => {
  const boot = bootNow()
  for (const name of namesIn(path.join(root, DIR))) {
    const marker = parse(name)
    if (marker !== undefined && marker.boot !== boot) fs.rmSync(path.join(root, DIR, name), { force: true })
  }
}
