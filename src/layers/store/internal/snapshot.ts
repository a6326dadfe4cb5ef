/**
 * Reads a directory on disk into the store: files (executable bit kept), symlinks (kept as symlinks, never
 * followed) and directories, optionally filtered by globs.
 *
 * @internal
 */
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as fs from "node:fs"
import * as path from "node:path"
import * as Digest from "../../../domain/Digest.js"
import { StoreError } from "../../../domain/StoreErrors.js"
import { describeErrno, errnoOf } from "../../../os/Errno.js"
import { ioError } from "../../../os/IoError.js"
import * as Shims from "../Shims.js"
import * as Observation from "../SnapshotObservation.js"
import type { Snapshot, SnapshotRequest } from "../Store.js"
import * as Core from "./core.js"
import * as GlobMatches from "./globMatches.js"
import * as LargeFiles from "./largeFiles.js"
import * as Sharded from "./lmdb/shards.js"
import { filterOf } from "./snapshotFilter.js"
import * as Tree from "./tree.js"
import * as TreeBlobs from "./treeBlobs.js"
import { hashAhead } from "./walks/hashAhead.js"
import * as StatIndex from "./walks/statIndex.js"
import {
  type FileNode,
  flush,
  FLUSH_BYTES,
  type Left,
  newBatch,
  readFileNode,
  run,
  type Walk
} from "./walks/walkFile.js"
import * as WholeDirs from "./walks/wholeDirs.js"
import * as WorkspaceSources from "./workspaceSources.js"

/** What Node's listing puts for bytes of a name that are not UTF-8. */
const REPLACED = "\uFFFD"

/**
 * A file the listing named but that is not there by that name: its name is not UTF-8, and Node's listing replaced
 * what is not (no tree can name it either: REAPI's names are UTF-8). Left out as if deleted, a change to it was missed.
 */
const notUtf8 = (abs: string): StoreError =>
  new StoreError({
    reason: "Unsupported",
    detail:
      "its name is not UTF-8 (shown here with U+FFFD), which no tree can name: rename it, or leave it out of the inputs",
    path: abs
  })

/** A socket, FIFO or device where a snapshot expects a file: one cannot be stored. */
const unsnapshottable = (abs: string) => (): StoreError =>
  new StoreError({
    reason: "Unsupported",
    detail: "not a regular file, directory or symlink (sockets, FIFOs and devices cannot be snapshotted)",
    path: abs
  })

/** Puts a file read at `rel` into its directory's node. */
const added = (w: Walk, node: Tree.Node, name: string, rel: string, file: FileNode) => {
  node.files.set(name, file)
  if (w.matched !== undefined) GlobMatches.notePath(w.matched, rel)
}

/**
 * Reads the directory `abs` (relative path `rel` under the snapshot root) into `into`, depth first. Plain code with
 * an explicit stack, leaving it only for what needs an Effect (a store write, a large file): a run where nothing
 * changed walks thousands of files, and an Effect per directory and per file was most of its cost. Under a filter,
 * directories left empty are dropped, except inside a directory the filter takes whole (`node_modules/**`): that
 * directory is an input as it is on disk, as a Bazel directory input or tree artifact is, empty directories (pnpm's
 * `node_modules/.tmp`) included, so that its tree is the directory and it may stand in for it (see `walkWhole`).
 */
