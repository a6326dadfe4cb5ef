/**
 * The stat index: a file's digest is reused while its `(dev, ino, size, mtime, ctime, mode)` is unchanged since it
 * was hashed, as git's index does, so a run where nothing changed reads no file content. A file modified within
 * the timestamp granularity of the moment the index was saved is "racily clean" (a write in the same tick would
 * not change its mtime) and is hashed again. Persisted per workspace in the store; a lost or stale index only costs
 * hashing.
 *
 * @internal
 */
import { createHash } from "node:crypto"
import * as fs from "node:fs"
import * as path from "node:path"
import type * as Digest from "../../../../domain/Digest.js"
import * as AtomicFile from "../../../../os/AtomicFile.js"
import { mkdirp } from "../../../../os/Mkdirp.js"
import * as RawStat from "../../../../os/RawStat.js"
import * as TextFile from "../../../../os/TextFile.js"
import * as Generation from "../../Generation.js"
import type { SnapshotObservation } from "../../SnapshotObservation.js"
import type { HashProgress, SessionOptions, SnapshotSession } from "../../SnapshotSession.js"
import type * as Tree from "../tree.js"
import * as WholeDirs from "./wholeDirs.js"

/**
 * A file's stat and the hash of what the store took for it; `storedSize` only where that is not its bytes on disk (a
 * `.bin` shim, taken as it reads in the sandbox: see `Shims.ts`), the size of what it took.
 */
type Entry = [
  dev: string,
  ino: string,
  size: number,
  mtimeNs: string,
  ctimeNs: string,
  mode: number,
  hash: string,
  storedSize?: number
]

/** @internal */
export interface Listing {
  readonly entries: Array<fs.Dirent>
  readonly st: fs.BigIntStats
}

/** What is read from disk, once it is needed. */
interface Loaded {
  /** When the loaded index was saved (ns since the epoch), or 0. */
  readonly savedAtNs: bigint
  readonly entries: Map<string, Entry>
}

/**
 * Files a session hashes before it reads the index from disk. A run the run memo vouched for reads few files (an
 * edit run: the inputs of what changed), and hashing a handful of small files costs less than reading and
 * rewriting an index of every input of the workspace; past this many, the index is read.
 */
const UNLOADED_HASHES = 16

/** @internal */
export interface StatIndex {
  readonly file: string
  /** Undefined until a lookup needs it (see UNLOADED_HASHES). */
  loaded: Loaded | undefined
  /** Hashes taken before the index was loaded: recorded if it is loaded after all, else left to the run memo. */
  readonly unrecorded: Array<[abs: string, st: fs.BigIntStats, hash: string, storedSize: number | undefined]>
  /** Lookups answered "hash it" because the index was not loaded (not a sign of a change). */
  unloadedMisses: number
  dirty: boolean
  /** Files hashed during this session (absent from the index, or changed): a sign that something will run. */
  hashed: number
  /**
   * Directory listings read during this session (one walk of a directory per run, however many snapshots), each
   * with the directory's stat taken just before it was read: the run memo's evidence that the listing is unchanged.
   */
  readonly dirs: Map<string, Listing>
  /**
   * Directories a snapshot took whole (every entry under them, by a glob like `node_modules/**`), read once per
   * session: every process whose globs take the same directory whole shares the walk, its node and what it observed.
   */
  readonly wholeDirs: Map<string, WholeDir>
  /** Tree nodes of this session already encoded and stored, with their digests (see `Tree.encode`). */
  readonly encoded: WeakMap<Tree.Node, Digest.Digest>
  /** Directories walked whole afresh this session, or whose saved walk was read again: saved anew (`wholeDirs.ts`). */
  readonly wholesFresh: Set<string>
  /**
   * Files looked up or recorded by a walk outside a directory taken whole (a glob over part of it, a file named
   * exactly): kept in the index even where they are under one (see {@link save}).
   */
  readonly touched: Set<string>
  /** The store's generation when the session began (see `wholeDirs.ts`). */
  readonly generation: string
  /** The workspace, resolved: what the paths given to `progress` are relative to. */
  readonly workspace: string
  readonly progress: HashProgress | undefined
  /** See `SessionOptions.vouched`. */
  readonly vouched: ReadonlySet<string>
}

/** A directory a session walked whole (see `StatIndex.wholeDirs`). @internal */
export interface WholeDir {
  /** Its node, walked this session, or its digest, taken from the last session's (see `wholeDirs.ts`). */
  readonly node: Tree.Node | Digest.Digest
  readonly observations: ReadonlyArray<SnapshotObservation>
  /**
   * Whether no path of it had changed within a timestamp tick of its walk (a change in the same tick would not move
   * its stat). Its tree is what is on disk, empty directories included (see `snapshot.walkDir`): the directory itself
   * may then stand in for its tree while its paths still hold.
   */
  readonly standsIn: boolean
  /** The key of the saved walk it was taken from as it was saved (see `wholeDirs.reuse`), if it was. */
  readonly savedWalk?: string
}

