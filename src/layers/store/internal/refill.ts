/**
 * Materializing a tree into a directory that holds something already (a used sandbox). What is there and wanted stays; what is there and not wanted is reused
 * (a directory renamed to where a wanted one goes, a file renamed to a wanted path and rewritten in place) or removed;
 * so the sandbox ends up holding exactly what a fresh one would, with few inodes made or freed. On a file system
 * whose inode allocation is slow (an ext4 after heavy churn) that is most of a small process's sandbox cost: making
 * and freeing inodes costs several times what renaming and rewriting does (docs/bench-log.md). Bazel reuses sandbox directories likewise
 * (`--reuse_sandbox_directories`, on by default since Bazel 7).
 *
 * Nothing a process left is trusted. The sandbox is listed afresh when it is refilled (never from a listing made
 * earlier); one with a file system mounted in it (a bind mount of the same one too) is not kept for reuse, nor
 * refilled. A file stays only when its
 * bytes, mode and owner are the wanted ones (its times are set to now, as a fresh one's would be); a file is written
 * in place only when it has a single link (a hard link the process made to a file elsewhere must not change, nor may
 * the store's own copy of a large file, which sandboxes hard-link); a directory is reused only if it is one (not a
 * symlink to one) with the wanted owner, and gets a new directory's mode back before anything is made in it (a
 * setgid bit would be inherited); nothing is followed through a symlink. Any surprise (an entry that changed since
 * the listing, a read-only directory as a non-root user) makes the whole attempt {@link Unusable}, and the caller
 * empties the sandbox and writes the tree afresh.
 *
 * Like Bazel's, this does not defend against a process that escaped its process group and keeps working in the
 * sandbox while it is refilled: the group is killed before a sandbox is reused, and such a process could write
 * anywhere its user can anyway. `kiln run --reuse-sandboxes off` turns reuse off for whoever runs such tools.
 *
 * @internal
 */
import * as Effect from "effect/Effect"
import * as fs from "node:fs"
import * as path from "node:path"
import * as Digest from "../../../domain/Digest.js"
import type * as Directory from "../../../domain/Directory.js"
import type { StoreError } from "../../../domain/StoreErrors.js"
import { type Kind, scan } from "../../../os/DirScan.js"
import { refuseMounted } from "../../../os/mounts/Mounts.js"
import { removeTree } from "../../../os/RemoveTree.js"
import { writeAll } from "../../../os/WriteAll.js"
import * as Core from "./core.js"
import * as LargeFiles from "./largeFiles.js"

/**
 * The sandbox could not be refilled (an error of the file system, with what it was doing); the caller empties it and
 * writes the tree afresh.
 *
 * @internal
 */
export class Unusable {
  readonly _tag = "Unusable"
  constructor(readonly cause: unknown) {}
}

/** Writes a large file (linked or copied from the store) where nothing stands. */
export type WriteLarge = (
  p: string,
  rel: string,
  file: Directory.FileNode
) => Effect.Effect<void, Digest.MissingDigest | StoreError>

const parentOf = (rel: string) => {
  const i = rel.lastIndexOf("/")
  return i < 0 ? "" : rel.slice(0, i)
}

const depth = (rel: string) => rel.split("/").length

/** Renames every key at or under `from` to the same place under `to`. */
const moveKeys = (state: Map<string, Kind>, from: string, to: string) => {
  const moved: Array<[string, Kind]> = []
  for (const [rel, kind] of state) {
    if (rel === from || rel.startsWith(`${from}/`)) moved.push([rel, kind])
  }
  for (const [rel] of moved) state.delete(rel)
  for (const [rel, kind] of moved) state.set(to + rel.slice(from.length), kind)
}

const dropKeys = (state: Map<string, Kind>, at: string) => {
  state.delete(at)
  for (const rel of [...state.keys()]) if (rel.startsWith(`${at}/`)) state.delete(rel)
}