const walkDir = (w: Walk, abs: string, rel: string, into: Tree.Node): Effect.Effect<void, StoreError> =>
  Effect.suspend(() => {
    const stack: Array<{ abs: string; rel: string; node: Tree.Node }> = [{ abs, rel, node: into }]
    const visited: Array<{ readonly rel: string; readonly node: Tree.Node }> = []
    /** Directories that held a tool's cache, which was left out: one that held nothing else is left out too. */
    const heldCaches = new Set<Tree.Node>()
    let current: { entries: Array<fs.Dirent>; i: number; abs: string; rel: string; node: Tree.Node } | undefined
    const step = (): Effect.Effect<void, StoreError> => {
      for (;;) {
        if (current === undefined || current.i >= current.entries.length) {
          const next = stack.pop()
          if (next === undefined) break
          let entries: Array<fs.Dirent>
          try {
            if (w.index === undefined) {
              entries = fs.readdirSync(next.abs, { withFileTypes: true })
            } else {
              const listing = StatIndex.readdir(w.index, next.abs)
              entries = listing.entries
              w.observe?.push(Observation.present("d", next.abs, listing.st, Observation.namesOf(entries)))
            }
          } catch (e) {
            return Effect.fail(ioError(next.abs, "cannot read directory")(e))
          }
          visited.push(next)
          current = { entries, i: 0, ...next }
          continue
        }
        const entry = current.entries[current.i++]!
        const childRel = current.rel === "" ? entry.name : `${current.rel}/${entry.name}`
        let kind = entry.isDirectory() ? "dir" : entry.isSymbolicLink() ? "link" : entry.isFile() ? "file" : "other"
        // Joined, not normalized again: `current.abs` is, and a name is one segment (path.join per entry was the
        // walk's largest source of garbage).
        const childAbs = current.abs.endsWith("/") ? current.abs + entry.name : `${current.abs}/${entry.name}`
        if (kind === "other" && !entry.isFIFO() && !entry.isSocket() && !entry.isBlockDevice()) {
          // Some file systems report DT_UNKNOWN: ask lstat.
          try {
            const st = fs.lstatSync(childAbs)
            kind = st.isDirectory() ? "dir" : st.isSymbolicLink() ? "link" : st.isFile() ? "file" : "other"
          } catch (e) {
            return Effect.fail(ioError(childAbs, "cannot stat")(e))
          }
        }
        if (kind === "dir") {
          // Beneath a directory the filter takes all of, nothing is pruned (see `Filter.takesAll`) but tools' caches.
          if (w.inWhole === true ? w.filter?.skipsBeneathWhole(childRel) : w.filter?.prunes(childRel)) {
            if (w.filter?.skipsBeneathWhole(childRel) === true) heldCaches.add(current.node)
            continue
          }
          if (w.index !== undefined && w.inWhole !== true && w.filter?.takesAll(childRel) === true) {
            // Walked on its own, once per session, for every snapshot that takes it whole to share.
            const [parent, name] = [current.node, entry.name]
            return Effect.flatMap(walkWhole(w, childAbs, childRel), (node) => {
              parent.dirs.set(name, node)
              return step()
            })
          }
          const child = Tree.node()
          current.node.dirs.set(entry.name, child)
          stack.push({ abs: childAbs, rel: childRel, node: child })
          continue
        }
        if (
          w.filter !== undefined &&
          !(w.inWhole === true ? w.filter.includesBeneathWhole(childRel) : w.filter.includes(childRel))
        ) continue
        if (kind === "link") {
          try {
            const st = w.observe !== undefined ? fs.lstatSync(childAbs, { bigint: true }) : undefined
            const target = fs.readlinkSync(childAbs)
            current.node.symlinks.set(entry.name, target)
            if (w.matched !== undefined) GlobMatches.notePath(w.matched, childRel)
            if (st !== undefined) w.observe!.push(Observation.present("l", childAbs, st, target))
          } catch (e) {
            return Effect.fail(ioError(childAbs, "cannot read symlink")(e))
          }
        } else if (kind === "file") {
          const node = current.node
          const read = readFileNode(w, childAbs)
          if (Effect.isEffect(read)) {
            return Effect.flatMap(read, (file) => {
              if (file !== undefined) added(w, node, entry.name, childRel, file)
              else if (entry.name.includes(REPLACED)) return Effect.fail(notUtf8(childAbs))
              return step()
            })
          }
          if (read !== undefined) added(w, node, entry.name, childRel, read)
          else if (entry.name.includes(REPLACED)) return Effect.fail(notUtf8(childAbs))
        } else {
          return Effect.fail(unsnapshottable(childAbs)())
        }
      }
      // A `node_modules` that holds only what a tool run by hand left (`vitest` in a package without one) is not
      // an input either: the same tree before and after.
      for (let k = visited.length - 1; k >= 0 && heldCaches.size > 0; k--) {
        const n = visited[k]!.node
        for (const [name, child] of n.dirs) {
          if ("dirs" in child && heldCaches.has(child) && Tree.isEmpty(child)) {
            n.dirs.delete(name)
            heldCaches.add(n)
          }
        }
      }
      // Children were visited after their parents: dropping empty ones from the last up leaves no empty directory.
      if (w.filter !== undefined) {
        for (let k = visited.length - 1; k >= 0; k--) {
          const { node: n, rel: at } = visited[k]!
          if (w.inWhole === true || w.filter.takesAll(at)) continue
          for (const [name, child] of n.dirs) {
            if ("dirs" in child && Tree.isEmpty(child)) n.dirs.delete(name)
          }
        }
      }
      return Effect.void
    }
    return step()
  })

