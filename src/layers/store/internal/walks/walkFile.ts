/**
 * How a snapshot's walk reads one file: by the stat index or a saved walk where they vouch for it, else its bytes,
 * hashed as they are read and stored with the walk's batch; a file of a workspace's directory taken whole is hashed and
 * left in the workspace (see `../workspaceSources.ts`). The walk over directories is `snapshot.ts`.
 *
 * @internal
 */
import * as Effect from "effect/Effect"
import * as fs from "node:fs"
import * as Digest from "../../../../domain/Digest.js"
import { StoreError } from "../../../../domain/StoreErrors.js"
import { errnoOf } from "../../../../os/Errno.js"
import { ioError } from "../../../../os/IoError.js"
import type * as HashFiles from "../../../../os/native/HashFiles.js"
import * as Shims from "../../Shims.js"
import * as Observation from "../../SnapshotObservation.js"
import * as Core from "../core.js"
import { putHashedSmallFiles } from "../core.js"
import type * as GlobMatches from "../globMatches.js"
import * as LargeFiles from "../largeFiles.js"
import type * as Sharded from "../lmdb/shards.js"
import type { Filter } from "../snapshotFilter.js"
import * as WorkspaceSources from "../workspaceSources.js"
import * as StatIndex from "./statIndex.js"
import * as WholeDirs from "./wholeDirs.js"

export const FLUSH_BYTES = 32 * 1024 * 1024

export interface Walk {
  readonly core: Core.Core
  readonly filter: Filter | undefined
  readonly index?: StatIndex.StatIndex | undefined
  /** Collects every path the walk read, with what it found there (for the run memo). */
  readonly observe?: Array<Observation.SnapshotObservation> | undefined
  /** Collects every file the walk read, with its digest (a capture's, for `Handoff`). */
  readonly read?: Array<readonly [string, Digest.Digest]> | undefined
  /** File contents read and not yet stored: shared by the walks of one `snapshotMany`, stored together. */
  readonly batch: Batch
  /** Inside a directory taken whole: its subdirectories are part of its walk, not shared on their own. */
  readonly inWhole?: boolean
  /** The last saved walk of the directory taken whole that this walk is in, if any: its files' hashes by stat. */
  readonly previous?: WholeDirs.Previous | undefined
  /** The directories taken whole that this walk used (see `wholeDirs`). */
  readonly wholes?: Set<string>
  /** Which include globs matched a path the tree holds (`snapshotMany`'s `unmatched`). */
  readonly matched?: GlobMatches.GlobMatches | undefined
  /**
   * A workspace's snapshot: what its `.bin` shims may name of it (see `Shims.rootsOf`), which they are taken without.
   * Absent for what a process made (its outputs are what it wrote).
   */
  readonly shimRoots?: Shims.Roots | undefined
  /** In a workspace's directory taken whole: its files left in the workspace, held until its size is known. */
  readonly left?: Left | undefined
  /**
   * The files beneath `root` hashed ahead of this walk (by path relative to it), for a large directory taken whole
   * that the walk found no saved hashes for (see `HashFiles.ts`): each is taken from here once the walk lists it.
   */
  readonly hashed?: { readonly root: string; readonly files: ReadonlyMap<string, HashFiles.Hashed> } | undefined
}

/**
 * The files of a directory taken whole that its walk left in the workspace (see `workspaceSources.ts`), while there
 * are few enough that sandboxes may be written from the store rather than mount it: such a directory is stored when
 * its walk ends, from the bytes held here (`read`), or read again where the walk took a file by its saved hash
 * (`known`). Past `WorkspaceSources.LEFT_MIN_FILES` it is left in the workspace, and nothing is held.
 */
export interface Left {
  count: number
  read: Array<Sharded.Entry>
  known: Array<Digest.Digest>
}

/**
 * Holds a file the walk left in the workspace while its directory may still be small (see {@link Left}); `bytes` may
 * be the scratch buffer's (see {@link readIntoScratch}), copied if they are kept.
 */
const hold = (left: Left | undefined, digest: Digest.Digest, bytes: Uint8Array | undefined): void => {
  if (left === undefined) return
  if (++left.count >= WorkspaceSources.LEFT_MIN_FILES) {
    left.read.length = 0
    left.known.length = 0
    return
  }
  if (bytes !== undefined && bytes.length > 0 && digest.sizeBytes < LargeFiles.THRESHOLD) {
    left.read.push({ hash: digest.hash, value: bytes.buffer === scratch.buffer ? Buffer.from(bytes) : bytes })
  } else if (!Digest.isEmpty(digest)) {
    left.known.push(digest)
  }
}