interface Wanted {
  readonly dirs: Set<string>
  readonly files: Array<[string, Directory.FileNode]>
  readonly links: Array<[string, string]>
  /**
   * Directories not in the tree that may stay if they are there (the runner's preparation makes them next), rather
   * than be removed for it to make again. Never made here: the preparation does, in its own order.
   */
  readonly keepable: Set<string>
}

const wantedOf = (tree: ReadonlyArray<readonly [string, Directory.Directory]>, keepDirs: ReadonlyArray<string>) => {
  const wanted: Wanted = { dirs: new Set(), files: [], links: [], keepable: new Set() }
  const leaves = new Set<string>()
  for (const [rel, dir] of tree) {
    const at = (name: string) => rel === "" ? name : `${rel}/${name}`
    for (const d of dir.directories) wanted.dirs.add(at(d.name))
    for (const f of dir.files) {
      wanted.files.push([at(f.name), f])
      leaves.add(at(f.name))
    }
    for (const s of dir.symlinks) {
      wanted.links.push([at(s.name), s.target])
      leaves.add(at(s.name))
    }
  }
  // Through a symlink of the tree, what the preparation makes depends on which directories already exist (a fresh
  // sandbox has none of these): with one, nothing extra is kept.
  if (wanted.links.length > 0) return wanted
  for (const keep of keepDirs) {
    const chain: Array<string> = []
    for (let d = keep; d !== ""; d = parentOf(d)) chain.push(d)
    // A directory the tree has a file at is not kept: the preparation reports the clash.
    if (chain.every((d) => !leaves.has(d))) {
      for (const d of chain) if (!wanted.dirs.has(d)) wanted.keepable.add(d)
    }
  }
  return wanted
}

/**
 * Opens an existing file of one link for reading and writing, making it owner-readable and writable first if need
 * be; says its mode then.
 */
const openInPlace = (p: string, st: fs.Stats): { readonly fd: number; readonly mode: number } => {
  let mode = st.mode & 0o7777
  if ((mode & 0o600) !== 0o600) {
    mode |= 0o600
    fs.chmodSync(p, mode)
  }
  return { fd: fs.openSync(p, fs.constants.O_RDWR | fs.constants.O_NOFOLLOW), mode }
}

const sameBytes = (fd: number, bytes: Uint8Array): boolean => {
  // One byte more than wanted: a file that grew since its stat is not the same.
  const got = Buffer.allocUnsafe(bytes.length + 1)
  let n = 0
  for (;;) {
    const r = fs.readSync(fd, got, n, got.length - n, n)
    if (r === 0) break
    n += r
    if (n === got.length) break
  }
  return n === bytes.length && Buffer.compare(got.subarray(0, n), bytes) === 0
}

/** Makes the file at `p` (stat `st`, one link) hold `bytes` with `mode`, writing only what differs. */
const writeInPlace = (p: string, st: fs.Stats, bytes: Uint8Array, mode: number) => {
  const { fd, mode: current } = openInPlace(p, st)
  try {
    if (st.size !== bytes.length || !sameBytes(fd, bytes)) {
      // Written over, then cut to length: truncating to zero first frees the file's blocks only for the write to
      // allocate them again.
      writeAll(fd, bytes, bytes.length, 0)
      if (st.size > bytes.length) fs.ftruncateSync(fd, bytes.length)
    } else {
      // Written now, as in a fresh sandbox: a tool that compares its inputs' times (make) must not find this one
      // older than the others by however long it sat here.
      const now = Date.now() / 1000
      fs.futimesSync(fd, now, now)
    }
    if (current !== mode) fs.fchmodSync(fd, mode)
  } finally {
    fs.closeSync(fd)
  }
}

const writeFresh = (p: string, bytes: Uint8Array, mode: number) => {
  const fd = fs.openSync(p, "wx", mode)
  try {
    writeAll(fd, bytes)
  } finally {
    fs.closeSync(fd)
  }
}

