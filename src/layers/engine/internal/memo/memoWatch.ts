/**
 * The watches a standby keeps on the run memo's groups (see `os/native/TreeWatch.ts`): a group its rehearsal found with
 * every path at its recorded stat, watched since before that look, holds at a later check for as long as the watch has
 * reported nothing, without an `lstat` of each of its paths (7,280 in a real npm install's `node_modules`, most of a
 * no-op's check). Kept per group object: the memo as parsed (`RunMemo.read`'s `PARSED`), whose groups are the same
 * objects from check to check until the memo file or its journal changes (a run in that workspace, another
 * workspace's memo read in between); a memo read anew keeps the watch of each group it holds unchanged under the same
 * key.
 *
 * Only a standby arms them, and only in its rehearsal (`noop.ts rehearse`: nobody waits for it then); every other
 * check, and the engine's own bundle, has none and stats the group as before.
 *
 * @internal
 */
import * as TreeWatch from "../../../../os/native/TreeWatch.js"
import * as MemoGroups from "./memoGroups.js"

/**
 * The fewest paths a group must have to be watched: a few hundred `lstat`s cost well under a millisecond, and each
 * watched group is an inotify instance, of which a user has few (`fs.inotify.max_user_instances`, 128 by default).
 */
const WATCHED_AT_LEAST = 256
/** The most groups one process watches (see {@link WATCHED_AT_LEAST}). */
const WATCHED_AT_MOST = 8

let arming = false
interface Kept {
  readonly key: string
  readonly watch: TreeWatch.Watch
}
const watches = new Map<MemoGroups.Group, Kept>()
/** Whether a watch was dropped since {@link lost} last answered (it reported a change). */
let dropped = false
/** Groups held by their watch since {@link heldByWatch} last answered. */
let held = 0

/** Whether the checks from now on make watches (a standby's rehearsal). */
export const setArming = (on: boolean): void => {
  arming = on
}

/** Whether `g` still holds by its watch; a watch that cannot say so is closed and forgotten. */
export const holds = (workspace: string, g: MemoGroups.Group): boolean => {
  const kept = watches.get(g)
  if (kept === undefined) return false
  if (kept.watch.prefix === `${workspace}/` && TreeWatch.unchanged(kept.watch)) {
    held++
    return true
  }
  TreeWatch.close(kept.watch)
  watches.delete(g)
  dropped = true
  return false
}

/** A watch of `g`, made before its paths are compared with their record, when this check makes watches. */
export const arm = (workspace: string, g: MemoGroups.Group): TreeWatch.Watch | undefined => {
  if (!arming || watches.has(g) || g.kinds.length < WATCHED_AT_LEAST || watches.size >= WATCHED_AT_MOST) {
    return undefined
  }
  const tops = MemoGroups.topsOf(g)
  return tops === undefined ? undefined : TreeWatch.watch(`${workspace}/`, g.paths, g.kinds, tops)
}

/** Keeps the watch made for `g` (the memo's group `key`) if every path held at its recorded stat; else closes it. */
export const settle = (key: string, g: MemoGroups.Group, w: TreeWatch.Watch, heldByStat: boolean): void => {
  if (heldByStat) watches.set(g, { key, watch: w })
  else TreeWatch.close(w)
}

/**
 * The memo of `workspace` read anew (`groups`, by key): each watch of that workspace moves to the group under its key
 * if it holds the same observations (the watch says those are still what is there), and is closed otherwise. Those of
 * other workspaces stay as they are: one standby serves each workspace its user runs that kiln in.
 */
export const carryOver = (
  workspace: string,
  groups: Readonly<Record<string, MemoGroups.Group>> | undefined
): void => {
  const prefix = `${workspace}/`
  for (const [g, kept] of [...watches]) {
    if (kept.watch.prefix !== prefix) continue
    watches.delete(g)
    const now = groups?.[kept.key]
    if (now !== undefined && MemoGroups.equal(g, now)) watches.set(now, kept)
    else {
      TreeWatch.close(kept.watch)
      dropped = true
    }
  }
}

/** Whether a watch was dropped since the last call: the standby then rehearses again, to watch it anew. */
export const lost = (): boolean => {
  const was = dropped
  dropped = false
  return was
}

/** How many groups held by their watch since the last call (for `KILN_NOOP_DEBUG`). */
export const heldByWatch = (): number => {
  const n = held
  held = 0
  return n
}
