/**
 * What a snapshot read, path by path: the evidence a caller (the engine's run memo) needs to tell later, by one
 * `lstat`, that nothing it read has changed. Plain code without Effect: the CLI's no-op check reads these types
 * before it loads the engine.
 *
 * @since 0.1.0
 */
import type * as fs from "node:fs"
import type { Digest } from "../../domain/Digest.js"
import * as RawStat from "../../os/RawStat.js"
import * as StatMany from "../../os/StatMany.js"

/**
 * The stat fields that tell a path unchanged, as the kernel gave them (nanosecond times, so that a stat taken within
 * a timestamp tick of a change can be told exactly).
 *
 * @since 0.1.0
 * @category models
 */
export interface Stat {
  readonly dev: bigint
  readonly ino: bigint
  /** Holds the file type too. */
  readonly mode: bigint
  readonly size: bigint
  readonly mtimeNs: bigint
  readonly ctimeNs: bigint
}

/**
 * A path read, with its stat and what was found there: a file's hash (`f`), a symlink's target (`l`), a directory's
 * names (`d`, see {@link namesOf}).
 *
 * @since 0.1.0
 * @category models
 */
export interface Present extends Stat {
  readonly kind: "f" | "l" | "d"
  readonly abs: string
  readonly evidence: string
}

/**
 * A glob's base that did not exist.
 *
 * @since 0.1.0
 * @category models
 */
export interface Absent {
  readonly kind: "a"
  readonly abs: string
}

/**
 * @since 0.1.0
 * @category models
 */
export type SnapshotObservation = Present | Absent

/**
 * An observation of `abs` from its stat. One flat object per path (a snapshot makes one for every file it reads):
 * the stat's fields are copied, the stat itself is not kept.
 *
 * @since 0.1.0
 * @category constructors
 */
export const present = (
  kind: Present["kind"],
  abs: string,
  st: Pick<fs.BigIntStats, "dev" | "ino" | "mode" | "size" | "mtimeNs" | "ctimeNs">,
  evidence: string
): Present => ({
  kind,
  abs,
  evidence,
  dev: st.dev,
  ino: st.ino,
  mode: st.mode,
  size: st.size,
  mtimeNs: st.mtimeNs,
  ctimeNs: st.ctimeNs
})

/**
 * The names of a directory listing, as a directory's evidence.
 *
 * @since 0.1.0
 * @category constructors
 */
export const namesOf = (entries: ReadonlyArray<{ readonly name: string }>): string =>
  entries.map((e) => e.name).sort().join("/")

/**
 * Whether every path observed is still as it was: same kind, device, inode, mode, size and nanosecond times (one
 * `lstat` each). A listing or a file whose stat is unchanged holds what it held.
 *
 * @since 0.1.0
 * @category checks
 */
export const stillHold = (observations: ReadonlyArray<SnapshotObservation>): boolean => {
  const { paths, expected } = expectedOf(observations)
  const table = StatMany.lstatMany("", paths, "/")
  for (let i = 0; i < paths.length; i++) if (!holdsAt(expected, table, i)) return false
  return true
}

/**
 * Whether each path observed is still as it was, as {@link stillHold} asks of them all: one answer per observation,
 * their paths stat'ed at once.
 *
 * @since 0.1.0
 * @category checks
 */
export const holdingEach = (observations: ReadonlyArray<SnapshotObservation>): ReadonlyArray<boolean> => {
  const { paths, expected } = expectedOf(observations)
  const table = StatMany.lstatMany("", paths, "/")
  return paths.map((_, i) => holdsAt(expected, table, i))
}

const st: RawStat.RawStat = { dev: 0, ino: 0, mode: 0, size: 0, mtimeMs: 0, ctimeMs: 0 }

/** Whether path `i` of `table` has the stat `expected` holds for it (absent where it was). */
const holdsAt = (expected: Float64Array, table: StatMany.StatTable, i: number): boolean => {
  const there = StatMany.statAt(table, i, st)
  const at = i * 6
  if (expected[at + 2] === ABSENT) return !there
  return there && st.ino === expected[at + 1] && st.mtimeMs === expected[at + 4] &&
    st.ctimeMs === expected[at + 5] && st.size === expected[at + 3] && st.mode === expected[at + 2] &&
    st.dev === expected[at]
}

/** The mode {@link expectedOf} gives a path observed absent. */
const ABSENT = -1

/**
 * What {@link stillHold} compares, per observations: a large tree's are checked again after each process that
 * mounted it. (Observations are never added to once made; a different length is made again all the same.)
 */
const expectedKnown = new WeakMap<
  ReadonlyArray<SnapshotObservation>,
  { readonly paths: ReadonlyArray<string>; readonly expected: Float64Array }
>()

/** The paths of `observations` and their stats as `lstat` gives them in numbers (dev, ino, mode, size, ms times). */
const expectedOf = (observations: ReadonlyArray<SnapshotObservation>) => {
  const known = expectedKnown.get(observations)
  if (known !== undefined && known.paths.length === observations.length) return known
  const expected = new Float64Array(observations.length * 6)
  observations.forEach((o, i) => {
    const at = i * 6
    if (o.kind === "a") {
      expected[at + 2] = ABSENT
      return
    }
    expected[at] = Number(o.dev)
    expected[at + 1] = Number(o.ino)
    expected[at + 2] = Number(o.mode)
    expected[at + 3] = Number(o.size)
    expected[at + 4] = RawStat.msOfNs(o.mtimeNs)
    expected[at + 5] = RawStat.msOfNs(o.ctimeNs)
  })
  const made = { paths: observations.map((o) => o.abs), expected }
  expectedKnown.set(observations, made)
  return made
}

/**
 * A directory a snapshot took whole (every entry under it is in the tree, none dropped), with the digest of its
 * tree: where nothing under it changed, it is that tree, byte for byte.
 *
 * @since 0.1.0
 * @category models
 */
export interface WholeDirectory {
  readonly abs: string
  readonly digest: Digest
  /** Every path under it, as the snapshot saw it. */
  readonly observations: ReadonlyArray<SnapshotObservation>
  /** Whether every path under it is still as the snapshot saw it ({@link stillHold}). */
  readonly unchanged: () => boolean
  /**
   * When it was taken from a saved walk of an earlier session as that walk was saved: the walk's key (see
   * `SessionOptions.vouched`), which the run memo keeps its observations under.
   */
  readonly savedWalk?: string
}