/**
 * A session over the workspace's index. With `lazy`, the index is read only once a few files had to be hashed
 * without it (see UNLOADED_HASHES): for a run whose other processes the run memo vouches for.
 *
 * @internal
 */
export const open = (storeRoot: string, workspace: string, options?: SessionOptions): StatIndex => {
  const file = path.join(
    storeRoot,
    "stat-index",
    `${createHash("sha256").update(path.resolve(workspace)).digest("hex").slice(0, 24)}.json`
  )
  const index: StatIndex = {
    file,
    loaded: undefined,
    unrecorded: [],
    unloadedMisses: 0,
    dirty: false,
    hashed: 0,
    dirs: new Map(),
    wholeDirs: new Map(),
    encoded: new WeakMap(),
    wholesFresh: new Set(),
    touched: new Set(),
    generation: Generation.read(storeRoot),
    workspace: path.resolve(workspace),
    progress: options?.progress,
    vouched: options?.vouched ?? new Set()
  }
  if (options?.lazy !== true) load(index)
  return index
}

/** The index behind each session handed out (`SnapshotSession.open`): a session is a handle, not the index. */
const indexes = new WeakMap<SnapshotSession, StatIndex>()

/** @internal */
export const bind = (session: SnapshotSession, index: StatIndex): void => {
  indexes.set(session, index)
}

/**
 * The index behind a session. A session is made only by `SnapshotSession.open`; any other object is a defect.
 *
 * @internal
 */
export const of = (session: SnapshotSession): StatIndex => {
  const index = indexes.get(session)
  if (index === undefined) throw new Error("not a snapshot session a store opened")
  return index
}

/**
 * 2: a `.bin` shim's hash is of what the store took for it (see `Shims.ts`), not its bytes on disk. 3: tools' caches
 * under `node_modules` left out of the walks it keeps (`snapshotFilter.TOOL_CACHES`).
 */
const FORMAT = 3

const load = (index: StatIndex): Loaded => {
  if (index.loaded !== undefined) return index.loaded
  let savedAtNs = 0n
  const entries = new Map<string, Entry>()
  try {
    const json = JSON.parse(TextFile.read(index.file)) as {
      v?: number
      savedAtNs: string
      entries: Record<string, Entry>
    }
    if (json.v !== FORMAT) throw new Error("an index of another format")
    savedAtNs = BigInt(json.savedAtNs)
    for (const [k, v] of Object.entries(json.entries)) entries.set(k, v)
  } catch {
    // No index yet, or a damaged one: everything is hashed and the index rebuilt.
  }
  index.loaded = { savedAtNs, entries }
  for (const [abs, st, hash, storedSize] of index.unrecorded.splice(0)) record(index, abs, st, hash, storedSize)
  return index.loaded
}

const key = (
  st: fs.BigIntStats
): [string, string, number, string, string, number] => [
  String(st.dev),
  String(st.ino),
  Number(st.size),
  String(st.mtimeNs),
  String(st.ctimeNs),
  Number(st.mode)
]

/**
 * Whether the index vouches for any of `paths` as they are now (read now if it was not yet): an entry whose stat is
 * the file's. Then a walk takes most of their tree by stats rather than by reading it; a tree copied or checked out
 * again where one was has entries for its paths, but none with its new inodes.
 *
 * @internal
 */
export const vouchesForAny = (index: StatIndex, paths: ReadonlyArray<string>): boolean => {
  const { entries } = load(index)
  return paths.some((p) => {
    const e = entries.get(p)
    if (e === undefined) return false
    try {
      const k = key(fs.lstatSync(p, { bigint: true }))
      return k.every((v, i) => e[i] === v)
    } catch {
      return false
    }
  })
}

/**
 * Whether {@link lookup} could vouch for `abs`: false once the index is read and has no entry for it (every file of a
 * first run), when the stat it would need is a system call for nothing.
 *
 * @internal
 */
export const mayKnow = (index: StatIndex, abs: string): boolean =>
  index.loaded === undefined || index.loaded.entries.has(abs)

/**
 * The digest of what the store took for the file at `abs` (its bytes, or a shim's as the sandbox reads it) if its
 * stat is unchanged and not racily clean, else undefined.
 *
 * @internal
 */
export const lookupStored = (
  index: StatIndex,
  abs: string,
  st: fs.BigIntStats,
  inWhole = false
): Digest.Digest | undefined => {
  if (!inWhole) index.touched.add(abs)
  if (index.loaded === undefined && index.unloadedMisses < UNLOADED_HASHES) {
    index.unloadedMisses++
    return undefined
  }
  const { entries, savedAtNs } = load(index)
  const e = entries.get(abs)
  if (e === undefined) return undefined
  const k = key(st)
  for (let i = 0; i < 6; i++) if (e[i] !== k[i]) return undefined
  if (racyAt(st, savedAtNs)) {
    // Saved again (with a later save time), the entry stops being racy; left as it is, it would be hashed on every
    // run, because a file that did not change never makes the index dirty.
    index.dirty = true
    return undefined
  }
  return { hash: e[6], sizeBytes: e[7] ?? Number(st.size) }
}

