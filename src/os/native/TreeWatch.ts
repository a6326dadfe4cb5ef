/**
 * A watch over a tree whose every path was just found as recorded (a run memo's group: a `node_modules` taken whole),
 * so that the process holding it can later say "unchanged" without an `lstat` of each path. Through inotify
 * (`treeWatch.c` beside it): a watch on every directory (its entries come, go, are renamed or changed through it)
 * and on every file's inode (a change made through any of its links, a link made or removed elsewhere).
 *
 * What inotify does not see, the watch checks itself or refuses:
 * - the tree's top paths (those whose directory is not in the tree) are renamed or replaced in a directory that is
 *   not watched: each one's `lstat` is compared with the recorded one at every answer;
 * - a mount made or removed over any of its paths: the mount table's own change flag (`mountsChanged`);
 * - a tree on a file system whose changes may not all go through this kernel (NFS, FUSE, overlays): refused; one with
 *   another file system within it (a mount point inside) is its caller's to refuse (`memoGroups.ts topsOf`: every
 *   path recorded on one device);
 * - a change too many to queue: the queue's overflow is itself an event.
 * A write through a shared writable mapping of a file (`mmap`) moves its mtime without an event; git's file-system
 * monitor and watchman have the same blind spot. Only a standby uses a watch, and it is only ever a reason to skip
 * work: a watch that cannot be made, or that reported anything, and the tree is stat'ed again.
 *
 * Linux only; elsewhere (or without the addon) nothing is ever watched.
 *
 * @internal
 */
import * as fs from "node:fs"
import * as RawStat from "../RawStat.js"
import * as NativeAddon from "./Addon.js"

/** A path of the tree whose directory is outside it, as it was when the tree was found as recorded. */
export interface Top {
  readonly name: string
  /** Undefined for a path that was absent. */
  readonly dev?: number
  readonly ino?: number
}

export interface Watch {
  readonly prefix: string
  readonly fd: number
  /** Its watches, counted against this process's budget until it is closed. */
  readonly count: number
  /** `/proc/self/mountinfo`, open since before the watch was made (see `mountsChanged`). */
  readonly mounts: number
  readonly tops: ReadonlyArray<Top>
}

type WatchTree = (prefix: string, names: string, kinds: string, cap: number) => number
type Polled = (fd: number) => boolean

/**
 * The most watches this process holds at once, all its trees together: a standby lives up to half an hour, and the
 * user's editor and other watchers share their limit (`max_user_watches`) with it, so at most an eighth of it, and
 * never more than 32,768.
 */
const budgetOf = (): number => {
  try {
    const limit = Number(fs.readFileSync("/proc/sys/fs/inotify/max_user_watches", "utf8").trim())
    return Number.isSafeInteger(limit) && limit > 0 ? Math.min(32_768, Math.floor(limit / 8)) : 0
  } catch {
    return 0
  }
}

let budget: number | undefined
/** Watches held now by this process's open watches. */
let used = 0

const closeQuietly = (fd: number): void => {
  try {
    fs.closeSync(fd)
  } catch {
    // Closed already.
  }
}

/**
 * Watches `prefix` + each of `names` (separated by NUL) of kind `kinds[i]` (`d`, `f`, `l`, `a`: directory, file,
 * symlink, absent), `tops` being those whose directory is not one of them. Made before the paths are compared with
 * their record: a change after the watch is made is then either seen by that comparison or reported. Undefined when
 * the tree cannot be watched (see the module's comment).
 */
export const watch = (prefix: string, names: string, kinds: string, tops: ReadonlyArray<Top>): Watch | undefined => {
  const addon = NativeAddon.exports()
  const watchTree = addon?.watchTree as WatchTree | undefined
  const mountsChanged = addon?.mountsChanged as Polled | undefined
  if (typeof watchTree !== "function" || typeof mountsChanged !== "function") return undefined
  budget ??= budgetOf()
  let count = 0
  for (let i = 0; i < kinds.length; i++) if (kinds[i] === "d" || kinds[i] === "f") count++
  // Counted before anything is made: a tree over what is left is not partly watched and thrown away.
  if (count === 0 || used + count > budget) return undefined
  let mounts: number
  try {
    mounts = fs.openSync("/proc/self/mountinfo", "r")
  } catch {
    return undefined
  }
  let fd: number
  try {
    fd = watchTree(prefix, names, kinds, count)
  } catch {
    fd = -1
  }
  if (fd < 0) {
    closeQuietly(mounts)
    return undefined
  }
  used += count
  return { prefix, fd, count, mounts, tops }
}

const st: RawStat.RawStat = { dev: 0, ino: 0, mode: 0, size: 0, mtimeMs: 0, ctimeMs: 0 }

/** Whether the top path is where and what it was. */
const topHolds = (prefix: string, top: Top): boolean => {
  let there: boolean
  try {
    there = RawStat.lstatInto(prefix + top.name, st, "/")
  } catch {
    return false
  }
  return top.dev === undefined ? !there : there && st.dev === top.dev && st.ino === top.ino
}

/**
 * Whether nothing in the tree has changed since the watch was made: no event, no mount table change, every top path
 * where it was. A false answer is final: the caller closes the watch.
 */
export const unchanged = (w: Watch): boolean => {
  const addon = NativeAddon.exports()
  const treeChanged = addon?.treeChanged as Polled | undefined
  const mountsChanged = addon?.mountsChanged as Polled | undefined
  if (typeof treeChanged !== "function" || typeof mountsChanged !== "function") return false
  return !treeChanged(w.fd) && !mountsChanged(w.mounts) && w.tops.every((top) => topHolds(w.prefix, top))
}

/**
 * Gives the watch's descriptors back (its watches go with the inotify descriptor). The inotify descriptor is closed on
 * libuv's pool: its close waits for the kernel to free every watch (a grace period: 15-25 ms for 7,000 watches here,
 * most of it waiting), which the check that dropped it should not wait for.
 */
export const close = (w: Watch): void => {
  used -= w.count
  fs.close(w.fd, () => undefined)
  closeQuietly(w.mounts)
}
