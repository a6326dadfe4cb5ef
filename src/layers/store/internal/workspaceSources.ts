/**
 * Files a workspace snapshot hashed and did not copy into the store: those of a directory taken whole
 * (`node_modules/**`). A sandbox sees such a directory mounted from the workspace itself, so a copy in the store was
 * written once and never read, and on a real workspace it was most of a cold run's first seconds (a gigabyte of
 * `node_modules` written, fsynced and collected). Bazel keeps source files the same way: hashed where they are.
 *
 * Where the bytes are needed after all (a sandbox written rather than mounted, the store's copy of a shared tree, an
 * upload to a remote executor), they are read again from the workspace and taken only when they still are what was
 * hashed: a regular file (a link is never followed), of the digest's size, hashing to it. A file changed since is
 * then missing, as a collected blob is, and the engine's backtracking stores it again from what is there now.
 *
 * The registry lives as long as the open store (this process): a later process learns where the files are from the
 * saved walk of the directory (`walks/wholeDirs.ts`), which it takes before it needs any of them.
 *
 * @internal
 */
import * as fs from "node:fs"
import type * as Digest from "../../../domain/Digest.js"
import * as Shims from "../Shims.js"
import type * as Observation from "../SnapshotObservation.js"

/**
 * A directory taken whole with fewer files than this is stored as any input is: below the size at which sandboxes
 * mount a tree rather than have it written (`SharedTrees.DEFAULT_MIN_FILES`), its files would be read again for the
 * first sandbox anyway, and a file edited meanwhile would be missing where the snapshot's bytes were stored before.
 *
 * @internal
 */
export const LEFT_MIN_FILES = 1000

/** @internal */
export interface Source {
  readonly abs: string
  readonly size: number
}

/** @internal */
export interface Sources {
  /** Each hash's file, once the groups below are indexed. */
  readonly byHash: Map<string, Source>
  /**
   * The observations of directories taken whole, by the directory, not indexed yet: a run that needs none of their
   * bytes (every sandbox mounts them) never pays for a map of tens of thousands of paths. By the directory, so that
   * a process that snapshots it again (a standby's next run) holds its latest walk alone.
   */
  readonly pending: Map<string, ReadonlyArray<Observation.SnapshotObservation>>
}

/** Past this many files, what was indexed is forgotten before more is: paths kept are bounded, not a long life's. */
const INDEXED_MAX = 1_000_000

/** @internal */
export const make = (): Sources => ({ byHash: new Map(), pending: new Map() })

/** Whether any file is known: a store with none asks nothing more of its misses. @internal */
export const isEmpty = (sources: Sources): boolean => sources.byHash.size === 0 && sources.pending.size === 0

/**
 * Notes the files of a directory taken whole, from what its walk observed (each file's path, size and hash). A `.bin`
 * shim is left out: what the store took for it is not its bytes on disk (see `Shims.ts`), and the walk stores it.
 *
 * @internal
 */
export const noteGroup = (
  sources: Sources,
  dir: string,
  observations: ReadonlyArray<Observation.SnapshotObservation>
): void => {
  sources.pending.set(dir, observations)
}

/** Whether a directory's observations hold at least `n` files (counted only that far). @internal */
export const holdsAtLeast = (observations: ReadonlyArray<Observation.SnapshotObservation>, n: number): boolean => {
  let files = 0
  for (const o of observations) if (o.kind === "f" && ++files >= n) return true
  return false
}

const indexPending = (sources: Sources): void => {
  const groups = [...sources.pending.values()]
  sources.pending.clear()
  if (sources.byHash.size + groups.reduce((n, g) => n + g.length, 0) > INDEXED_MAX) sources.byHash.clear()
  for (const group of groups) {
    for (const o of group) {
      if (o.kind !== "f" || Shims.isShimPath(o.abs)) continue
      sources.byHash.set(o.evidence, { abs: o.abs, size: Number(o.size) })
    }
  }
}

/** Where the file of `digest` was hashed, if a snapshot of this process left it in the workspace. @internal */
export const lookup = (sources: Sources, digest: Digest.Digest): Source | undefined => {
  if (isEmpty(sources)) return undefined
  if (sources.pending.size > 0) indexPending(sources)
  const source = sources.byHash.get(digest.hash)
  return source !== undefined && source.size === digest.sizeBytes ? source : undefined
}

/**
 * Opens `source` for reading if it is still a regular file of the digest's size; undefined otherwise (gone, replaced
 * by a link or a directory, grown or shrunk). The caller hashes what it reads.
 *
 * @internal
 */
export const open = (source: Source, digest: Digest.Digest): number | undefined => {
  let fd: number
  try {
    fd = fs.openSync(source.abs, fs.constants.O_RDONLY | fs.constants.O_NOFOLLOW | fs.constants.O_NONBLOCK)
  } catch {
    return undefined
  }
  try {
    const st = fs.fstatSync(fd)
    if (st.isFile() && st.size === digest.sizeBytes) return fd
  } catch {
    // Unreadable now: as gone.
  }
  fs.closeSync(fd)
  return undefined
}

/**
 * The bytes of `source` if they are still exactly what `digest` names (read once, at most its size and one byte
 * more, so a file that grew is refused without reading it whole); the caller checks the hash.
 *
 * @internal
 */
export const readSized = (source: Source, digest: Digest.Digest): Buffer | undefined => {
  const fd = open(source, digest)
  if (fd === undefined) return undefined
  try {
    const bytes = Buffer.allocUnsafe(digest.sizeBytes + 1)
    let n = 0
    for (;;) {
      const got = fs.readSync(fd, bytes, n, bytes.length - n, null)
      if (got === 0) break
      n += got
      if (n > digest.sizeBytes) return undefined
    }
    return n === digest.sizeBytes ? bytes.subarray(0, n) : undefined
  } catch {
    return undefined
  } finally {
    fs.closeSync(fd)
  }
}
