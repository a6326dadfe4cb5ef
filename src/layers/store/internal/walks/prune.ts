/**
 * What the store keeps beside its entries for directories that are gone: each workspace's stat index
 * (`stat-index/<hash>.json`) and the saved walks of its directories taken whole (`stat-index/<hash>.wholes/`). A
 * deleted checkout or a temporary workspace leaves them behind, and no session can use them again; a saved walk of a
 * `node_modules` is megabytes. `kiln store gc` removes them (`maintenance.ts`). A directory that only seems gone (a
 * file system not mounted now) costs its next run the hashing they would have saved, nothing more.
 *
 * @internal
 */
import * as fs from "node:fs"
import * as path from "node:path"
import * as AtomicFile from "../../../../os/AtomicFile.js"
import { errnoOf } from "../../../../os/Errno.js"
import * as Records from "../../DirectoryRecords.js"
import * as WholeDirs from "./wholeDirs.js"

/** What a pruning removed. */
export interface Pruned {
  readonly files: number
  readonly bytes: number
}

const listing = (dir: string): Array<string> => {
  try {
    return fs.readdirSync(dir)
  } catch (e) {
    if (errnoOf(e) === "ENOENT" || errnoOf(e) === "ENOTDIR") return []
    throw e
  }
}

/**
 * Removes, under the store at `root`, the stat index of every workspace that is gone with its saved walks, and every
 * other saved walk of a directory that is gone. Throws on a file it cannot remove.
 */
export const pruneGone = (root: string): Pruned => {
  const dir = path.join(root, "stat-index")
  const names = listing(dir)
  let files = 0
  let bytes = 0
  const remove = (file: string) => {
    const size = Records.remove(file)
    if (size !== undefined) {
      files++
      bytes += size
    }
  }
  for (const name of names.filter((n) => n.endsWith(".json"))) {
    const index = path.join(dir, name)
    const workspace = Records.directoryNamedIn(index, "workspace", "head")
    if (workspace === undefined || !Records.isGone(workspace)) continue
    remove(index)
    const wholes = path.join(dir, `${name.slice(0, -".json".length)}.wholes`)
    const saved = listing(wholes)
    for (const f of saved) remove(path.join(wholes, f))
    // No run of a workspace that is gone writes into it meanwhile.
    if (fs.existsSync(wholes)) fs.rmdirSync(wholes)
  }
  for (const name of names.filter((n) => n.endsWith(".wholes"))) {
    const wholes = path.join(dir, name)
    // The folder stays, even emptied: a run of its workspace may be about to write into it.
    for (const f of listing(wholes)) {
      if (WholeDirs.isPackName(f)) {
        const pruned = prunePack(path.join(wholes, f))
        files += pruned.walks
        bytes += pruned.bytes
        continue
      }
      const abs = Records.directoryNamedIn(path.join(wholes, f), "abs", "head")
      if (abs !== undefined && Records.isGone(abs)) remove(path.join(wholes, f))
    }
  }
  return { files, bytes }
}

/**
 * Rewrites a pack of small directories' walks (see `wholeDirs.ts`) without those of directories that are gone: how
 * many walks that removed, and the bytes it freed. A pack that does not read as one is left as it is: sessions read it
 * as empty and replace it.
 */
const prunePack = (file: string): { readonly walks: number; readonly bytes: number } => {
  let text: string
  try {
    text = fs.readFileSync(file, "utf8")
  } catch (e) {
    if (errnoOf(e) === "ENOENT") return { walks: 0, bytes: 0 }
    throw e
  }
  const walks = WholeDirs.decodePack(text)
  const kept = new Map([...walks].filter(([abs]) => !path.isAbsolute(abs) || !Records.isGone(abs)))
  if (kept.size === walks.size) return { walks: 0, bytes: 0 }
  const pruned = WholeDirs.encodePack(kept)
  AtomicFile.write(file, pruned)
  return { walks: walks.size - kept.size, bytes: Math.max(0, Buffer.byteLength(text) - Buffer.byteLength(pruned)) }
}
