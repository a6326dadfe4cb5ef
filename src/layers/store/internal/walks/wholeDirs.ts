/**
 * Directories taken whole (see `StatIndex.wholeDirs`), kept from one session to the next in a file per directory
 * beside the stat index (`<index>.wholes/<hash of its path>.json`, laid out in `savedWalk.ts` to parse cheaply): the
 * digest of each and every path it held with its stat. A later session whose store is of the same generation (nothing
 * removed since: every blob of the tree is still there) takes such a directory from one `lstat` per path, without
 * reading the index, asking the store about each file or encoding its `Directory` messages again. A file per
 * directory, because an edit changes one small directory (a package's `src/`) while the large ones (`node_modules`)
 * hold: only what changed is written again, and a session reads only the directories its globs take. Small
 * directories (at most {@link PACKED_AT_MOST} paths: a package's `src/`) are kept in packs instead, one of
 * {@link PACKS} by their path's hash (`<index>.wholes/small-<hex digit>.pack`), each rewritten whole when one of its
 * directories changed: a cold run of a workspace of many packages made a file, and so an inode, for each, which cost
 * more than the walks (bench-log, session 40); an edit of one package reads and writes one pack, a sixteenth of them.
 *
 * A directory that changed is walked again, and what its file holds is where that walk looks first for each file's
 * hash (see {@link previousOf}): the stat index does not keep the files of directories saved here, so that it stays
 * the size of the workspace's own sources and an edit run reads and writes that, not every file of `node_modules`.
 *
 * @internal
 */
import * as fs from "node:fs"
import * as path from "node:path"
import * as Digest from "../../../../domain/Digest.js"
import * as AtomicFile from "../../../../os/AtomicFile.js"
import { sha256Hex } from "../../../../os/LazyCrypto.js"
import { mkdirp } from "../../../../os/Mkdirp.js"
import * as TextFile from "../../../../os/TextFile.js"
import * as Shims from "../../Shims.js"
import * as Observation from "../../SnapshotObservation.js"
import type * as Tree from "../tree.js"
import * as SavedWalk from "./savedWalk.js"
import * as StatIndex from "./statIndex.js"

const dirOf = (index: StatIndex.StatIndex) => index.file.replace(/\.json$/, ".wholes")
const fileOf = (index: StatIndex.StatIndex, abs: string) =>
  path.join(dirOf(index), `${sha256Hex(abs).slice(0, 32)}.json`)
/** Where format 2 kept every directory in one file: removed at the first save of a later format. */
const legacyFileOf = (index: StatIndex.StatIndex) => index.file.replace(/\.json$/, ".wholes.json")

/** How many packs the small directories' saved walks are spread over (see the module's comment). */
export const PACKS = 16

/** The pack of the directory whose path's hash is `hash`: a name no directory's own file has. */
const packNameOf = (hash: string) => `small-${hash[0]}.pack`

/** @internal */
export const isPackName = (name: string): boolean => /^small-[0-9a-f]\.pack$/.test(name)

/** A directory's walk goes into a pack when it holds at most this many paths. */
export const PACKED_AT_MOST = 32

const PACK_FORMAT = 1

/**
 * A pack's text as read: each directory's saved walk (a file's text, see `savedWalk.ts`) by its path. Hostile input
 * as any file of the store: anything but this exact shape reads as an empty pack, and each walk is decoded as a file
 * would be (a walk under another directory's name reads as none).
 *
 * @internal
 */
export const decodePack = (text: string): Map<string, string> => {
  const walks = new Map<string, string>()
  let json: unknown
  try {
    json = JSON.parse(text)
  } catch {
    return walks
  }
  if (typeof json !== "object" || json === null || (json as { v?: unknown }).v !== PACK_FORMAT) return walks
  const listed = (json as { walks?: unknown }).walks
  if (typeof listed !== "object" || listed === null || Array.isArray(listed)) return walks
  for (const [abs, walk] of Object.entries(listed)) if (typeof walk === "string") walks.set(abs, walk)
  return walks
}

/** @internal */
export const encodePack = (walks: ReadonlyMap<string, string>): string =>
  JSON.stringify({ v: PACK_FORMAT, walks: Object.fromEntries(walks) })

/** Reads a file of the store, as text; undefined when there is none or it cannot be read. */
const readText = (file: string): string | undefined => {
  try {
    return TextFile.read(file)
  } catch {
    return undefined
  }
}

/** A pack of this session's index, read once (and written back by {@link save} when it changed). */
interface Pack {
  readonly file: string
  readonly walks: Map<string, string>
}

const packs = new WeakMap<StatIndex.StatIndex, Map<string, Pack>>()