const attempt = <A>(f: () => A): Effect.Effect<A, Unusable> => Effect.try({ try: f, catch: (e) => new Unusable(e) })

/** @internal */
export const MAX_ENTRIES = 1024

/** One refill's state: what is wanted, what the destination holds now, and what may be reused. */
interface Refilling {
  readonly core: Core.Core
  readonly dest: string
  readonly umask: number
  /** What a fresh directory gets: its maker's mode, and a setgid parent's bit. */
  readonly dirMode: number
  /** What a fresh entry gets: its maker's owner, and a setgid parent's group. */
  readonly owner: { readonly uid: number; readonly gid: number }
  readonly wanted: ReturnType<typeof wantedOf>
  readonly wantedFiles: ReadonlySet<string>
  readonly wantedLinks: ReadonlyMap<string, string>
  /** What the destination holds now, kept up to date as entries are moved, made and removed. */
  readonly state: Map<string, Kind>
  /** Directories that are there and not wanted, whose parent is wanted: each can become a wanted one. */
  readonly spare: Array<string>
  /** Files that are there and not wanted where they are: each can become a wanted file. */
  readonly donors: Array<string>
  /** Directories kept or moved into place, whose times are set last. */
  readonly reused: Array<string>
  readonly writeLarge: WriteLarge
}

/** `rel` is a tree's path or a listing's (no `.`, `..` or empty segment): joined with "/", not normalized again. */
const absOf = (r: Refilling, rel: string) => rel === "" ? r.dest : `${r.dest}/${rel}`
const ownedRight = (r: Refilling, st: fs.Stats) => st.uid === r.owner.uid && st.gid === r.owner.gid
const stays = (r: Refilling, d: string) => r.wanted.dirs.has(d) || r.wanted.keepable.has(d)

/** The refill of `dest`, or why it cannot be: not ours, or more than {@link MAX_ENTRIES} entries. */
const start = (
  core: Core.Core,
  tree: ReadonlyArray<readonly [string, Directory.Directory]>,
  dest: string,
  keepDirs: ReadonlyArray<string>,
  writeLarge: WriteLarge
): Refilling | Unusable => {
  const present = scan(dest, MAX_ENTRIES)
  if (present === undefined) return new Unusable(new Error("too many entries, or not all readable"))
  const umask = process.umask()
  // As in a sandbox new under the same root. (The process may have changed the sandbox's own setgid bit.)
  let owner: { readonly uid: number; readonly gid: number }
  let setgid: number
  try {
    // (The sandbox root may be a symlink to where sandboxes are made.)
    const root = fs.statSync(path.dirname(dest))
    const self = fs.lstatSync(dest)
    setgid = root.mode & 0o2000
    owner = { uid: process.geteuid?.() ?? self.uid, gid: setgid !== 0 ? root.gid : process.getegid?.() ?? self.gid }
    if (!self.isDirectory() || self.uid !== owner.uid || self.gid !== owner.gid) {
      throw new Error(`${dest} is not a directory of ours`)
    }
    if ((self.mode & 0o2000) !== setgid) fs.chmodSync(dest, (self.mode & 0o5777) | setgid)
  } catch (e) {
    return new Unusable(e)
  }
  const wanted = wantedOf(tree, keepDirs)
  return {
    core,
    dest,
    umask,
    dirMode: (0o777 & ~umask) | setgid,
    owner,
    wanted,
    wantedFiles: new Set(wanted.files.map(([rel]) => rel)),
    wantedLinks: new Map(wanted.links),
    state: new Map(present),
    spare: [],
    donors: [],
    reused: [],
    writeLarge
  }
}

const addSpares = (r: Refilling, under: string) => {
  for (const [rel, kind] of r.state) {
    if (kind === "dir" && !stays(r, rel) && parentOf(rel) === under) r.spare.push(rel)
  }
}