/**
 * The first directory above the glob base `segments` (under `root`) that is a symlink, as a path relative to `root`:
 * the system would follow it, and read beyond the workspace what a committed `vendor -> /elsewhere` points at.
 */
const linkAbove = (root: string, segments: ReadonlyArray<string>): string | undefined => {
  let abs = root
  for (let i = 0; i < segments.length - 1; i++) {
    abs = `${abs}/${segments[i]}`
    const st = fs.lstatSync(abs, { throwIfNoEntry: false })
    if (st === undefined || !st.isDirectory()) {
      return st?.isSymbolicLink()
        ? segments.slice(0, i + 1).join("/")
        : undefined
    }
  }
  return undefined
}

/**
 * Walks from one static glob base: a directory is walked, a file or symlink (a literal path) is read. A base below a
 * symlink is refused, never read through it (the base itself may be one: it is taken as the link it is).
 */
const walkFrom = (w: Walk, root: string, start: string, tree: Tree.Node): Effect.Effect<void, StoreError> =>
  Effect.gen(function*() {
    const segments = start.split("/")
    const abs = path.join(root, ...segments)
    const link = linkAbove(root, segments)
    if (link !== undefined) {
      return yield* new StoreError({
        reason: "Unsupported",
        detail: `it is below ${link}, a symlink, which kiln does not follow: an input may name the link, not what is ` +
          "beyond it",
        path: abs
      })
    }
    let st: fs.Stats
    try {
      st = fs.lstatSync(abs)
    } catch (e) {
      if (errnoOf(e) === "ENOENT" || errnoOf(e) === "ENOTDIR") {
        w.observe?.push({ kind: "a", abs })
        return
      }
      return yield* Effect.fail(ioError(abs, "cannot stat")(e))
    }
    const name = segments[segments.length - 1]!
    const holder = Tree.node()
    // What the holder matched counts once it is in the tree.
    const matched = w.matched === undefined ? undefined : GlobMatches.fork(w.matched)
    if (st.isDirectory()) {
      if (w.filter?.prunes(start)) return
      const child = yield* walkWhole({ ...w, matched }, abs, start)
      if ("dirs" in child ? Tree.isEmpty(child) : Digest.isEmpty(child)) return
      holder.dirs.set(name, child)
    } else {
      if (!w.filter!.includes(start)) return
      if (!(yield* readEntry(w, abs, holder, name, "file", unsnapshottable(abs)))) return
      if (matched !== undefined) GlobMatches.notePath(matched, start)
    }
    const parent = Tree.dirAt(tree, segments.slice(0, -1))
    if (parent === undefined) return
    for (const [k, v] of holder.files) parent.files.set(k, v)
    for (const [k, v] of holder.dirs) parent.dirs.set(k, v)
    for (const [k, v] of holder.symlinks) parent.symlinks.set(k, v)
    if (matched !== undefined) GlobMatches.merge(w.matched!, matched)
  })

/**
 * The node of the directory `abs` (a glob's base), walked once per session when the filter takes it whole, as
 * `walkDir` does for the directories it meets.
 */
