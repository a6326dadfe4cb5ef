/**
 * The file format of a directory's saved walk (see `wholeDirs.ts`): what a session writes of a directory it took whole,
 * and reads back in the next one. The largest (a pnpm workspace's root `node_modules`: tens of thousands of paths) is
 * read before the first process of a one-file edit runs, so it is laid out to parse cheaply:
 *
 * - one array per field (columns), not one array per path: JSON.parse makes a few long arrays of numbers instead of a
 *   small array and nine strings per path;
 * - paths relative to the directory, not its absolute path repeated for each;
 * - the stat's integers as JSON numbers where they are safe integers (decimal strings otherwise), so that each becomes
 *   a bigint by `BigInt(number)`, several times cheaper than parsing a decimal string; a time, in nanoseconds since
 *   the epoch, does not fit a number: it is kept exactly, as whole seconds and the nanoseconds within the second.
 *
 * The files are the store's, and read as hostile input: a file that is not exactly this format for this directory
 * (another format, another directory's, a path that is absolute, empty or climbs out with `..`, a number that is not
 * one, truncated JSON) reads as none, and the directory is walked again.
 *
 * @internal
 */
import type * as Observation from "../SnapshotObservation.js"

/** 4: columns, paths relative to the directory, integers as numbers (see the module's comment). */
export const FORMAT = 4

/** A stat integer as saved: a number when it is a safe integer, else its decimal string. */
type Int = number | string

/** The file as JSON. `savedAtNs` comes first: a reader may find it without parsing the paths. */
interface File {
  readonly v: number
  /** When it was saved (ns since the epoch, decimal). */
  readonly savedAtNs: string
  /** The directory, resolved: a file found under its name must be this directory's. */
  readonly abs: string
  readonly generation: string
  readonly standsIn: boolean
  readonly digest: string
  /** One letter per path, its observation's kind (`f`, `l`, `d`, `a`). */
  readonly kinds: string
  /** Each path relative to the directory, `.` for the directory itself. */
  readonly paths: ReadonlyArray<string>
  readonly dev: ReadonlyArray<Int>
  readonly ino: ReadonlyArray<Int>
  readonly mode: ReadonlyArray<Int>
  readonly size: ReadonlyArray<Int>
  /** Whole seconds of the time (truncated toward zero, as bigint division is), and the nanoseconds left. */
  readonly mtimeS: ReadonlyArray<Int>
  readonly mtimeNs: ReadonlyArray<number>
  readonly ctimeS: ReadonlyArray<Int>
  readonly ctimeNs: ReadonlyArray<number>
  readonly evidence: ReadonlyArray<string>
}

/** A saved walk as read back. */
export interface Saved {
  readonly abs: string
  /** The store's generation when the session that walked it began. */
  readonly generation: string
  /** When it was saved (ns since the epoch, decimal): a path whose stat is this close to it is not vouched for. */
  readonly savedAtNs: string
  /** Whether it may stand in for its tree (see `StatIndex.WholeDir.standsIn`); else its files' hashes alone are used. */
  readonly standsIn: boolean
  readonly digest: string
  readonly observations: ReadonlyArray<Observation.SnapshotObservation>
}

const NS_PER_S = 1_000_000_000n
const MAX_SAFE = BigInt(Number.MAX_SAFE_INTEGER)

const intOf = (n: bigint): Int => (n <= MAX_SAFE && n >= -MAX_SAFE ? Number(n) : `${n}`)

/** The prefix of each path under `abs` (the root's own paths have no slash to add). */
const prefixOf = (abs: string) => (abs.endsWith("/") ? abs : `${abs}/`)

/**
 * The file of `saved`, or undefined when a path observed is not `abs` or under it, which a relative path cannot say
 * (a walk of the directory observes none such).
 */
export const encode = (saved: Saved): string | undefined => {
  const prefix = prefixOf(saved.abs)
  const n = saved.observations.length
  const kinds: Array<string> = []
  const paths: Array<string> = []
  const columns = {
    dev: new Array<Int>(n),
    ino: new Array<Int>(n),
    mode: new Array<Int>(n),
    size: new Array<Int>(n),
    mtimeS: new Array<Int>(n),
    mtimeNs: new Array<number>(n),
    ctimeS: new Array<Int>(n),
    ctimeNs: new Array<number>(n),
    evidence: new Array<string>(n)
  }
  for (let i = 0; i < n; i++) {
    const o = saved.observations[i]!
    let rel: string
    if (o.abs === saved.abs) rel = "."
    else if (o.abs.startsWith(prefix) && validRel(o.abs.slice(prefix.length))) rel = o.abs.slice(prefix.length)
    else return undefined
    kinds.push(o.kind)
    paths.push(rel)
    const present = o.kind === "a" ? undefined : o
    columns.dev[i] = present === undefined ? 0 : intOf(present.dev)
    columns.ino[i] = present === undefined ? 0 : intOf(present.ino)
    columns.mode[i] = present === undefined ? 0 : intOf(present.mode)
    columns.size[i] = present === undefined ? 0 : intOf(present.size)
    columns.mtimeS[i] = present === undefined ? 0 : intOf(present.mtimeNs / NS_PER_S)
    columns.mtimeNs[i] = present === undefined ? 0 : Number(present.mtimeNs % NS_PER_S)
    columns.ctimeS[i] = present === undefined ? 0 : intOf(present.ctimeNs / NS_PER_S)
    columns.ctimeNs[i] = present === undefined ? 0 : Number(present.ctimeNs % NS_PER_S)
    columns.evidence[i] = present === undefined ? "" : present.evidence
  }
  const file: File = {
    v: FORMAT,
    savedAtNs: saved.savedAtNs,
    abs: saved.abs,
    generation: saved.generation,
    standsIn: saved.standsIn,
    digest: saved.digest,
    kinds: kinds.join(""),
    paths,
    ...columns
  }
  return JSON.stringify(file)
}