/**
 * Where the bytes of a file left in the workspace are read: hashed and dropped (but for the few a small directory
 * holds, copied out), they need no buffer of their own, and a cold walk of a real `node_modules` reads a gigabyte.
 */
const scratch = Buffer.allocUnsafe(LargeFiles.THRESHOLD)

/**
 * At most `size` bytes of `fd` (what its `fstat` said it holds: a file that grows while it is read is not followed
 * for ever, and its next stat says it changed), into `into` or, by default, a buffer of their own. Positional reads:
 * the descriptor's offset is where it was, for that read.
 */
const readUpTo = (fd: number, size: number, into: Buffer = Buffer.allocUnsafe(size)): Buffer => {
  let at = 0
  while (at < size) {
    const n = fs.readSync(fd, into, at, size - at, at)
    if (n === 0) break
    at += n
  }
  return into.subarray(0, at)
}

export interface Batch {
  entries: Array<Sharded.Entry>
  bytes: number
}

export const newBatch = (): Batch => ({ entries: [], bytes: 0 })

export interface FileNode {
  readonly digest: Digest.Digest
  readonly isExecutable: boolean
}

/**
 * What reading a file gives: the node at once when no I/O beyond a stat and a read is needed (every file of a run
 * where nothing changed), else an Effect (a store write, a large file). A walk visits thousands of files, and an
 * Effect per file was most of a no-op run's cost.
 */
export type Step<A> = A | Effect.Effect<A, StoreError>

export const run = <A>(step: Step<A>): Effect.Effect<A, StoreError> =>
  Effect.isEffect(step) ? step : Effect.succeed(step)

/**
 * Whether the walk hashes the file at `abs` and leaves its bytes in the workspace (see `workspaceSources.ts`): a file
 * of a workspace's directory taken whole, which sandboxes see mounted from the workspace, but for a `.bin` shim (what
 * the store takes for it is not what the workspace holds).
 */
const leftInWorkspace = (w: Walk, abs: string): boolean =>
  w.inWhole === true && w.shimRoots !== undefined && !Shims.isShimPath(abs)

/** A file left in the workspace as it was hashed ahead (see {@link Walk.hashed}): recorded as one read here is. */
const takeHashed = (w: Walk, abs: string, h: HashFiles.Hashed): FileNode => {
  const digest: Digest.Digest = { hash: h.hash, sizeBytes: h.size }
  // Counted as hashed, but not recorded in the stat index: its directory's saved walk keeps it, as for one read here.
  if (w.index !== undefined) StatIndex.countHashed(w.index, abs, h.size)
  hold(w.left, digest, undefined)
  w.observe?.push(Observation.present("f", abs, h.st, h.hash))
  w.read?.push([abs, digest])
  return { digest, isExecutable: (Number(h.st.mode) & 0o111) !== 0 }
}

