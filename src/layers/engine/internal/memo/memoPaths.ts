/**
 * The run memo's evidence for one path (see `RunMemo.ts`): whether what an observation recorded still holds, by its
 * stat, and where the stat moved, by its content read again.
 *
 * @internal
 */
import * as fs from "node:fs"
import * as path from "node:path"
import { sha256Hex } from "../../../../os/LazyCrypto.js"
import * as RawStat from "../../../../os/RawStat.js"
import * as Shims from "../../../store/Shims.js"
import { namesOf, type Stat } from "../../../store/SnapshotObservation.js"
import type { Obs } from "../../RunMemo.js"

/** The largest file a group's check hashes again. */
const REREAD_MAX_BYTES = 1024 * 1024

const hashOf = (bytes: Uint8Array | string): string => sha256Hex(bytes)

/** Whether the content at `abs` is still what the evidence says (a file's: as `Shims.readStored` takes it). */
export const contentIs = (abs: string, kind: string, evidence: string, workspace?: string): boolean => {
  try {
    switch (kind) {
      case "f":
        return hashOf(Shims.readStored(workspace, abs)) === evidence
      case "l":
        return fs.readlinkSync(abs) === evidence
      case "d":
        return namesOf(fs.readdirSync(abs, { withFileTypes: true })) === evidence
    }
  } catch {
    // Gone, or no longer of its kind.
  }
  return false
}

/** One stat reused by every {@link holds}: a check reads thousands, and each is compared at once. */
const st: RawStat.RawStat = { dev: 0, ino: 0, mode: 0, size: 0, mtimeMs: 0, ctimeMs: 0 }

/** Stats the path of an observation into {@link st}: whether it is there. */
const statOf = (workspace: string, o: Obs): boolean => {
  try {
    return RawStat.lstatInto(`${workspace}/${o[0]}`, st, workspace)
  } catch {
    // ENOTDIR: a parent is no longer a directory, so the path is absent.
    return false
  }
}

/** Whether {@link st} is the stat an observation of a present path recorded. The mode holds the file type too. */
const statIs = (o: Obs): boolean =>
  st.ino === o[3] && st.mtimeMs === o[6] && st.ctimeMs === o[7] && st.size === o[5] && st.mode === o[4] &&
  st.dev === o[2]

/** Whether the path of an observation is as it was. */
export const holds = (workspace: string, o: Obs): boolean => {
  const there = statOf(workspace, o)
  if (o[1] === "a") return !there
  if (o[1] === "d") return there && listingHolds(workspace, o, NOTHING_UNSEEN)
  return there && statIs(o) && (o.length < 9 || contentIs(`${workspace}/${o[0]}`, o[1], String(o[8]), workspace))
}

/**
 * Whether a name that is not in a directory any more (`added` false) or is new in it (`added` true) leaves what its
 * process's globs take as it was: the path is the directory's and the name's, relative to the workspace.
 */
export type Unseen = (path: string, added: boolean) => boolean

const NOTHING_UNSEEN: Unseen = () => false

/**
 * Whether a directory (stat in {@link st}) still lists what its globs took: its stat unchanged (and not racy), or
 * else the same directory whose names are those it had, but for names `unseen` says its globs never take (see
 * `RunMemo.ts`: deleting `dist/` to have it written back moves its package directory's stat).
 */
const listingHolds = (workspace: string, o: Obs, unseen: Unseen): boolean => {
  if (statIs(o) && o.length < 10) return true
  if (st.dev !== o[2] || st.ino !== o[3] || st.mode !== o[4]) return false
  let now: Array<string>
  try {
    now = fs.readdirSync(`${workspace}/${o[0]}`)
  } catch {
    return false
  }
  const before = String(o[8])
  if (now.sort().join("/") === before) return true
  const had = new Set(before === "" ? [] : before.split("/"))
  const dir = o[0] === "" ? "" : `${o[0]}/`
  for (const name of now) if (!had.has(name) && !unseen(dir + name, true)) return false
  const still = new Set(now)
  for (const name of had) if (!still.has(name) && !unseen(dir + name, false)) return false
  return true
}

/** {@link listingHolds} of a directory observation, where names `unseen` allows may come and go. */
export const directoryHolds = (workspace: string, o: Obs, unseen: Unseen): boolean =>
  statOf(workspace, o) && listingHolds(workspace, o, unseen)

/**
 * Whether the content at `abs` (a path of kind `kind`, `size` bytes now) is still what a group's evidence says (see
 * `RunMemo.GROUP`).
 */
export const groupContentIs = (
  workspace: string,
  abs: string,
  kind: string,
  evidence: string,
  size: number
): boolean => {
  try {
    switch (kind) {
      case "f":
        return size <= REREAD_MAX_BYTES && hashOf(Shims.readStored(workspace, abs)).startsWith(evidence)
      case "l":
        return fs.readlinkSync(abs) === evidence
      case "d":
        return hashOf(namesOf(fs.readdirSync(abs, { withFileTypes: true }))).startsWith(evidence)
    }
  } catch {
    // Gone, or no longer of its kind.
  }
  return false
}

/**
 * A stat as the memo keeps it: dev, ino, mode, size and the times in milliseconds as Node computes them from a
 * timespec, so that BigInt and number stats give the same double.
 */
export const numbersOf = (st: Stat): Array<number> => [
  Number(st.dev),
  Number(st.ino),
  Number(st.mode),
  Number(st.size),
  RawStat.msOfNs(st.mtimeNs),
  RawStat.msOfNs(st.ctimeNs)
]

/** Whether two observations of a path are the same, field by field. */
export const sameObs = (a: Obs, b: Obs): boolean => a.length === b.length && a.every((v, i) => v === b[i])

/** Whether a stat is racy at `atNs`: changed within a timestamp tick of it (see `RawStat.racyAt`). */
export const isRacy = RawStat.racyAt

/**
 * The paths a process's globs never take anything under, read from its config (the entry's key): each exclusion
 * `!dir/**` without a wildcard before it, and its declared outputs (`inputs.ts` excludes them from its globs, but a
 * path an input names as it is).
 */
export const excludedRootsOf = (key: string): ReadonlyArray<string> => {
  let config: { inputs?: unknown; optionalInputs?: unknown; outputs?: unknown; workingDirectory?: unknown }
  try {
    config = JSON.parse(key) as typeof config
  } catch {
    return []
  }
  const strings = (v: unknown): Array<string> =>
    Array.isArray(v) ? v.filter((x): x is string => typeof x === "string") : []
  const globs = [...strings(config.inputs), ...strings(config.optionalInputs)]
  const literal = (p: string) => !/[*?[\]{}]/.test(p)
  const roots = globs.filter((g) => g.startsWith("!") && g.endsWith("/**") && literal(g.slice(1, -3)))
    .map((g) => g.slice(1, -3))
  const named = new Set(globs.filter((g) => !g.startsWith("!") && literal(g)))
  const wd = typeof config.workingDirectory === "string" ? config.workingDirectory : ""
  for (const declared of strings(config.outputs)) {
    const bare = declared.replace(/^\?/, "")
    const at = path.posix.normalize(path.posix.join(wd, bare)).replace(/\/+$/, "")
    if (at === "." || at === "" || at.startsWith("../") || !literal(at)) continue
    if ([...named].some((n) => n === at || n.startsWith(`${at}/`))) continue
    roots.push(at)
  }
  return roots
}
