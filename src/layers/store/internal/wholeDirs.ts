/**
 * Directories taken whole (see `StatIndex.wholeDirs`), kept from one session to the next beside the stat index
 * (`<index>.wholes.json`): the digest of each and every path it held with its stat. A later session whose store is
 * of the same generation (nothing removed since: every blob of the tree is still there) takes such a directory from
 * one `lstat` per path, without reading the index, asking the store about each file or encoding its `Directory`
 * messages again. Only directories that could stand in for their trees are kept (none racy).
 *
 * @internal
 */
import * as fs from "node:fs"
import * as path from "node:path"
import * as Digest from "../../../domain/Digest.js"
import * as AtomicFile from "../../../os/AtomicFile.js"
import { sha256Hex } from "../../../os/LazyCrypto.js"
import { mkdirp } from "../../../os/Mkdirp.js"
import * as Generation from "../Generation.js"
import * as Shims from "../Shims.js"
import * as Observation from "../SnapshotObservation.js"
import * as StatIndex from "./statIndex.js"
import type * as Tree from "./tree.js"

/** 2: a `.bin` shim's evidence is the hash of what the store took for it (see `Shims.ts`). */
const FORMAT = 2

/** `[kind, abs, dev, ino, mode, size, mtimeNs, ctimeNs, evidence]`, the big numbers as decimal strings. */
type Row = [string, string, string?, string?, string?, string?, string?, string?, string?]

interface Saved {
  readonly v: number
  readonly generation: string
  readonly dirs: Record<string, { readonly digest: string; readonly paths: ReadonlyArray<Row> }>
}

const fileOf = (index: StatIndex.StatIndex) => index.file.replace(/\.json$/, ".wholes.json")
const storeRootOf = (index: StatIndex.StatIndex) => path.dirname(path.dirname(index.file))

const rowOf = (o: Observation.SnapshotObservation): Row =>
  o.kind === "a"
    ? ["a", o.abs]
    : [o.kind, o.abs, `${o.dev}`, `${o.ino}`, `${o.mode}`, `${o.size}`, `${o.mtimeNs}`, `${o.ctimeNs}`, o.evidence]

const observationOf = (r: Row): Observation.SnapshotObservation =>
  r[0] === "a" ? { kind: "a", abs: r[1] } : {
    kind: r[0] as "f" | "l" | "d",
    abs: r[1],
    dev: BigInt(r[2]!),
    ino: BigInt(r[3]!),
    mode: BigInt(r[4]!),
    size: BigInt(r[5]!),
    mtimeNs: BigInt(r[6]!),
    ctimeNs: BigInt(r[7]!),
    evidence: r[8]!
  }

const loaded = new WeakMap<StatIndex.StatIndex, Saved | null>()

const savedOf = (index: StatIndex.StatIndex): Saved | null => {
  const known = loaded.get(index)
  if (known !== undefined) return known
  let saved: Saved | null = null
  try {
    const json = JSON.parse(fs.readFileSync(fileOf(index), "utf8")) as Saved
    if (json.v === FORMAT && json.generation === Generation.read(storeRootOf(index))) saved = json
  } catch {
    // None yet, or damaged: directories are walked as if it were not there.
  }
  loaded.set(index, saved)
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
 * shim of the workspace `root` as the sandbox reads it), target or names. For a file, the size of what the store took
 * when that is not its bytes on disk (for the index: see `StatIndex.record`), else `true`.
 */
const sameContent = (
  root: string,
  o: Observation.Present,
  abs: string,
  st: fs.BigIntStats
): boolean | { readonly storedSize: number } => {
  try {
    if (o.kind === "d") {
      return st.isDirectory() && Observation.namesOf(fs.readdirSync(abs, { withFileTypes: true })) === o.evidence
    }
    if (o.kind === "l") return st.isSymbolicLink() && fs.readlinkSync(abs) === o.evidence
    if (!st.isFile() || st.size > REREAD_MAX_BYTES) return false
    const bytes = fs.readFileSync(abs)
    const stored = Shims.asStored(root, abs, bytes)
    if (sha256Hex(stored) !== o.evidence) return false
    return stored === bytes ? true : { storedSize: stored.length }
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
  if (Observation.stillHold(observations)) return [...observations]
  const nowNs = BigInt(Date.now()) * 1_000_000n
  let reread = 0
  const out: Array<Observation.SnapshotObservation> = []
  for (const o of observations) {
    if (o.kind === "a" || Observation.stillHold([o])) {
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
    const same = StatIndex.racyAt(st, nowNs) ? false : sameContent(index.workspace, o, o.abs, st)
    if (same === false) return undefined
    // The index learns the file's new stat: a later walk does not hash it again.
    if (o.kind === "f") StatIndex.record(index, o.abs, st, o.evidence, same === true ? undefined : same.storedSize)
    out.push(Observation.present(o.kind, o.abs, st, o.evidence))
  }
  return out
}

/**
 * The digest and observations of `abs` as the last session saw it, if its store has removed nothing since and every
 * path of it still holds what it held (see {@link refreshed}). Paths read again make the session save the directory
 * anew, with their new stats.
 *
 * @internal
 */
export const reuse = (
  index: StatIndex.StatIndex,
  abs: string
): { readonly digest: Digest.Digest; readonly observations: Array<Observation.SnapshotObservation> } | undefined => {
  const entry = savedOf(index)?.dirs[abs]
  if (entry === undefined) return undefined
  const digest = Digest.parse(entry.digest)
  if (digest._tag === "Left") return undefined
  const saved = entry.paths.map(observationOf)
  const observations = refreshed(index, saved)
  if (observations === undefined) return undefined
  if (observations.some((o, i) => o !== saved[i])) index.wholesWalked = true
  return { digest: digest.right, observations }
}

/**
 * Saves the directories of this session that may stand in for their trees, when one was walked afresh. The
 * generation is the one read when the session began: a removal since then makes the saved directories unusable,
 * which is what a removal should do.
 *
 * @internal
 */
export const save = (index: StatIndex.StatIndex, generation: string): void => {
  if (!index.wholesWalked) return
  const dirs: Record<string, { digest: string; paths: Array<Row> }> = {}
  for (const [abs, whole] of index.wholeDirs) {
    if (!whole.standsIn) continue
    const digest = "dirs" in whole.node ? index.encoded.get(whole.node) : whole.node
    if (digest !== undefined) dirs[abs] = { digest: Digest.format(digest), paths: whole.observations.map(rowOf) }
  }
  mkdirp(path.dirname(fileOf(index)))
  AtomicFile.write(fileOf(index), JSON.stringify({ v: FORMAT, generation, dirs } satisfies Saved))
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
      unchanged: () => Observation.stillHold(whole.observations)
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