const walkWhole = (w: Walk, abs: string, rel: string): Effect.Effect<Tree.Node | Digest.Digest, StoreError> =>
  Effect.suspend(() => {
    const whole = w.index?.wholeDirs
    const child = Tree.node()
    if (whole === undefined || w.inWhole === true || w.filter?.takesAll(rel) !== true) {
      return Effect.as(walkDir(w, abs, rel, child), child)
    }
    w.wholes?.add(abs)
    /** This walk took `entry`: what it observed and which globs match in it are this walk's too. */
    const took = (entry: StatIndex.WholeDir) => {
      if (w.observe !== undefined) { for (const o of entry.observations) w.observe.push(o) }
      if (w.matched !== undefined) GlobMatches.noteWhole(w.matched, rel, abs, entry)
      return entry.node
    }
    const known = whole.get(abs)
    if (known !== undefined) return Effect.succeed(took(known))
    const reused = WholeDirs.reuse(w.index!, abs)
    if (reused !== undefined) {
      // A small one's files were stored by the walk that saved it (see `Left`); a store that removed any since has
      // another generation, and the directory is walked again.
      if (
        w.shimRoots !== undefined && WorkspaceSources.holdsAtLeast(reused.observations, WorkspaceSources.LEFT_MIN_FILES)
      ) {
        WorkspaceSources.noteGroup(w.core.sources, abs, reused.observations)
      }
      const entry = {
        node: reused.digest,
        observations: reused.observations,
        standsIn: true,
        ...(reused.savedWalk !== undefined ? { savedWalk: reused.savedWalk } : {})
      }
      whole.set(abs, entry)
      return Effect.succeed(took(entry))
    }
    w.index!.wholesFresh.add(abs)
    const observations: Array<Observation.SnapshotObservation> = []
    const walkedNs = BigInt(Date.now()) * 1_000_000n
    const previous = WholeDirs.previousOf(w.index!, abs)
    const left: Left | undefined = w.shimRoots === undefined ? undefined : { count: 0, read: [], known: [] }
    const hashed = left !== undefined ? hashAhead(w, abs, rel, previous) : undefined
    const inner: Walk = {
      ...w,
      observe: observations,
      inWhole: true,
      matched: undefined,
      previous,
      left,
      ...(hashed !== undefined ? { hashed: { root: abs, files: hashed } } : {})
    }
    return Effect.flatMap(walkDir(inner, abs, rel, child), () => {
      // Its tree is the directory on disk, empty directories included (see `walkDir`): it may stand in for its tree
      // unless a path changed so recently that another change could leave its stat as it is.
      const settled = observations.every((o) => o.kind === "a" || !StatIndex.racyAt(o, walkedNs))
      const entry = { node: child, observations, standsIn: settled }
      const large = left !== undefined && left.count >= WorkspaceSources.LEFT_MIN_FILES
      // A small one is stored below; where the walk took some of its files by saved hashes, they are read from here.
      if (left !== undefined && (large || left.known.length > 0)) {
        WorkspaceSources.noteGroup(w.core.sources, abs, observations)
      }
      whole.set(abs, entry)
      if (left === undefined || large) return Effect.succeed(took(entry))
      // Small: stored as any input is, with what the snapshot stores.
      for (const e of left.read) {
        w.batch.entries.push(e)
        w.batch.bytes += e.value.length
      }
      const stored = TreeBlobs.fillFromSources(w.core, left.known)
      return Effect.as(w.batch.bytes >= FLUSH_BYTES ? Effect.zipRight(flush(w), stored) : stored, took(entry))
    })
  })

/**
 * Snapshots the directory `root` (optionally filtered by globs) into the store and returns its digest.
 *
 * @internal
 */
export const snapshot = (
  core: Core.Core,
  root: string,
  globs: ReadonlyArray<string> = [],
  index?: StatIndex.StatIndex
): Effect.Effect<Digest.Digest, StoreError> =>
  Effect.gen(function*() {
    const abs = path.resolve(root)
    const st = yield* Effect.try({ try: () => fs.statSync(abs), catch: ioError(abs, "cannot snapshot") })
    if (!st.isDirectory()) {
      return yield* new StoreError({ reason: "Io", detail: "cannot snapshot: not a directory", path: abs })
    }
    const w: Walk = { core, filter: filterOf(globs), index, batch: newBatch(), shimRoots: Shims.rootsOf(abs) }
    const tree = Tree.node()
    yield* walkRoot(w, abs, tree)
    return yield* flushAndFinish(w, tree)
  }).pipe(Effect.ensuring(Effect.sync(() => StatIndex.settled(index))))