/** The pack that holds `abs`'s walk if it is small, read on first use. */
const packOf = (index: StatIndex.StatIndex, abs: string): Pack => {
  let byName = packs.get(index)
  if (byName === undefined) packs.set(index, byName = new Map())
  const name = packNameOf(sha256Hex(abs))
  let pack = byName.get(name)
  if (pack === undefined) {
    const file = path.join(dirOf(index), name)
    const text = readText(file)
    byName.set(name, pack = { file, walks: text === undefined ? new Map() : decodePack(text) })
  }
  return pack
}

/** Directories whose walk this session read from a file of their own (one that {@link save} may move to a pack). */
const readFromFile = new WeakMap<StatIndex.StatIndex, Set<string>>()

const loaded = new WeakMap<StatIndex.StatIndex, Map<string, SavedWalk.Saved | null>>()

/**
 * What the last session that walked `abs` saved of it, read once per session (undefined: none, unreadable, of
 * another format or another directory's: see `savedWalk.decode`).
 */
const savedOf = (index: StatIndex.StatIndex, abs: string): SavedWalk.Saved | undefined => {
  let byDir = loaded.get(index)
  if (byDir === undefined) loaded.set(index, byDir = new Map())
  const known = byDir.get(abs)
  if (known !== undefined) return known ?? undefined
  // Its pack first: a directory that grew past the bound has its own file, and no entry there (see save).
  let text = packOf(index, abs).walks.get(abs)
  if (text === undefined) {
    // None yet: the directory is walked.
    text = readText(fileOf(index, abs))
    if (text !== undefined) {
      let files = readFromFile.get(index)
      if (files === undefined) readFromFile.set(index, files = new Set())
      files.add(abs)
    }
  }
  const saved = text === undefined ? undefined : SavedWalk.decode(text, abs)
  byDir.set(abs, saved ?? null)
  return saved
}

/**
 * Paths of a directory whose stat moved that a reuse reads again (see {@link refreshed}), and the largest file it
 * hashes again: past either, the directory is walked, which costs what re-reading them would.
 */
const REREAD_AT_MOST = 256
const REREAD_MAX_BYTES = 1024 * 1024

/**
 * Whether `abs`, now with the stat `st`, holds what `o` found there: the same hash (of what the store takes for it: a
 * shim of the workspace `root` as the sandbox reads it), target or names.
 */
const sameContent = (
  root: string,
  o: Observation.Present,
  abs: string,
  st: fs.BigIntStats
): boolean => {
  try {
    if (o.kind === "d") {
      return st.isDirectory() && Observation.namesOf(fs.readdirSync(abs, { withFileTypes: true })) === o.evidence
    }
    if (o.kind === "l") return st.isSymbolicLink() && fs.readlinkSync(abs) === o.evidence
    if (!st.isFile() || st.size > REREAD_MAX_BYTES) return false
    const bytes = fs.readFileSync(abs)
    return sha256Hex(Shims.asStored(root, abs, bytes)) === o.evidence
  } catch {
    return false
  }
}

/**
 * The observations of a directory as they are now, when every path still holds what it held: those whose stat is
 * unchanged as they were, and those whose stat moved (a no-op `pnpm install` renames a file of the same bytes into
 * `.pnpm`, which moves the directory's times too) read again and found with the same names, target or bytes, with
 * their new stat. Undefined when a path changed, is gone, was changed too recently to be told by its stat (see
 * `StatIndex.racyAt`), or more than {@link REREAD_AT_MOST} moved. A file read again is recorded in the index.
 */
const refreshed = (
  index: StatIndex.StatIndex,
  observations: ReadonlyArray<Observation.SnapshotObservation>
): Array<Observation.SnapshotObservation> | undefined => {
  // Every path stat'ed at once; those whose stat moved are then looked at one by one.
  const holding = Observation.holdingEach(observations)
  if (holding.every((h) => h)) return [...observations]
  const nowNs = BigInt(Date.now()) * 1_000_000n
  let reread = 0
  const out: Array<Observation.SnapshotObservation> = []
  for (const [i, o] of observations.entries()) {
    if (o.kind === "a" || holding[i]) {
      out.push(o)
      continue
    }
    if (++reread > REREAD_AT_MOST) return undefined
    let st: fs.BigIntStats
    try {
      st = fs.lstatSync(o.abs, { bigint: true })
    } catch {
      return undefined
    }
    if (StatIndex.racyAt(st, nowNs) || !sameContent(index.workspace, o, o.abs, st)) return undefined
    // Saved with the directory, a later walk does not hash it again.
    out.push(Observation.present(o.kind, o.abs, st, o.evidence))
  }
  return out
}

/**
 * The digest and observations of `abs` as the last session saw it, if it may stand in for its tree, its store has
 * removed nothing since and every path of it still holds what it held (see {@link refreshed}). Paths read again make
 * the session save the directory anew, with their new stats.
 *
 * @internal
 */
