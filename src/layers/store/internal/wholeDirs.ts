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
import { mkdirp } from "../../../os/Mkdirp.js"
import * as Generation from "../Generation.js"
import * as Observation from "../SnapshotObservation.js"
import type * as StatIndex from "./statIndex.js"
import type * as Tree from "./tree.js"

const FORMAT = 1

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
 * The digest and observations of `abs` as the last session saw it, if its store has removed nothing since and every
 * path of it is still as it was.
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
  const observations = entry.paths.map(observationOf)
  return Observation.stillHold(observations) ? { digest: digest.right, observations } : undefined
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