/** An empty segment (a leading, doubled or trailing slash), `.` or `..`; or a NUL, which no path holds. */
const BAD_SEGMENT = /(?:^|\/)\.{0,2}(?:\/|$)|\0/

/** A path relative to the directory, under it: not empty, not absolute, no `.`, `..` or empty segment. */
const validRel = (rel: string): boolean => !BAD_SEGMENT.test(rel)

const DECIMAL = /^-?[0-9]+$/

/** A saved integer as a bigint: a safe integer or a decimal string, else it throws. */
const bigOf = (v: unknown): bigint => {
  if (typeof v === "number" && Number.isSafeInteger(v)) return BigInt(v)
  if (typeof v === "string" && DECIMAL.test(v)) return BigInt(v)
  throw new TypeError("not an integer")
}

/**
 * {@link bigOf} that hands out the last bigint again for the same value: every path of a directory is on one device,
 * and most have one of a few modes, so that they share one bigint rather than each keeping its own.
 */
const lastBigOf = (): (v: unknown) => bigint => {
  let last: unknown = undefined
  let big = 0n
  return (v) => {
    if (v !== last || last === undefined) {
      big = bigOf(v)
      last = v
    }
    return big
  }
}

/** A time saved as whole seconds and the nanoseconds within the second (see {@link File}). */
const timeOf = (s: unknown, ns: unknown): bigint => {
  if (typeof ns !== "number" || !Number.isSafeInteger(ns) || ns <= -1e9 || ns >= 1e9) {
    throw new TypeError("not nanoseconds")
  }
  return bigOf(s) * NS_PER_S + BigInt(ns)
}

const isColumn = (v: unknown, n: number): v is ReadonlyArray<unknown> => Array.isArray(v) && v.length === n

/**
 * The saved walk of `abs` in `text`, or undefined when it is not one: another format or directory, a field missing
 * or of another type, a column of another length, a path not under the directory, a number that is not one.
 */
export const decode = (text: string, abs: string): Saved | undefined => {
  try {
    const f = JSON.parse(text) as Partial<Record<keyof File, unknown>> | null
    if (
      typeof f !== "object" || f === null || f.v !== FORMAT || f.abs !== abs || typeof f.generation !== "string" ||
      typeof f.savedAtNs !== "string" || !DECIMAL.test(f.savedAtNs) || typeof f.standsIn !== "boolean" ||
      typeof f.digest !== "string" || typeof f.kinds !== "string"
    ) return undefined
    const { kinds } = f
    const n = kinds.length
    const { ctimeNs, ctimeS, dev, evidence, ino, mode, mtimeNs, mtimeS, paths, size } = f
    if (
      !isColumn(paths, n) || !isColumn(dev, n) || !isColumn(ino, n) || !isColumn(mode, n) || !isColumn(size, n) ||
      !isColumn(mtimeS, n) || !isColumn(mtimeNs, n) || !isColumn(ctimeS, n) || !isColumn(ctimeNs, n) ||
      !isColumn(evidence, n)
    ) return undefined
    const prefix = prefixOf(abs)
    const devOf = lastBigOf()
    const modeOf = lastBigOf()
    const observations = new Array<Observation.SnapshotObservation>(n)
    for (let i = 0; i < n; i++) {
      const rel = paths[i]
      if (typeof rel !== "string" || (rel !== "." && !validRel(rel))) return undefined
      const at = rel === "." ? abs : prefix + rel
      const kind = kinds[i]
      if (kind === "a") {
        observations[i] = { kind, abs: at }
        continue
      }
      const found = evidence[i]
      if ((kind !== "f" && kind !== "l" && kind !== "d") || typeof found !== "string") return undefined
      observations[i] = {
        kind,
        abs: at,
        evidence: found,
        dev: devOf(dev[i]),
        ino: bigOf(ino[i]),
        mode: modeOf(mode[i]),
        size: bigOf(size[i]),
        mtimeNs: timeOf(mtimeS[i], mtimeNs[i]),
        ctimeNs: timeOf(ctimeS[i], ctimeNs[i])
      }
    }
    return {
      abs,
      generation: f.generation,
      savedAtNs: f.savedAtNs,
      standsIn: f.standsIn,
      digest: f.digest,
      observations
    }
  } catch {
    // Truncated or damaged JSON, a number that is not one: as good as none.
    return undefined
  }
}