/** A directory kept or moved into place: one indeed, with the wanted owner, and a new one's mode and times. */
const reuseDir = (r: Refilling, d: string) => {
  const st = fs.lstatSync(absOf(r, d))
  if (!st.isDirectory() || !ownedRight(r, st)) throw new Error(`${d} is not a directory of ours any more`)
  // Before anything is made in it: a setgid bit (or a lack of one) is inherited.
  if ((st.mode & 0o7777) !== r.dirMode) fs.chmodSync(absOf(r, d), r.dirMode)
  r.reused.push(d)
}

/** Every wanted directory in place: kept, a spare renamed there, or made. */
const placeDirectories = (r: Refilling) =>
  attempt(() => {
    const { spare, state, wanted } = r
    // A directory to keep is kept only under one that stays (its parent, made here, would not hold it).
    for (const d of [...wanted.keepable].sort((a, b) => depth(a) - depth(b))) {
      if (state.get(d) !== "dir" || (parentOf(d) !== "" && state.get(parentOf(d)) !== "dir")) {
        wanted.keepable.delete(d)
      } else if (parentOf(d) !== "" && !stays(r, parentOf(d))) {
        wanted.keepable.delete(d)
      }
    }
    for (const [rel, kind] of state) {
      if (kind === "dir" && !stays(r, rel) && (parentOf(rel) === "" || stays(r, parentOf(rel)))) spare.push(rel)
    }
    for (const d of [...wanted.keepable].sort((a, b) => depth(a) - depth(b))) reuseDir(r, d)
    for (const d of [...wanted.dirs].sort((a, b) => depth(a) - depth(b))) {
      const kind = state.get(d)
      if (kind === "dir") {
        // A process may have changed a directory's mode (`chmod -R a-w`, as Go's module cache does).
        reuseDir(r, d)
        continue
      }
      if (kind !== undefined) {
        fs.unlinkSync(absOf(r, d))
        state.delete(d)
      }
      // A spare beside it first (`src/p1` for `src/p2`: its files are likely where the new ones go), else any.
      let i = spare.findIndex((s) => parentOf(s) === parentOf(d))
      if (i < 0) i = spare.length - 1
      if (i < 0) {
        fs.mkdirSync(absOf(r, d))
        state.set(d, "dir")
        continue
      }
      const from = spare.splice(i, 1)[0]!
      fs.renameSync(absOf(r, from), absOf(r, d))
      moveKeys(state, from, d)
      addSpares(r, d)
      reuseDir(r, d)
    }
  })

/** Removes whatever is at `rel`. */
const clear = (r: Refilling, rel: string) => {
  const kind = r.state.get(rel)
  if (kind === undefined) return
  if (kind === "dir") {
    removeTree(absOf(r, rel))
    dropKeys(r.state, rel)
    const i = r.spare.indexOf(rel)
    if (i >= 0) r.spare.splice(i, 1)
  } else {
    fs.unlinkSync(absOf(r, rel))
    r.state.delete(rel)
  }
}

const usable = (r: Refilling, st: fs.Stats) => st.isFile() && st.nlink === 1 && ownedRight(r, st)

/** A file of one link at `rel` to write in place (a donor renamed there if need be), or none. */
const slotFor = (r: Refilling, rel: string): fs.Stats | undefined => {
  if (r.state.get(rel) === "file") {
    const st = fs.lstatSync(absOf(r, rel))
    if (usable(r, st)) return st
  }
  clear(r, rel)
  while (r.donors.length > 0) {
    const donor = r.donors.pop()!
    if (r.state.get(donor) !== "file") continue
    const st = fs.lstatSync(absOf(r, donor))
    if (!usable(r, st)) {
      clear(r, donor)
      continue
    }
    fs.renameSync(absOf(r, donor), absOf(r, rel))
    r.state.delete(donor)
    r.state.set(rel, "file")
    return st
  }
  return undefined
}

