/**
 * A snapshot session: a workspace's stat index, open for the length of a run (`Store.snapshotSession`). It is an
 * opaque handle: the store's snapshots read the index through it, and this module's {@link knownHash} and
 * {@link recordHash} are the only other way in (what writing a file into the workspace checks and tells it).
 *
 * @since 0.1.0
 */
import type * as fs from "node:fs"
import * as StatIndex from "./internal/walks/statIndex.js"

/**
 * @since 0.1.0
 * @category symbols
 */
export const TypeId: unique symbol = Symbol.for("kiln/SnapshotSession")

/**
 * @since 0.1.0
 * @category symbols
 */
export type TypeId = typeof TypeId

/**
 * An open stat index for one workspace; only the store that opened it makes one.
 *
 * @since 0.1.0
 * @category models
 */
export interface SnapshotSession {
  readonly [TypeId]: TypeId
  readonly file: string
  /** Files whose content this session had to read: new, or changed since the index last saw them. */
  readonly hashed: number
}

/**
 * What a session's snapshots tell as they hash files (new, or changed since the index last saw them), for a caller to
 * show: a first run hashes every input once, which takes a while on a large tree. Plain calls rather than Effects,
 * made from inside the walk: a snapshot reads its files in plain code (see `snapshot.ts`), and these are its only
 * cost where nothing needs hashing (none are made).
 *
 * @since 0.1.0
 * @category models
 */
export interface HashProgress {
  /** A file was hashed: its path relative to the workspace, and its size. */
  readonly hashed: (rel: string, bytes: number) => void
  /** A snapshot finished (its files hashed, or it failed). */
  readonly settled: () => void
}

/**
 * @since 0.1.0
 * @category models
 */
export interface SessionOptions {
  /** Read the index only once a few files had to be hashed without it (see `Store.snapshotSession`). */
  readonly lazy?: boolean
  readonly progress?: HashProgress
  /**
   * Saved walks of directories taken whole (by `WholeDirectory.savedWalk`) whose every path a check made in this run,
   * before the session, found at its saved stat (the run memo's): the session takes them without looking again.
   */
  readonly vouched?: ReadonlySet<string>
}

/**
 * Opens the stat index of `workspace` in the store at `storeRoot` (see `Store.snapshotSession`).
 *
 * @internal
 */
export const open = (storeRoot: string, workspace: string, options?: SessionOptions): SnapshotSession => {
  const index = StatIndex.open(storeRoot, workspace, options)
  const session: SnapshotSession = {
    [TypeId]: TypeId,
    file: index.file,
    get hashed() {
      return index.hashed
    }
  }
  StatIndex.bind(session, index)
  return session
}

/**
 * Saves the session's index if anything changed (when its scope closes).
 *
 * @internal
 */
export const save = (session: SnapshotSession): void => StatIndex.save(StatIndex.of(session))

/**
 * The hash the session knows for the file at `abs` with this stat, if its index has one: what writing a file into a
 * workspace checks before it writes the same bytes again.
 *
 * @since 0.1.0
 * @category snapshots
 */
export const knownHash = (session: SnapshotSession, abs: string, st: fs.BigIntStats): string | undefined =>
  StatIndex.lookup(StatIndex.of(session), abs, st)

/**
 * Tells the session that the file at `abs`, with this stat, holds `hash`: the next snapshot of the workspace does not
 * read it again.
 *
 * @since 0.1.0
 * @category snapshots
 */
export const recordHash = (session: SnapshotSession, abs: string, st: fs.BigIntStats, hash: string): void =>
  StatIndex.record(StatIndex.of(session), abs, st, hash)
