/**
 * The `lstat` of many paths at once, for the checks that find a large tree as it was (the run memo's check of a
 * `node_modules` group, a mounted tree's check after its process ran: tens of thousands of paths each). Through kiln's
 * small N-API addon (`native/lstatMany.c`) when it is there, which stats them on a thread per CPU and by name in their
 * parent directory; else one {@link RawStat.lstatInto} after another, with the same answers.
 *
 * The addon is used only when it proves itself: for a real path it must give exactly what `fs.lstatSync` gives, and
 * for an absent one, absent. Linux-specific (its build is); elsewhere there is none, and the fallback answers.
 *
 * @internal
 */
import * as fs from "node:fs"
import * as NativeAddon from "./native/Addon.js"
import * as RawStat from "./RawStat.js"

/** Numbers per path in a table: dev, ino, mode, size, mtimeMs, ctimeMs; mode -1 where nothing could be stat'ed. */
const FIELDS = 6

export { ADDON_ENV } from "./native/Addon.js"

type LstatMany = (prefix: string, names: string, out: Float64Array) => void

/** Whether `native` answers for `probe` (a path that exists) and for a path that does not as Node's fs does. */
const provesItself = (native: LstatMany, probe: string): boolean => {
  try {
    const out = new Float64Array(2 * FIELDS)
    native("", `${probe}\0${probe}.kiln-absent-${process.pid}`, out)
    const st = fs.lstatSync(probe)
    return out[0] === st.dev && out[1] === st.ino && out[2] === st.mode && out[3] === st.size &&
      out[4] === st.mtimeMs && out[5] === st.ctimeMs && out[FIELDS + 2] === -1
  } catch {
    return false
  }
}

let addon: LstatMany | undefined | null = null

const addonFor = (probe: string): LstatMany | undefined => {
  if (addon !== null) return addon
  const loaded = NativeAddon.exports()?.lstatMany
  addon = typeof loaded === "function" && provesItself(loaded as LstatMany, probe) ? loaded as LstatMany : undefined
  return addon
}

/** The stats of many paths, by index (see {@link statAt}). */
export interface StatTable {
  readonly count: number
  readonly fields: Float64Array
}

/**
 * The stat of `prefix + name` for each of `names` (not following a last symlink), in a table. `probe` is a path that
 * exists, used once to check the addon. Nothing throws: a path that cannot be stat'ed is absent from the table.
 * `through: "node"` skips the addon (for tests: both must answer the same).
 */
export const lstatMany = (
  prefix: string,
  names: ReadonlyArray<string>,
  probe: string,
  through: "addon" | "node" = "addon"
): StatTable => {
  const fields = new Float64Array(names.length * FIELDS)
  const native = names.length === 0 || through === "node" ? undefined : addonFor(probe)
  if (native !== undefined && !names.some((n) => n.includes("\0"))) {
    native(prefix, names.join("\0"), fields)
    return { count: names.length, fields }
  }
  const st: RawStat.RawStat = { dev: 0, ino: 0, mode: 0, size: 0, mtimeMs: 0, ctimeMs: 0 }
  for (let i = 0; i < names.length; i++) {
    let there: boolean
    try {
      there = RawStat.lstatInto(prefix + names[i], st, probe)
    } catch {
      there = false
    }
    const at = i * FIELDS
    if (!there) {
      fields[at + 2] = -1
      continue
    }
    fields[at] = st.dev
    fields[at + 1] = st.ino
    fields[at + 2] = st.mode
    fields[at + 3] = st.size
    fields[at + 4] = st.mtimeMs
    fields[at + 5] = st.ctimeMs
  }
  return { count: names.length, fields }
}

/**
 * {@link lstatMany} of `count` names already joined by NUL (a run memo's group keeps its paths so: they go to the
 * addon without being split).
 */
export const lstatJoined = (
  prefix: string,
  joined: string,
  count: number,
  probe: string,
  through: "addon" | "node" = "addon"
): StatTable => {
  const native = count === 0 || through === "node" ? undefined : addonFor(probe)
  if (native === undefined) return lstatMany(prefix, count === 0 ? [] : joined.split("\0"), probe, "node")
  const fields = new Float64Array(count * FIELDS)
  try {
    native(prefix, joined, fields)
  } catch {
    // A count that is not the names' (the addon's TypeError): answered name by name, as many as there are.
    return lstatMany(prefix, joined.split("\0"), probe, "node")
  }
  return { count, fields }
}

/** The stat of the table's path `i` written into `out`, or false when nothing could be stat'ed there. */
export const statAt = (table: StatTable, i: number, out: RawStat.RawStat): boolean => {
  const f = table.fields
  const at = i * FIELDS
  if (f[at + 2] === -1) return false
  out.dev = f[at]!
  out.ino = f[at + 1]!
  out.mode = f[at + 2]!
  out.size = f[at + 3]!
  out.mtimeMs = f[at + 4]!
  out.ctimeMs = f[at + 5]!
  return true
}

/** Whether {@link lstatMany} goes through the addon (for tests: the fallback must answer the same). */
export const usesAddon = (probe: string): boolean => addonFor(probe) !== undefined