/** One wanted file in place: rewritten in a slot, written afresh, or (a large one) linked from the store. */
const placeFile = (
  r: Refilling,
  [rel, file]: readonly [string, Directory.FileNode]
): Effect.Effect<void, Digest.MissingDigest | StoreError | Unusable> => {
  const p = absOf(r, rel)
  if (file.digest.sizeBytes >= LargeFiles.THRESHOLD) {
    return Effect.zipRight(
      attempt(() => clear(r, rel)),
      Effect.tap(r.writeLarge(p, rel, file), () => void r.state.set(rel, "file"))
    )
  }
  const mode = (file.isExecutable ? 0o755 : 0o644) & ~r.umask
  return Effect.flatMap(
    Core.withFile(r.core, file.digest, (bytes): boolean | Unusable => {
      if (bytes === undefined) return false
      try {
        const st = slotFor(r, rel)
        if (st === undefined) {
          writeFresh(p, bytes, mode)
          r.state.set(rel, "file")
        } else {
          writeInPlace(p, st, bytes, mode)
        }
        return true
      } catch (e) {
        return new Unusable(e)
      }
    }),
    (done): Effect.Effect<void, Digest.MissingDigest | Unusable> =>
      done instanceof Unusable
        ? Effect.fail(done)
        : done
        ? Effect.void
        : Effect.fail(new Digest.MissingDigest({ digest: file.digest, kind: "file" }))
  )
}

/** The wanted symlinks in place, and everything not wanted gone. */
const placeLinksAndSweep = (r: Refilling) =>
  attempt(() => {
    const { state } = r
    const now = Date.now() / 1000
    for (const [rel, target] of r.wanted.links) {
      if (state.get(rel) === "other") {
        const st = fs.lstatSync(absOf(r, rel))
        if (st.isSymbolicLink() && ownedRight(r, st) && fs.readlinkSync(absOf(r, rel)) === target) {
          fs.lutimesSync(absOf(r, rel), now, now)
          continue
        }
      }
      clear(r, rel)
      fs.symlinkSync(target, absOf(r, rel))
      state.set(rel, "other")
    }
    for (const s of r.spare.splice(0)) {
      removeTree(absOf(r, s))
      dropKeys(state, s)
    }
    for (const [rel, kind] of [...state]) {
      const keep = kind === "dir"
        ? stays(r, rel)
        : kind === "file"
        ? r.wantedFiles.has(rel)
        : r.wantedLinks.has(rel)
      if (!keep) clear(r, rel)
    }
    // Last, as what was done in them changed their times anyway.
    for (const d of r.reused) fs.utimesSync(absOf(r, d), now, now)
  })

/**
 * Makes `dest`, whatever it holds (up to {@link MAX_ENTRIES} entries), hold exactly `tree` (its directories as
 * `Core.walkTree` visits them), as a fresh materialization would; of the directories `keepDirs` (which the caller
 * makes next), those that are there stay.
 *
 * @internal
 */
export const refill = (
  core: Core.Core,
  tree: ReadonlyArray<readonly [string, Directory.Directory]>,
  dest: string,
  keepDirs: ReadonlyArray<string>,
  writeLarge: WriteLarge
): Effect.Effect<void, Digest.MissingDigest | StoreError | Unusable> =>
  Effect.suspend(() => {
    const r = start(core, tree, dest, keepDirs, writeLarge)
    if (r instanceof Unusable) return Effect.fail(r)
    return placeDirectories(r).pipe(
      Effect.zipRight(Effect.sync(() => {
        for (const [rel, kind] of r.state) if (kind === "file" && !r.wantedFiles.has(rel)) r.donors.push(rel)
      })),
      Effect.zipRight(Effect.forEach(r.wanted.files, (f) => placeFile(r, f), { discard: true })),
      Effect.zipRight(placeLinksAndSweep(r))
    )
  })

/**
 * Removes everything inside `dest` (read-only trees too), leaving it empty.
 *
 * @internal
 */
export const empty = (dest: string): void => {
  refuseMounted(dest)
  for (const name of fs.readdirSync(dest)) removeTree(path.join(dest, name))
}
