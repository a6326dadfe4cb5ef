/**
 * What a snapshot read, path by path: the evidence a caller (the engine's run memo) needs to tell later, by one
 * `lstat`, that nothing it read has changed. Plain code without Effect: the CLI's no-op check reads these types
 * before it loads the engine.
 *
 * @since 0.1.0
 */
import type * as fs from "node:fs"

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
