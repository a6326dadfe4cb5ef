/**
 * The file format of a directory's saved walk (see `wholeDirs.ts`): what a session writes of a directory it took whole,
 * and reads back in the next one. The largest (a pnpm workspace's root `node_modules`: tens of thousands of paths) is
 * read before the first process of a one-file edit runs, so it is laid out to parse cheaply:
 *
 * - one array per field (columns), not one array per path: JSON.parse makes a few long arrays of numbers instead of a
 *   small array and nine strings per path;
 * - paths relative to the directory, not its absolute path repeated for each, and the paths and the evidence each in
 *   one string, NUL between them (no path, name or symlink target holds one): two long strings to parse, not two
 *   per path, and each path is a slice of one string of them all, absolute, made in one pass;
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
import type * as Observation from "../../SnapshotObservation.js"

/**
 * 5: columns, paths relative to the directory, joined, integers as numbers (see the module's comment); tools' caches
 * left out (4 had them).
 */
export const FORMAT = 5

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
  /** The row of the directory itself, or -1. */
  readonly self: number
  /** Each other row's path relative to the directory, NUL between them. */
  readonly paths: string
  readonly dev: ReadonlyArray<Int>
  readonly ino: ReadonlyArray<Int>
  readonly mode: ReadonlyArray<Int>
  readonly size: ReadonlyArray<Int>
  /** Whole seconds of the time (truncated toward zero, as bigint division is), and the nanoseconds left. */
  readonly mtimeS: ReadonlyArray<Int>
  readonly mtimeSubNs: ReadonlyArray<number>
  readonly ctimeS: ReadonlyArray<Int>
  readonly ctimeSubNs: ReadonlyArray<number>
  /** Each row's evidence (empty for `a`), NUL between them. */
  readonly evidence: string
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
 * The file of `saved`, or undefined when it cannot say a path: one not `abs` or under it, or a NUL in a path or an
 * evidence (a walk of the directory observes none such).
 */
export const encode = (saved: Saved): string | undefined => {
  const prefix = prefixOf(saved.abs)
  const n = saved.observations.length
  const kinds: Array<string> = []
  const paths: Array<string> = []
  const evidence = new Array<string>(n)
  let self = -1
  const columns = {
    dev: new Array<Int>(n),
    ino: new Array<Int>(n),
    mode: new Array<Int>(n),
    size: new Array<Int>(n),
    mtimeS: new Array<Int>(n),
    mtimeSubNs: new Array<number>(n),
    ctimeS: new Array<Int>(n),
    ctimeSubNs: new Array<number>(n)
  }
  for (let i = 0; i < n; i++) {
    const o = saved.observations[i]!
    if (o.abs === saved.abs && self === -1) self = i
    else if (o.abs.startsWith(prefix) && sayable(o.abs.slice(prefix.length))) paths.push(o.abs.slice(prefix.length))
    else return undefined
    kinds.push(o.kind)
    const present = o.kind === "a" ? undefined : o
    columns.dev[i] = present === undefined ? 0 : intOf(present.dev)
    columns.ino[i] = present === undefined ? 0 : intOf(present.ino)
    columns.mode[i] = present === undefined ? 0 : intOf(present.mode)
    columns.size[i] = present === undefined ? 0 : intOf(present.size)
    columns.mtimeS[i] = present === undefined ? 0 : intOf(present.mtimeNs / NS_PER_S)
    columns.mtimeSubNs[i] = present === undefined ? 0 : Number(present.mtimeNs % NS_PER_S)
    columns.ctimeS[i] = present === undefined ? 0 : intOf(present.ctimeNs / NS_PER_S)
    columns.ctimeSubNs[i] = present === undefined ? 0 : Number(present.ctimeNs % NS_PER_S)
    evidence[i] = present === undefined ? "" : present.evidence
    if (evidence[i]!.includes("\0")) return undefined
  }
  const file: File = {
    v: FORMAT,
    savedAtNs: saved.savedAtNs,
    abs: saved.abs,
    generation: saved.generation,
    standsIn: saved.standsIn,
    digest: saved.digest,
    kinds: kinds.join(""),
    self,
    paths: paths.join("\0"),
    ...columns,
    evidence: evidence.join("\0")
  }
  return JSON.stringify(file)
}

/**
 * In relative paths, NUL between them, one that is not under the directory: an empty segment (an empty path, a
 * leading, doubled or trailing slash), `.` or `..`.
 */
const BAD_PATHS = /(?:^|[/\0])\.{0,2}(?=[/\0]|$)/

