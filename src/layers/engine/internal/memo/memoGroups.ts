/**
 * A group of the run memo (see `RunMemo.GROUP`: every observation of a directory taken whole, kept once), packed in
 * columns rather than an array per path: a real `node_modules` is tens of thousands of paths, and every run that
 * reads the memo (a no-op, an edit, a restore) parsed, allocated and collected an array, a string and six numbers for
 * each of them. Packed, the paths are one string that goes to `StatMany` as it is, the stats the bytes of one array
 * of doubles (in base64: parsing a JSON number costs ten times what decoding its eight bytes does, and a group's
 * stats were two thirds of a memo's parse), and a path's name or evidence is taken out only when it has changed.
 *
 * @internal
 */
import * as os from "node:os"
import type * as TreeWatch from "../../../../os/native/TreeWatch.js"
import type * as RawStat from "../../../../os/RawStat.js"
import * as StatMany from "../../../../os/StatMany.js"
import type * as Observation from "../../../store/SnapshotObservation.js"
import { groupContentIs, numbersOf } from "./memoPaths.js"

/** Numbers per path in {@link Group.stats}: dev, ino, mode, size, mtimeMs, ctimeMs (0s for an absent path). */
const FIELDS = 6
/** Base64 characters per path in {@link Group.stats}: six doubles, 48 bytes, encode to 64 (48 is a multiple of 3). */
const STATS_CHARS = (FIELDS * 8 / 3) * 4

/**
 * The observations of a directory taken whole. Row `i` is the `i`th path of `paths`, of kind `kinds[i]` (`f`, `l`,
 * `d`, or `a` for absent), with its stat at doubles `6i…6i+5` of `stats` and its evidence (see `RunMemo.GROUP`) the
 * `i`th of `evidence`; `racy` lists the rows whose stat was taken within a tick of a change, which hold only by their
 * content.
 */
export interface Group {
  /** Paths relative to the workspace, separated by NUL (which no path holds). */
  readonly paths: string
  readonly kinds: string
  /** The stats' doubles, little-endian, in base64 (see {@link statsOf}). */
  readonly stats: string
  /** Evidence, separated by NUL ("" for an absent path). */
  readonly evidence: string
  readonly racy: ReadonlyArray<number>
}

/**
 * The group of a directory's observations: each one's path through `rel`, and its evidence through `evidenceOf`
 * (see `RunMemo.groupEvidenceOf`); `racy` says which stats were taken within a tick of a change.
 */
export const pack = (
  observations: ReadonlyArray<Observation.SnapshotObservation>,
  rel: (abs: string) => string,
  evidenceOf: (o: Observation.Present) => string,
  racy: (o: Observation.SnapshotObservation) => boolean
): Group => {
  const paths: Array<string> = []
  const evidence: Array<string> = []
  const stats = new Float64Array(observations.length * FIELDS)
  const racyRows: Array<number> = []
  let kinds = ""
  observations.forEach((o, i) => {
    paths.push(rel(o.abs))
    kinds += o.kind
    if (o.kind === "a") {
      evidence.push("")
      return
    }
    stats.set(numbersOf(o), i * FIELDS)
    evidence.push(evidenceOf(o))
    if (racy(o)) racyRows.push(i)
  })
  return { paths: paths.join("\0"), kinds, stats: encodeDoubles(stats), evidence: evidence.join("\0"), racy: racyRows }
}

const LITTLE_ENDIAN = os.endianness() === "LE"

const encodeDoubles = (values: Float64Array): string => {
  const bytes = Buffer.alloc(values.length * 8)
  if (LITTLE_ENDIAN) bytes.set(new Uint8Array(values.buffer, values.byteOffset, bytes.length))
  else values.forEach((v, i) => bytes.writeDoubleLE(v, i * 8))
  return bytes.toString("base64")
}

/** Each group's stats, decoded once; undefined for stats that are not a whole number of paths' doubles. */
const decoded = new WeakMap<Group, Float64Array | undefined>()

/**
 * The doubles of `g.stats`, decoded on first use; undefined when they are not `kinds.length` rows of them. (A damaged
 * character the decoder skips shortens them; one it takes gives another stat, which the path then fails.)
 */
const statsOf = (g: Group): Float64Array | undefined => {
  if (decoded.has(g)) return decoded.get(g)
  let out: Float64Array | undefined
  if (g.stats.length === g.kinds.length * STATS_CHARS) {
    const bytes = Buffer.from(g.stats, "base64")
    if (bytes.length === g.kinds.length * FIELDS * 8) {
      out = new Float64Array(bytes.length / 8)
      if (LITTLE_ENDIAN) new Uint8Array(out.buffer).set(bytes)
      else for (let i = 0; i < out.length; i++) out[i] = bytes.readDoubleLE(i * 8)
    }
  }
  decoded.set(g, out)
  return out
}