const walkRoot = (w: Walk, abs: string, tree: Tree.Node): Effect.Effect<void, StoreError> => {
  const starts = w.filter?.starts
  return starts === undefined
    ? walkDir(w, abs, "", tree)
    : Effect.forEach(starts, (start) => walkFrom(w, abs, start, tree), { discard: true })
}

/** What a request that does not observe is given: one empty array for all of them. */
const NONE: Array<Observation.SnapshotObservation> = []

/**
 * {@link snapshot} of the directory `root` for each of many glob sets (every process's own inputs, at the start of a
 * run), storing what they read together: one commit per shard for all of them, where a snapshot each cost its own
 * commit in every shard it touched (seven a process, in a cold run of small processes), and the engine's thread
 * waited on them. Each snapshot succeeds or fails on its own; a failure to store fails them all.
 *
 * @internal
 */
export const snapshotMany = (
  core: Core.Core,
  root: string,
  requests: ReadonlyArray<SnapshotRequest>,
  index?: StatIndex.StatIndex
): Effect.Effect<Array<Either.Either<Snapshot, StoreError>>, StoreError> =>
  Effect.gen(function*() {
    const abs = path.resolve(root)
    const st = yield* Effect.try({ try: () => fs.statSync(abs), catch: ioError(abs, "cannot snapshot") })
    if (!st.isDirectory()) {
      return yield* new StoreError({ reason: "Io", detail: "cannot snapshot: not a directory", path: abs })
    }
    const batch = newBatch()
    const observed = requests.map((r) => r.observe === true ? [] : NONE)
    const wholes = requests.map(() => new Set<string>())
    const filters = requests.map((r) => filterOf(r.globs))
    const matched = filters.map((f) => f === undefined ? undefined : GlobMatches.make(f))
    const trees = yield* Effect.forEach(requests, (_, i) => {
      const tree = Tree.node()
      const observe = observed[i] === NONE ? undefined : observed[i]
      const w: Walk = {
        core,
        filter: filters[i],
        index,
        observe,
        batch,
        wholes: wholes[i]!,
        matched: matched[i],
        shimRoots: Shims.rootsOf(abs)
      }
      return Effect.either(Effect.as(walkRoot(w, abs, tree), tree))
    })
    // Directories taken whole are the same nodes in many trees: each is encoded once (see `Tree.Known`).
    const known = index === undefined ? undefined : { stored: index.encoded, pending: new Map() }
    const encoded = trees.map((t) => Either.flatMap(t, (tree) => Tree.encode(tree, known)))
    const seen = new Set<string>()
    const directories: Array<Sharded.Entry> = []
    for (const e of encoded) {
      if (Either.isLeft(e)) continue
      for (const d of e.right.pending) {
        if (seen.has(d.hash)) continue
        seen.add(d.hash)
        directories.push(d)
      }
    }
    yield* Sharded.putBatches(
      [{ shards: core.files, entries: batch.entries }, { shards: core.directories, entries: directories }],
      Core.leaseUntil(core),
      core.leaseTimeMs
    )
    if (known !== undefined) { for (const [n, d] of known.pending) index!.encoded.set(n, d) }
    return encoded.map((e, i) => {
      if (Either.isRight(e)) Tree.remember(core, e.right)
      return Either.map(e, (x): Snapshot => ({
        digest: x.digest,
        observations: observed[i]!,
        wholeDirectories: index === undefined ? [] : WholeDirs.standingIn(index, wholes[i]!),
        unmatched: matched[i] === undefined ? [] : GlobMatches.unmatched(matched[i]!)
      }))
    })
  }).pipe(Effect.ensuring(Effect.sync(() => StatIndex.settled(index))))