/** Whether a path relative to the directory is one under it that the file can hold. */
const sayable = (rel: string) => !rel.includes("\0") && !BAD_PATHS.test(rel)

/** The `count` strings of `joined`, NUL between them, or undefined when it holds another number of them. */
const split = (joined: string, count: number): Array<string> | undefined => {
  if (count === 0) return joined === "" ? [] : undefined
  const parts = joined.split("\0")
  return parts.length === count ? parts : undefined
}

/**
 * The absolute paths of `paths` (`count` paths relative to the directory, NUL between them) under `prefix`, or
 * undefined if one is not under it (see {@link BAD_PATHS}): the prefix put before each in one pass over one string,
 * each path then a slice of it, which later checks read as it is (a concatenation per path is copied again at its
 * first `lstat`).
 */
const absolute = (prefix: string, paths: string, count: number): Array<string> | undefined => {
  if (count === 0) return paths === "" ? [] : undefined
  if (BAD_PATHS.test(paths)) return undefined
  // `$` in a replacement names a match: `$$` is one `$`.
  return split(prefix + paths.replaceAll("\0", `\0${prefix.replaceAll("$", "$$$$")}`), count)
}

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

const isSubNs = (ns: unknown): ns is number =>
  typeof ns === "number" && Number.isSafeInteger(ns) && ns > -1_000_000_000 && ns < 1_000_000_000

/** A time saved as whole seconds and the nanoseconds within the second (see {@link File}). */
const timeOf = (s: unknown, ns: unknown): bigint => {
  if (!isSubNs(ns)) throw new TypeError("not nanoseconds")
  return bigOf(s) * NS_PER_S + BigInt(ns)
}

/**
 * {@link timeOf} that hands out one bigint for each distinct time: the paths of an install share a few thousand
 * times between tens of thousands of them, and a bigint kept per path (and the three made on the way to it) was
 * garbage and memory to no purpose.
 */
const timesOf = (): (s: unknown, ns: unknown) => bigint => {
  const bySeconds = new Map<number, { readonly base: bigint; readonly byNs: Map<number, bigint> }>()
  return (s, ns) => {
    if (typeof s !== "number") return timeOf(s, ns)
    let second = bySeconds.get(s)
    if (second === undefined) bySeconds.set(s, second = { base: bigOf(s) * NS_PER_S, byNs: new Map() })
    // Only valid nanoseconds are ever set: another value misses, and is refused below.
    let time = second.byNs.get(ns as number)
    if (time === undefined) {
      if (!isSubNs(ns)) throw new TypeError("not nanoseconds")
      second.byNs.set(ns, time = second.base + BigInt(ns))
    }
    return time
  }
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
    const { kinds, self } = f
    const n = kinds.length
    const { ctimeS, ctimeSubNs, dev, ino, mode, mtimeS, mtimeSubNs, size } = f
    if (
      typeof self !== "number" || !Number.isSafeInteger(self) || self < -1 || self >= n ||
      typeof f.paths !== "string" || typeof f.evidence !== "string" ||
      !isColumn(dev, n) || !isColumn(ino, n) || !isColumn(mode, n) || !isColumn(size, n) || !isColumn(mtimeS, n) ||
      !isColumn(mtimeSubNs, n) || !isColumn(ctimeS, n) || !isColumn(ctimeSubNs, n)
    ) return undefined
    const paths = absolute(prefixOf(abs), f.paths, self === -1 ? n : n - 1)
    const evidence = split(f.evidence, n)
    if (paths === undefined || evidence === undefined) return undefined
    const devOf = lastBigOf()
    const modeOf = lastBigOf()
    const mtimeOf = timesOf()
    const ctimeOf = timesOf()
    const observations = new Array<Observation.SnapshotObservation>(n)
    for (let i = 0, next = 0; i < n; i++) {
      const at = i === self ? abs : paths[next++]!
      const kind = kinds[i]
      if (kind === "a") {
        observations[i] = { kind, abs: at }
        continue
      }
      if (kind !== "f" && kind !== "l" && kind !== "d") return undefined
      observations[i] = {
        kind,
        abs: at,
        evidence: evidence[i]!,
        dev: devOf(dev[i]),
        ino: bigOf(ino[i]),
        mode: modeOf(mode[i]),
        size: bigOf(size[i]),
        mtimeNs: mtimeOf(mtimeS[i], mtimeSubNs[i]),
        ctimeNs: ctimeOf(ctimeS[i], ctimeSubNs[i])
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