export const readFileNode = (w: Walk, abs: string, useIndex = true): Step<FileNode | undefined> => {
  const left = leftInWorkspace(w, abs)
  // Hashed ahead only where nothing could vouch for the tree by stats (see `Walk.hashed`): as fresh as an lstat now.
  const ahead = left && w.hashed !== undefined && abs.startsWith(`${w.hashed.root}/`)
    ? w.hashed.files.get(abs.slice(w.hashed.root.length + 1))
    : undefined
  if (ahead !== undefined) return takeHashed(w, abs, ahead)
  const previous = w.previous ??
    (w.index !== undefined && w.inWhole !== true ? WholeDirs.enclosingPrevious(w.index, abs) : undefined)
  const known = previous?.files.has(abs) === true
  if (w.index !== undefined && useIndex && (known || StatIndex.mayKnow(w.index, abs))) {
    let st: fs.BigIntStats | undefined
    try {
      st = fs.lstatSync(abs, { bigint: true })
    } catch (e) {
      if (errnoOf(e) === "ENOENT") return undefined
    }
    const inWhole = w.inWhole === true
    const digest = st === undefined || !st.isFile()
      ? undefined
      : (known ? WholeDirs.previousDigest(previous!, abs, st) : undefined) ??
        (StatIndex.mayKnow(w.index, abs) ? StatIndex.lookupStored(w.index, abs, st, inWhole) : undefined)
    if (st !== undefined && digest !== undefined && left) {
      hold(w.left, digest, undefined)
      w.observe?.push(Observation.present("f", abs, st, digest.hash))
      return { digest, isExecutable: (Number(st.mode) & 0o111) !== 0 }
    }
    if (st !== undefined && digest !== undefined) {
      // The index vouches for the bytes on disk, not for the store: a collected blob is read again.
      const present = Core.hasFileSync(w.core, digest)
      if (typeof present !== "boolean") return Effect.fail(present)
      if (present) {
        w.observe?.push(Observation.present("f", abs, st, digest.hash))
        return { digest, isExecutable: (Number(st.mode) & 0o111) !== 0 }
      }
    }
  }
  let fd: number
  try {
    // Non-blocking: a FIFO put where the listing saw a file would hold the open until a writer came (fstat refuses it).
    fd = fs.openSync(abs, fs.constants.O_RDONLY | fs.constants.O_NOFOLLOW | fs.constants.O_NONBLOCK)
  } catch (e) {
    // Deleted between readdir and open: the tree is what is there now.
    if (errnoOf(e) === "ENOENT") return undefined
    return Effect.fail(ioError(abs, "cannot read")(e))
  }
  let size: number
  let isExecutable: boolean
  let bytes: Buffer | undefined
  let st: fs.BigIntStats
  let hashed: Digest.Digest | undefined
  try {
    st = fs.fstatSync(fd, { bigint: true })
    if (!st.isFile()) {
      return Effect.fail(new StoreError({ reason: "Unsupported", detail: "not a regular file", path: abs }))
    }
    size = Number(st.size)
    isExecutable = (Number(st.mode) & 0o111) !== 0
    if (size < LargeFiles.THRESHOLD) {
      // A file left in the workspace is hashed and dropped: read into the scratch buffer (a view of it, valid until
      // the next file is read).
      bytes = readUpTo(fd, size, left ? scratch : undefined)
    } else if (left) {
      const h = LargeFiles.hashFd(fd, size)
      hashed = { hash: h.hash, sizeBytes: h.size }
    }
  } catch (e) {
    return Effect.fail(ioError(abs, "cannot read")(e))
  } finally {
    fs.closeSync(fd)
  }
  if (w.index !== undefined) StatIndex.countHashed(w.index, abs, size)
  // A shim is taken as it reads in the sandbox (see `Shims.ts`): recorded with the size of what was taken.
  const raw = bytes
  if (bytes !== undefined && w.shimRoots !== undefined && Shims.isShimPath(abs)) {
    bytes = Shims.normalize(bytes, w.shimRoots) ?? bytes
  }
  const normalized = bytes !== raw
  const remember = <A extends { digest: Digest.Digest }>(r: A): A => {
    // Not a file left in the workspace: its directory's saved walk keeps it (see `keptElsewhere`).
    if (w.index !== undefined && !left && (normalized ? raw!.length === size : r.digest.sizeBytes === size)) {
      StatIndex.record(w.index, abs, st, r.digest.hash, normalized ? r.digest.sizeBytes : undefined, w.inWhole === true)
    }
    w.observe?.push(Observation.present("f", abs, st, r.digest.hash))
    w.read?.push([abs, r.digest])
    return r
  }
  if (left) {
    const digest = hashed ?? Digest.ofBytes(bytes!)
    hold(w.left, digest, bytes)
    return remember({ digest, isExecutable })
  }
  if (bytes === undefined) {
    return Effect.map(
      LargeFiles.putFromPath(w.core.large, abs, Date.now() + w.core.leaseTimeMs, w.core.leaseTimeMs),
      (digest) => remember({ digest, isExecutable })
    )
  }
  const digest = Digest.ofBytes(bytes)
  if (bytes.length > 0) {
    w.batch.entries.push({ hash: digest.hash, value: bytes })
    w.batch.bytes += bytes.length
  }
  if (w.batch.bytes < FLUSH_BYTES) return remember({ digest, isExecutable })
  return Effect.as(flush(w), remember({ digest, isExecutable }))
}

export const flush = (w: Walk): Effect.Effect<void, StoreError> =>
  Effect.suspend(() => {
    const entries = w.batch.entries
    w.batch.entries = []
    w.batch.bytes = 0
    return putHashedSmallFiles(w.core, entries)
  })
