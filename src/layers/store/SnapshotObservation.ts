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
export const present = (kind: Present["kind"], abs: string, st: fs.BigIntStats, evidence: string): Present => ({
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
  const st: RawStat.RawStat = { dev: 0, ino: 0, mode: 0, size: 0, mtimeMs: 0, ctimeMs: 0 }
  for (const o of observations) {
    let there: boolean
    try {
      there = RawStat.lstatInto(o.abs, st, "/")
    } catch {
      there = false
    }
    if (o.kind === "a") {
      if (there) return false
      continue
    }
    if (
      !there || st.ino !== Number(o.ino) || st.mtimeMs !== RawStat.msOfNs(o.mtimeNs) ||
      st.ctimeMs !== RawStat.msOfNs(o.ctimeNs) || st.size !== Number(o.size) || st.mode !== Number(o.mode) ||
      st.dev !== Number(o.dev)
    ) return false
  }
  return true
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
