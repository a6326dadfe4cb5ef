/**
 * A large directory taken whole, hashed ahead of its walk (see `os/native/HashFiles.ts`): what the walk of
 * `snapshot.ts` then takes each file's answer from.
 *
 * @internal
 */
import * as HashFiles from "../../../../os/native/HashFiles.js"
import * as WorkspaceSources from "../workspaceSources.js"
import * as StatIndex from "./statIndex.js"
import type { Walk } from "./walkFile.js"
import * as WholeDirs from "./wholeDirs.js"

/**
 * Beneath a directory of more files and directories than this, files are hashed as the walk reaches them: the table
 * would be too large.
 */
const HASH_AHEAD_MAX = 200_000

/**
 * The files of a large directory taken whole and left in the workspace, hashed ahead on every CPU (see
 * `HashFiles.ts`), when nothing else can vouch for them: neither its saved walk nor the stat index holds any of a
 * sample of them at its stat now (a fresh checkout or copy, a first run, a tree installed again where one was). Only
 * what the walk itself would read (beneath no tool's cache, no package manager's bookkeeping), and only for a
 * directory the walk will leave in the workspace (a small one's bytes are stored, so it reads them).
 */
export const hashAhead = (
  w: Walk,
  abs: string,
  rel: string,
  previous: WholeDirs.Previous | undefined
): ReadonlyMap<string, HashFiles.Hashed> | undefined => {
  const filter = w.filter
  const under = (p: string) => rel === "" ? p : `${rel}/${p}`
  const skipped = new Map<string, boolean>()
  const skips = (dir: string): boolean => {
    if (dir === "" || filter === undefined) return false
    const known = skipped.get(dir)
    if (known !== undefined) return known
    const slash = dir.lastIndexOf("/")
    const answer = skips(slash === -1 ? "" : dir.slice(0, slash)) || filter.skipsBeneathWhole(under(dir))
    skipped.set(dir, answer)
    return answer
  }
  return HashFiles.hashTree(abs, {
    min: WorkspaceSources.LEFT_MIN_FILES,
    max: HASH_AHEAD_MAX,
    keep: (file) => {
      const slash = file.lastIndexOf("/")
      return !skips(slash === -1 ? "" : file.slice(0, slash)) &&
        (filter === undefined || filter.includesBeneathWhole(under(file)))
    },
    wanted: (files) => {
      const sample = files.filter((_, i) => i % Math.ceil(files.length / 16) === 0).map((f) => `${abs}/${f}`)
      return !(w.index !== undefined && StatIndex.vouchesForAny(w.index, sample)) &&
        !(previous !== undefined && WholeDirs.previousVouchesForAny(previous, sample))
    }
  })
}