/**
 * The digest hash of the bytes on disk of the file at `abs` if its stat is unchanged and not racily clean, else
 * undefined (and for a shim the store took otherwise, whose bytes on disk it did not hash).
 *
 * @internal
 */
export const lookup = (index: StatIndex, abs: string, st: fs.BigIntStats): string | undefined => {
  const known = lookupStored(index, abs, st)
  if (known === undefined) return undefined
  return index.loaded?.entries.get(abs)?.[7] === undefined ? known.hash : undefined
}

/** Whether a stat changed within a timestamp tick of `atNs` (see `RawStat.racyAt`). @internal */
export const racyAt = RawStat.racyAt

/**
 * Records that the file at `abs` with the stat `st` was taken as `hash`: its bytes, or with `storedSize`, a shim taken
 * as the sandbox reads it (see `Shims.ts`), of that size.
 *
 * @internal
 */
export const record = (
  index: StatIndex,
  abs: string,
  st: fs.BigIntStats,
  hash: string,
  storedSize?: number,
  inWhole = false
): void => {
  if (!inWhole) index.touched.add(abs)
  if (index.loaded === undefined) {
    index.unrecorded.push([abs, st, hash, storedSize])
    return
  }
  const prev = index.loaded.entries.get(abs)
  const next = (storedSize === undefined ? [...key(st), hash] : [...key(st), hash, storedSize]) as Entry
  if (prev !== undefined && prev.length === next.length && prev.every((v, i) => v === next[i])) return
  index.loaded.entries.set(abs, next)
  index.dirty = true
}

/** Whether a file had to be hashed because it is new or changed, as far as the index can tell. @internal */
export const countHashed = (index: StatIndex, abs: string, bytes: number): void => {
  if (index.loaded !== undefined) index.hashed++
  if (index.progress === undefined) return
  const under = abs.startsWith(index.workspace + path.sep)
  index.progress.hashed(under ? abs.slice(index.workspace.length + 1) : abs, bytes)
}

/** A snapshot over the index finished: its progress is told. @internal */
export const settled = (index: StatIndex | undefined): void => index?.progress?.settled()

/** Lists a directory once per session. @internal */
export const readdir = (index: StatIndex, abs: string): Listing => {
  const cached = index.dirs.get(abs)
  if (cached !== undefined) return cached
  // Stat first: a change made while the listing is read then shows as a changed stat the next time.
  const st = fs.lstatSync(abs, { bigint: true })
  const listing = { st, entries: fs.readdirSync(abs, { withFileTypes: true }) }
  index.dirs.set(abs, listing)
  return listing
}

/**
 * Whether `abs` is under a directory this session took whole: its files are kept with that directory's saved walk
 * (`wholeDirs.ts`), not here, unless a walk outside it looked them up too, or it is a shim (see `Shims.ts`). (The
 * walk of such a directory records none of the files it leaves in the workspace: an entry made only to be dropped here
 * cost a fresh `node_modules`' walk a tenth of its time.)
 */
const keptElsewhere = (index: StatIndex, abs: string, e: Entry): boolean => {
  // A shim's: what the store took is not its bytes on disk, and only this entry says how large it was.
  if (e[7] !== undefined || index.touched.has(abs) || index.wholeDirs.size === 0) return false
  for (let dir = path.dirname(abs); dir.length >= index.workspace.length; dir = path.dirname(dir)) {
    if (index.wholeDirs.has(dir)) return true
    if (dir === path.dirname(dir)) break
  }
  return false
}

/**
 * Saves the index atomically if anything changed, without the files of directories taken whole (their saved walks
 * hold them); the save time makes later lookups race-safe.
 *
 * @internal
 */
export const save = (index: StatIndex): void => {
  WholeDirs.save(index, index.generation)
  // Never read: nothing it holds changed (what was hashed meanwhile is in the run memo).
  if (index.loaded === undefined) return
  const { entries } = index.loaded
  let dropped = false
  for (const [abs, e] of entries) {
    if (keptElsewhere(index, abs, e)) {
      entries.delete(abs)
      dropped = true
    }
  }
  if (!index.dirty && !dropped && index.loaded.savedAtNs !== 0n) return
  mkdirp(path.dirname(index.file))
  const savedAtNs = BigInt(Date.now()) * 1_000_000n
  AtomicFile.write(
    index.file,
    // The workspace among the first fields: what `kiln store gc` reads to tell an index of one that is gone.
    JSON.stringify({
      v: FORMAT,
      workspace: index.workspace,
      savedAtNs: String(savedAtNs),
      entries: Object.fromEntries(entries)
    })
  )
  index.dirty = false
}
