/**
 * Reads a directory on disk into the store: files (executable bit kept), symlinks (kept as symlinks, never
 * followed) and directories, optionally filtered by globs.
 *
 * @internal
 */
import { Effect } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"
import picomatch from "picomatch"
import * as Digest from "../../domain/Digest.js"
import { StoreError } from "../../domain/StoreErrors.js"
import type * as Core from "./core.js"
import { putHashedSmallFiles } from "./core.js"
import { describeErrno, errnoOf, ioError } from "./errno.js"
import * as LargeFiles from "./largeFiles.js"
import type * as Sharded from "./shardedLmdb.js"
import * as Tree from "./tree.js"

/** @internal */
export interface Filter {
  readonly includes: (relPath: string) => boolean
  /** Whether the walk may skip a directory: nothing under it can be included. */
  readonly prunes: (relDir: string) => boolean
}

/**
 * Globs relative to the snapshot root; a leading `!` excludes. With no include glob, everything is included.
 *
 * @internal
 */
export const filterOf = (globs: ReadonlyArray<string>): Filter | undefined => {
  const include = globs.filter((g) => !g.startsWith("!"))
  const exclude = globs.filter((g) => g.startsWith("!")).map((g) => g.slice(1))
  if (include.length === 0 && exclude.length === 0) return undefined
  const options = { dot: true }
  const inc = include.length === 0 ? () => true : picomatch(include, options)
  const exc = exclude.length === 0 ? () => false : picomatch(exclude, options)
  const bases = include.length === 0
    ? undefined
    : include.map((g) => {
      const scan = picomatch.scan(g)
      return scan.isGlob ? scan.base : g
    })
  return {
    includes: (p) => inc(p) && !exc(p),
    prunes: (d) =>
      exc(d) ||
      (bases !== undefined &&
        !bases.some((b) => b === "" || b === d || b.startsWith(`${d}/`) || d.startsWith(`${b}/`)))
  }
}

const FLUSH_BYTES = 32 * 1024 * 1024

interface Walk {
  readonly core: Core.Core
  readonly filter: Filter | undefined
  pending: Array<Sharded.Entry>
  pendingBytes: number
}

const readFileNode = (
  w: Walk,
  abs: string
): Effect.Effect<{ digest: Digest.Digest; isExecutable: boolean } | undefined, StoreError> =>
  Effect.suspend(() => {
    let fd: number
    try {
      fd = fs.openSync(abs, fs.constants.O_RDONLY | fs.constants.O_NOFOLLOW)
    } catch (e) {
      // Deleted between readdir and open: the tree is what is there now.
      if (errnoOf(e) === "ENOENT") return Effect.succeed(undefined)
      return Effect.fail(ioError(abs, "cannot read")(e))
    }
    let size: number
    let isExecutable: boolean
    let bytes: Buffer | undefined
    try {
      const st = fs.fstatSync(fd)
      if (!st.isFile()) {
        return Effect.fail(new StoreError({ reason: "Unsupported", detail: "not a regular file", path: abs }))
      }
      size = st.size
      isExecutable = (st.mode & 0o111) !== 0
      if (size < LargeFiles.THRESHOLD) bytes = fs.readFileSync(fd)
    } catch (e) {
      return Effect.fail(ioError(abs, "cannot read")(e))
    } finally {
      fs.closeSync(fd)
    }
    if (bytes === undefined) {
      return Effect.map(
        LargeFiles.putFromPath(w.core.large, abs, Date.now() + w.core.leaseTimeMs, w.core.leaseTimeMs),
        (digest) => ({ digest, isExecutable })
      )
    }
    const digest = Digest.ofBytes(bytes)
    if (digest.sizeBytes >= LargeFiles.THRESHOLD) {
      // It grew between fstat and read: store it as the large file it now is.
      return Effect.map(
        LargeFiles.putBytes(w.core.large, digest, bytes, Date.now() + w.core.leaseTimeMs, w.core.leaseTimeMs),
        () => ({ digest, isExecutable })
      )
    }
    if (bytes.length > 0) {
      w.pending.push({ hash: digest.hash, value: bytes })
      w.pendingBytes += bytes.length
    }
    if (w.pendingBytes < FLUSH_BYTES) return Effect.succeed({ digest, isExecutable })
    return Effect.as(flush(w), { digest, isExecutable })
  })

const flush = (w: Walk): Effect.Effect<void, StoreError> =>
  Effect.suspend(() => {
    const entries = w.pending
    w.pending = []
    w.pendingBytes = 0
    return putHashedSmallFiles(w.core, entries)
  })

