/**
 * `lstat` as raw numbers, for the run memo's check of thousands of paths (see `layers/engine/RunMemo.ts`). Node 20's
 * `fs.lstatSync` builds a `Stats` object and four `Date`s for every call: in a no-op run that is a large share of
 * its time and most of its garbage. Node's own fs binding returns the same numbers in
 * one shared `Float64Array`, without allocating.
 *
 * That binding is internal (reached through `process.binding`, deprecated as DEP0111), so it is used only when it
 * proves itself: its layout must give, for a real path, exactly what `fs.lstatSync` gives, field by field. Anything
 * else (no such binding, another signature or layout, `--pending-deprecation`, under which merely asking for it
 * prints a warning) falls back to `fs.lstatSync`, with the same answers. Node-specific, not Linux-specific.
 *
 * @internal
 */
import * as fs from "node:fs"

/** Node's layout of a stat in the binding's array (`FillStatsArray` in `src/node_file-inl.h`). */
const DEV = 0
const MODE = 1
const INO = 7
const SIZE = 8
const MTIME_S = 12
const MTIME_NS = 13
const CTIME_S = 14
const CTIME_NS = 15
const LENGTH = 16

/** The fields the memo compares, with times in ms as Node computes `mtimeMs` (seconds × 1e3 + ns / 1e6). */
export interface RawStat {
  dev: number
  ino: number
  mode: number
  size: number
  mtimeMs: number
  ctimeMs: number
}

type Binding = (path: string, bigint: false, req: undefined, throwIfNoEntry: false) => Float64Array | undefined

const pendingDeprecation = (): boolean =>
  process.execArgv.includes("--pending-deprecation") ||
  (process.env.NODE_OPTIONS ?? "").includes("--pending-deprecation") ||
  process.env.NODE_PENDING_DEPRECATION === "1"

const fill = (out: RawStat, a: Float64Array): RawStat => {
  out.dev = a[DEV]!
  out.ino = a[INO]!
  out.mode = a[MODE]!
  out.size = a[SIZE]!
  out.mtimeMs = a[MTIME_S]! * 1e3 + a[MTIME_NS]! / 1e6
  out.ctimeMs = a[CTIME_S]! * 1e3 + a[CTIME_NS]! / 1e6
  return out
}

const same = (raw: RawStat, st: fs.Stats): boolean =>
  raw.dev === st.dev && raw.ino === st.ino && raw.mode === st.mode && raw.size === st.size &&
  raw.mtimeMs === st.mtimeMs && raw.ctimeMs === st.ctimeMs

/** The binding, if it answers as `fs.lstatSync` does for `probe` and for a path that does not exist. */
const detect = (probe: string): Binding | undefined => {
  if (pendingDeprecation()) return undefined
  try {
    const binding = (process as unknown as { binding?: (name: string) => { lstat?: unknown } }).binding?.("fs")
    const lstat = binding?.lstat
    if (typeof lstat !== "function") return undefined
    const call = lstat.bind(binding) as Binding
    const a = call(probe, false, undefined, false)
    if (!(a instanceof Float64Array) || a.length < LENGTH) return undefined
    const viaFs = fs.lstatSync(probe)
    if (!same(fill({ dev: 0, ino: 0, mode: 0, size: 0, mtimeMs: 0, ctimeMs: 0 }, a), viaFs)) return undefined
    if (call(`${probe}.kiln-absent-${process.pid}`, false, undefined, false) !== undefined) return undefined
    return call
  } catch {
    return undefined
  }
}

let binding: Binding | undefined | null = null

/**
 * The stat of `p` (not following a last symlink) written into `out`, or false when nothing is there. Throws as
 * `fs.lstatSync` does otherwise (ENOTDIR, EACCES). `probe` is a path that exists, used once to check the binding.
 */
export const lstatInto = (p: string, out: RawStat, probe: string): boolean => {
  if (binding === null) binding = detect(probe)
  if (binding !== undefined) {
    const a = binding(p, false, undefined, false)
    if (a === undefined) return false
    fill(out, a)
    return true
  }
  const st = fs.lstatSync(p, { throwIfNoEntry: false })
  if (st === undefined) return false
  out.dev = st.dev
  out.ino = st.ino
  out.mode = st.mode
  out.size = st.size
  out.mtimeMs = st.mtimeMs
  out.ctimeMs = st.ctimeMs
  return true
}

/** Nanoseconds since the epoch as `lstatInto` gives milliseconds (the same double, to compare with `===`). */
export const msOfNs = (ns: bigint): number => Number(ns / 1_000_000_000n) * 1e3 + Number(ns % 1_000_000_000n) / 1e6

/** Whether `lstatInto` reads Node's binding (for tests: the fallback must answer the same). */
export const usesBinding = (probe: string): boolean => {
  if (binding === null) binding = detect(probe)
  return binding !== undefined
}

/** The widest timestamp tick of a file system with nanosecond times (the kernel's coarse clock), and of one without. */
const FINE_TICK_NS = 10_000_000n
const COARSE_TICK_NS = 2_000_000_000n

/**
 * Whether a stat changed so shortly before `atNs` that another change in the same timestamp tick would leave it as it
 * is ("racily clean", as git says). The tick is told by the ctime, which only the kernel sets: an mtime of a whole
 * second is what `tar` and package managers give every file they unpack, on file systems whose ticks are fine.
 */
export const racyAt = (st: { readonly mtimeNs: bigint; readonly ctimeNs: bigint }, atNs: bigint): boolean => {
  const tick = st.ctimeNs % 1_000_000_000n === 0n ? COARSE_TICK_NS : FINE_TICK_NS
  return st.mtimeNs + tick >= atNs || st.ctimeNs + tick >= atNs
}