/**
 * Reads one entry (file, symlink or whole directory) at `abs` into a tree node's slot `name`. Returns false when the
 * path does not exist; fails with `wrong(stat)` when it is of another kind than `expect` (capture says which output
 * it is).
 *
 * @internal
 */
export const readEntry = <E>(
  w: Walk,
  abs: string,
  into: Tree.Node,
  name: string,
  expect: "file" | "directory",
  wrong: (st: fs.Stats) => E
): Effect.Effect<boolean, StoreError | E> =>
  Effect.gen(function*() {
    let st: fs.Stats
    try {
      st = fs.lstatSync(abs)
    } catch (e) {
      if (errnoOf(e) === "ENOENT" || errnoOf(e) === "ENOTDIR") return false
      return yield* Effect.fail(new StoreError({ reason: "Io", detail: `cannot stat: ${describeErrno(e)}`, path: abs }))
    }
    if (st.isSymbolicLink()) {
      const seen = w.observe !== undefined
        ? yield* Effect.try({ try: () => fs.lstatSync(abs, { bigint: true }), catch: ioError(abs, "cannot stat") })
        : undefined
      const target = yield* Effect.try({ try: () => fs.readlinkSync(abs), catch: ioError(abs, "cannot read symlink") })
      into.symlinks.set(name, target)
      if (seen !== undefined) w.observe!.push(Observation.present("l", abs, seen, target))
      return true
    }
    if (expect === "file" ? !st.isFile() : !st.isDirectory()) return yield* Effect.fail(wrong(st))
    if (expect === "file") {
      const file = yield* run(readFileNode(w, abs))
      if (file === undefined) return false
      into.files.set(name, file)
      return true
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
export const newWalk = (core: Core.Core, read?: Array<readonly [string, Digest.Digest]>): Walk => ({
  core,
  filter: undefined,
  read,
  batch: newBatch()
})

/**
 * Stores the walk's last files and the tree's directories, and returns the root digest. The two go to different
 * LMDB environments; their commits are waited for together, in one wait rather than a fiber each (forking and
 * joining two fibers cost the engine's thread more than the writes, for every process's inputs and outputs).
 *
 * @internal
 */
export const flushAndFinish = (w: Walk, tree: Tree.Node): Effect.Effect<Digest.Digest, StoreError> =>
  Effect.suspend(() => {
    const encoded = Tree.encode(tree)
    if (Either.isLeft(encoded)) return Effect.fail(encoded.left)
    const files = w.batch.entries
    w.batch.entries = []
    w.batch.bytes = 0
    return Effect.as(
      Effect.zipRight(
        Sharded.putBatches(
          [
            { shards: w.core.files, entries: files },
            { shards: w.core.directories, entries: encoded.right.pending }
          ],
          Core.leaseUntil(w.core),
          w.core.leaseTimeMs
        ),
        Effect.sync(() => Tree.remember(w.core, encoded.right))
      ),
      encoded.right.digest
    )
  })

/**
 * Adds blobs to what the walk stores when it finishes (a process's logs, stored with its outputs); says their
 * digests. Large ones go to the large-file folder first.
 *
 * @internal
 */
export const addBlobs = (w: Walk, blobs: ReadonlyArray<Uint8Array>): Effect.Effect<Array<Digest.Digest>, StoreError> =>
  Effect.suspend(() => {
    const digests = blobs.map(Digest.ofBytes)
    const large: Array<readonly [Digest.Digest, Uint8Array]> = []
    blobs.forEach((value, i) => {
      const digest = digests[i]!
      if (Digest.isEmpty(digest)) return
      if (value.length >= LargeFiles.THRESHOLD) {
        large.push([digest, value])
      } else {
        w.batch.entries.push({ hash: digest.hash, value })
        w.batch.bytes += value.length
      }
    })
    return large.length === 0 ? Effect.succeed(digests) : Effect.as(
      Effect.forEach(
        large,
        ([d, v]) => LargeFiles.putBytes(w.core.large, d, v, Core.leaseUntil(w.core), w.core.leaseTimeMs),
        { discard: true }
      ),
      digests
    )
  })