const walkDir = (w: Walk, abs: string, rel: string, into: Tree.Node): Effect.Effect<void, StoreError> =>
  Effect.gen(function*() {
    let entries: Array<fs.Dirent>
    try {
      entries = fs.readdirSync(abs, { withFileTypes: true })
    } catch (e) {
      return yield* Effect.fail(ioError(abs, "cannot read directory")(e))
    }
    for (const entry of entries) {
      const childRel = rel === "" ? entry.name : `${rel}/${entry.name}`
      const childAbs = path.join(abs, entry.name)
      let kind = entry.isDirectory() ? "dir" : entry.isSymbolicLink() ? "link" : entry.isFile() ? "file" : "other"
      if (kind === "other" && !entry.isFIFO() && !entry.isSocket() && !entry.isBlockDevice()) {
        // Some file systems report DT_UNKNOWN: ask lstat.
        const st = yield* Effect.try({ try: () => fs.lstatSync(childAbs), catch: ioError(childAbs, "cannot stat") })
        kind = st.isDirectory() ? "dir" : st.isSymbolicLink() ? "link" : st.isFile() ? "file" : "other"
      }
      if (kind === "dir") {
        if (w.filter?.prunes(childRel)) continue
        const child = Tree.node()
        yield* walkDir(w, childAbs, childRel, child)
        if (w.filter === undefined || !Tree.isEmpty(child)) into.dirs.set(entry.name, child)
        continue
      }
      if (w.filter !== undefined && !w.filter.includes(childRel)) continue
      if (kind === "link") {
        const target = yield* Effect.try({
          try: () => fs.readlinkSync(childAbs),
          catch: ioError(childAbs, "cannot read symlink")
        })
        into.symlinks.set(entry.name, target)
      } else if (kind === "file") {
        const file = yield* readFileNode(w, childAbs)
        if (file !== undefined) into.files.set(entry.name, file)
      } else {
        return yield* new StoreError({
          reason: "Unsupported",
          detail: "not a regular file, directory or symlink (sockets, FIFOs and devices cannot be snapshotted)",
          path: childAbs
        })
      }
    }
  })

/**
 * Snapshots the directory `root` (optionally filtered by globs) into the store and returns its digest.
 *
 * @internal
 */
export const snapshot = (
  core: Core.Core,
  root: string,
  globs: ReadonlyArray<string> = []
): Effect.Effect<Digest.Digest, StoreError> =>
  Effect.gen(function*() {
    const abs = path.resolve(root)
    const st = yield* Effect.try({ try: () => fs.statSync(abs), catch: ioError(abs, "cannot snapshot") })
    if (!st.isDirectory()) {
      return yield* new StoreError({ reason: "Io", detail: "cannot snapshot: not a directory", path: abs })
    }
    const w: Walk = { core, filter: filterOf(globs), pending: [], pendingBytes: 0 }
    const tree = Tree.node()
    yield* walkDir(w, abs, "", tree)
    yield* flush(w)
    return yield* Tree.finish(core, tree)
  })

/**
 * Reads one entry (file, symlink or whole directory) at `abs` into a tree node's slot `name`. Used by capture.
 * Returns false when the path does not exist.
 *
 * @internal
 */
export const readEntry = (
  w: Walk,
  abs: string,
  into: Tree.Node,
  name: string,
  expect: "file" | "directory"
): Effect.Effect<boolean, StoreError> =>
  Effect.gen(function*() {
    let st: fs.Stats
    try {
      st = fs.lstatSync(abs)
    } catch (e) {
      if (errnoOf(e) === "ENOENT" || errnoOf(e) === "ENOTDIR") return false
      return yield* Effect.fail(new StoreError({ reason: "Io", detail: `cannot stat: ${describeErrno(e)}`, path: abs }))
    }
    if (st.isSymbolicLink()) {
      const target = yield* Effect.try({ try: () => fs.readlinkSync(abs), catch: ioError(abs, "cannot read symlink") })
      into.symlinks.set(name, target)
      return true
    }
    if (expect === "file") {
      if (!st.isFile()) {
        return yield* new StoreError({
          reason: "Unsupported",
          detail: st.isDirectory()
            ? "declared as an output file, but the process created a directory"
            : "declared as an output file, but it is not a regular file",
          path: abs
        })
      }
      const file = yield* readFileNode(w, abs)
      if (file === undefined) return false
      into.files.set(name, file)
      return true
    }
    if (!st.isDirectory()) {
      return yield* new StoreError({
        reason: "Unsupported",
        detail: "declared as an output directory, but the process created a file",
        path: abs
      })
    }
    const child = Tree.node()
    yield* walkDir(w, abs, "", child)
    into.dirs.set(name, child)
    return true
  })

/** @internal */
export const readDirectoryInto = (w: Walk, abs: string, into: Tree.Node): Effect.Effect<void, StoreError> =>
  walkDir(w, abs, "", into)

/** @internal */
export const newWalk = (core: Core.Core): Walk => ({ core, filter: undefined, pending: [], pendingBytes: 0 })

/** @internal */
export const flushWalk = flush