/**
 * Whether `g` is a group at all, its kinds and stats of one length: a memo damaged otherwise answers "changed". (Its
 * paths' count is checked by the stat that splits them, its evidence's when it is read.)
 */
const wellFormed = (g: Group): boolean =>
  typeof g === "object" && g !== null && typeof g.paths === "string" && typeof g.kinds === "string" &&
  typeof g.evidence === "string" && typeof g.stats === "string" && Array.isArray(g.racy) && g.kinds.length > 0 &&
  /^[flda]*$/.test(g.kinds) && statsOf(g) !== undefined

/** Whether two groups hold the same observations (either may be absent: then not). */
export const equal = (a: Group | undefined, b: Group | undefined): boolean => {
  if (a === undefined || b === undefined || !wellFormed(a) || !wellFormed(b)) return false
  if (a === b) return true
  if (
    a.paths !== b.paths || a.kinds !== b.kinds || a.evidence !== b.evidence || a.racy.length !== b.racy.length ||
    a.stats !== b.stats
  ) return false
  for (let i = 0; i < a.racy.length; i++) if (a.racy[i] !== b.racy[i]) return false
  return true
}

/** The row count of a group (0 for one that is not well formed). */
export const sizeOf = (g: Group): number => wellFormed(g) && pathsOf(g).length === g.kinds.length ? g.kinds.length : 0

/** The paths of a group, in order (split once, when one is asked for). */
export const pathsOf = (g: Group): ReadonlyArray<string> => g.paths.split("\0")

const st: RawStat.RawStat = { dev: 0, ino: 0, mode: 0, size: 0, mtimeMs: 0, ctimeMs: 0 }

/**
 * The first path of a group that no longer holds what it held, "" for a group that is not well formed, or undefined
 * when every one holds: its stat unchanged (and not racy), or else, of the same kind and mode, the same content read
 * again while `mayReread` allows one more. Every path is stat'ed at once (`StatMany`); the paths' names are split
 * out only if one needs its name.
 */
export const firstChanged = (
  workspace: string,
  g: Group,
  mayReread: (path: string) => boolean
): string | undefined => {
  if (!wellFormed(g)) return ""
  const n = g.kinds.length
  let names: ReadonlyArray<string> | undefined
  const nameOf = (i: number) => (names ??= pathsOf(g))[i]!
  const table = StatMany.lstatJoined(`${workspace}/`, g.paths, n, workspace)
  if (table.count !== n) return ""
  const racy = g.racy.length === 0 ? undefined : new Set(g.racy)
  const s = statsOf(g)!
  let evidence: ReadonlyArray<string> | undefined
  for (let i = 0; i < n; i++) {
    const there = StatMany.statAt(table, i, st)
    const kind = g.kinds[i]!
    if (kind === "a") {
      if (there) return nameOf(i)
      continue
    }
    if (!there) return nameOf(i)
    const at = i * FIELDS
    if (
      st.ino === s[at + 1] && st.mtimeMs === s[at + 4] && st.ctimeMs === s[at + 5] && st.size === s[at + 3] &&
      st.mode === s[at + 2] && st.dev === s[at] && racy?.has(i) !== true
    ) continue
    // The kind and the executable bits are in the tree: those must not have changed whatever the content.
    const name = nameOf(i)
    if (st.mode !== s[at + 2] || !mayReread(name)) return name
    evidence ??= g.evidence.split("\0")
    if (evidence.length !== n || !groupContentIs(workspace, `${workspace}/${name}`, kind, evidence[i]!, st.size)) {
      return name
    }
  }
  return undefined
}

/** The most top paths a watched group may have (see {@link topsOf}): each is stat'ed at every answer. */
const MAX_TOPS = 16

/**
 * The paths of `g` whose directory is not one of its directories (a group taken whole has one: its directory), with
 * their recorded device and inode, for a watch of it (`TreeWatch`); undefined when it has more than a few, or its
 * paths are on more than one device (a mount point inside: changes there are another file system's).
 */
export const topsOf = (g: Group): Array<TreeWatch.Top> | undefined => {
  if (!wellFormed(g)) return undefined
  const names = pathsOf(g)
  const s = statsOf(g)!
  if (names.length !== g.kinds.length) return undefined
  const dirs = new Set<string>()
  for (let i = 0; i < names.length; i++) if (g.kinds[i] === "d") dirs.add(names[i]!)
  const tops: Array<TreeWatch.Top> = []
  let dev: number | undefined
  for (let i = 0; i < names.length; i++) {
    const name = names[i]!
    const absent = g.kinds[i] === "a"
    const at = i * FIELDS
    if (!absent) {
      if (dev === undefined) dev = s[at]
      else if (s[at] !== dev) return undefined
    }
    const slash = name.lastIndexOf("/")
    if (slash !== -1 && dirs.has(name.slice(0, slash))) continue
    if (tops.length === MAX_TOPS) return undefined
    tops.push(absent ? { name } : { name, dev: s[at]!, ino: s[at + 1]! })
  }
  return tops
}