export const reuse = (
  index: StatIndex.StatIndex,
  abs: string
): {
  readonly digest: Digest.Digest
  readonly observations: Array<Observation.SnapshotObservation>
  readonly savedWalk?: string
} | undefined => {
  const entry = savedOf(index, abs)
  if (entry === undefined || !entry.standsIn || entry.generation !== index.generation) return undefined
  const digest = Digest.parse(entry.digest)
  if (digest._tag === "Left") return undefined
  const saved = entry.observations
  const savedWalk = savedWalkKey(abs, entry.digest, entry.savedAtNs)
  // Every path found at its saved stat by this run's check, moments ago: the walk is taken as it was saved. A change
  // since then is a change during the run, which the processes' own checks after they ran see (`unchanged`).
  // A copy: the session's, not the cache of what the file holds (see savedOf).
  if (index.vouched.has(savedWalk)) return { digest: digest.right, observations: [...saved], savedWalk }
  const observations = refreshed(index, saved)
  if (observations === undefined) return undefined
  if (observations.some((o, i) => o !== saved[i])) {
    index.wholesFresh.add(abs)
    return { digest: digest.right, observations }
  }
  return { digest: digest.right, observations, savedWalk }
}

/**
 * The key of a saved walk as it was saved: another save of the directory (a walk again, paths read again) is
 * another key. Domain-separated from the run memo's other group keys, which hash what was seen.
 *
 * @internal
 */
export const savedWalkKey = (abs: string, digest: string, savedAtNs: string): string =>
  sha256Hex(`kiln saved walk\0${abs}\0${digest}\0${savedAtNs}`).slice(0, 32)

/** What a walk of a directory that changed may take from its last walk: each file's hash while its stat holds. */
export interface Previous {
  /** When the last walk was saved: a stat this close to it may hide a change made in the same tick. */
  readonly savedAtNs: bigint
  readonly files: ReadonlyMap<string, Observation.Present>
}

/**
 * The files of `abs` as the last session that walked it saved them, for a walk of it again (see `snapshot.walkWhole`),
 * or undefined. Its blobs may have been collected since: the walk asks the store, as it does for the index's.
 *
 * @internal
 */
export const previousOf = (index: StatIndex.StatIndex, abs: string): Previous | undefined => {
  let byDir = previousKnown.get(index)
  if (byDir === undefined) previousKnown.set(index, byDir = new Map())
  const known = byDir.get(abs)
  if (known !== undefined) return known ?? undefined
  const entry = savedOf(index, abs)
  let previous: Previous | null = null
  if (entry !== undefined) {
    const files = new Map<string, Observation.Present>()
    for (const o of entry.observations) if (o.kind === "f") files.set(o.abs, o)
    previous = { savedAtNs: BigInt(entry.savedAtNs), files }
  }
  byDir.set(abs, previous)
  return previous ?? undefined
}

const previousKnown = new WeakMap<StatIndex.StatIndex, Map<string, Previous | null>>()

/**
 * The saved walk of the directory taken whole this session that holds `abs`, for a walk outside it that reads the
 * file too (a glob over part of the directory, a file named exactly): the stat index does not keep it.
 *
 * @internal
 */
export const enclosingPrevious = (index: StatIndex.StatIndex, abs: string): Previous | undefined => {
  if (index.wholeDirs.size === 0) return undefined
  for (let dir = path.dirname(abs); dir.length >= index.workspace.length; dir = path.dirname(dir)) {
    if (index.wholeDirs.has(dir)) return previousOf(index, dir)
    if (dir === path.dirname(dir)) break
  }
  return undefined
}

/**
 * The digest of the file at `abs`, now with the stat `st`, as a previous walk found it (see {@link previousOf}): when
 * its stat is the very one it had then, not within a tick of that walk's save. A `.bin` shim is not taken from it:
 * what the store took for it is not its bytes on disk, and only the stat index keeps how large that was.
 *
 * @internal
 */
export const previousDigest = (
  previous: Previous,
  abs: string,
  st: fs.BigIntStats
): Digest.Digest | undefined => {
  const o = previous.files.get(abs)
  if (o === undefined || o.kind !== "f" || Shims.isShimPath(abs)) return undefined
  if (
    st.dev !== o.dev || st.ino !== o.ino || st.mode !== o.mode || st.size !== o.size || st.mtimeNs !== o.mtimeNs ||
    st.ctimeNs !== o.ctimeNs || StatIndex.racyAt(st, previous.savedAtNs)
  ) return undefined
  return { hash: o.evidence, sizeBytes: Number(st.size) }
}

/** Whether the previous walk holds any of `paths` at its stat now (see {@link previousDigest}). @internal */
export const previousVouchesForAny = (previous: Previous, paths: ReadonlyArray<string>): boolean =>
  paths.some((abs) => {
    try {
      return previousDigest(previous, abs, fs.lstatSync(abs, { bigint: true })) !== undefined
    } catch {
      return false
    }
  })

/**
 * Saves each directory of this session walked afresh or read again (see {@link reuse}), in its own file or in its
 * pack (each pack written once); the others' are as they were. The generation is the one read when the session began:
 * a removal since then makes the saved directories unable to stand in, which is what a removal should do. One that
 * may not stand in (a path changed within a tick of its walk) is saved too, for its files' hashes.
 *
 * @internal
 */
export const save = (index: StatIndex.StatIndex, generation: string): void => {
  if (index.wholesFresh.size === 0) return
  mkdirp(dirOf(index))
  const savedAtNs = String(BigInt(Date.now()) * 1_000_000n)
  const ownFiles = readFromFile.get(index)
  const changed = new Set<Pack>()
  for (const abs of index.wholesFresh) {
    const whole = index.wholeDirs.get(abs)
    const digest = whole === undefined ? undefined : "dirs" in whole.node ? index.encoded.get(whole.node) : whole.node
    if (whole === undefined || digest === undefined) continue
    const text = SavedWalk.encode({
      abs,
      generation,
      savedAtNs,
      standsIn: whole.standsIn,
      digest: Digest.format(digest),
      observations: whole.observations
    })
    const packed = text !== undefined && whole.observations.length <= PACKED_AT_MOST
    const pack = packOf(index, abs)
    if (packed) pack.walks.set(abs, text)
    if (packed || pack.walks.delete(abs)) changed.add(pack)
    // A path it cannot say (none a walk observes): the file is removed, so the next session walks the directory.
    if (text === undefined) fs.rmSync(fileOf(index, abs), { force: true })
    else if (!packed) AtomicFile.write(fileOf(index, abs), text)
    else if (ownFiles?.has(abs) === true) fs.rmSync(fileOf(index, abs), { force: true })
  }
  for (const pack of changed) AtomicFile.write(pack.file, encodePack(pack.walks))
  fs.rmSync(legacyFileOf(index), { force: true })
}

/**
 * One check per observations, whichever snapshot asks: the runner checks a tree once for every process that mounted
 * it, knowing it by its function.
 */
const checks = new WeakMap<ReadonlyArray<Observation.SnapshotObservation>, () => boolean>()
const checkOf = (observations: ReadonlyArray<Observation.SnapshotObservation>) => {
  let check = checks.get(observations)
  if (check === undefined) {
    check = () => Observation.stillHold(observations)
    checks.set(observations, check)
  }
  return check
}

/**
 * The directories of `abs` taken whole that may stand in for their trees, with their digests.
 *
 * @internal
 */
export const standingIn = (index: StatIndex.StatIndex, abs: ReadonlySet<string>): Array<Observation.WholeDirectory> =>
  [...abs].flatMap((dir) => {
    const whole = index.wholeDirs.get(dir)
    const digest = whole === undefined ? undefined : "dirs" in whole.node ? index.encoded.get(whole.node) : whole.node
    if (whole === undefined || digest === undefined || !whole.standsIn) return []
    return [{
      abs: dir,
      digest,
      observations: whole.observations,
      unchanged: checkOf(whole.observations),
      ...(whole.savedWalk !== undefined ? { savedWalk: whole.savedWalk } : {})
    }]
  })

const pathsKnown = new WeakMap<StatIndex.WholeDir, ReadonlyArray<string>>()

/**
 * The files and symlinks of the directory `abs` taken whole, relative to it: from its node when this session walked
 * it, else (its digest taken from the last session's) from what that walk observed, which is what vouched for the
 * digest. Listed once per session, for every snapshot whose globs reach into it.
 *
 * @internal
 */
export const pathsIn = (whole: StatIndex.WholeDir, abs: string): ReadonlyArray<string> => {
  const known = pathsKnown.get(whole)
  if (known !== undefined) return known
  const paths: Array<string> = []
  if ("dirs" in whole.node) {
    const stack: Array<[string, Tree.Node]> = [["", whole.node]]
    for (let top = stack.pop(); top !== undefined; top = stack.pop()) {
      const [rel, n] = top
      const at = (name: string) => rel === "" ? name : `${rel}/${name}`
      for (const name of n.files.keys()) paths.push(at(name))
      for (const name of n.symlinks.keys()) paths.push(at(name))
      for (const [name, child] of n.dirs) if ("dirs" in child) stack.push([at(name), child])
    }
  } else {
    for (const o of whole.observations) {
      if (o.kind === "f" || o.kind === "l") paths.push(path.relative(abs, o.abs).split(path.sep).join("/"))
    }
  }
  pathsKnown.set(whole, paths)
  return paths
}
