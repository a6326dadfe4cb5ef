/**
 * The run memos and run records of workspaces that are gone (a deleted checkout, a temporary workspace): nothing will
 * read them again, and a memo of a real monorepo is megabytes. `kiln store gc` removes them with the store's own
 * records of such directories. The memo names its workspace; the records are found from it.
 *
 * @internal
 */
import * as fs from "node:fs"
import * as path from "node:path"
import { errnoOf } from "../../../../os/Errno.js"
import * as Records from "../../../store/DirectoryRecords.js"
import * as Layout from "../../../store/Layout.js"
import * as RunRecords from "../runRecords.js"

/**
 * Removes the memo and run records (each with its journal) of every workspace under `storeRoot` that is gone: how many
 * files, and their bytes.
 */
export const pruneGone = (storeRoot: string): { readonly files: number; readonly bytes: number } => {
  const dir = path.join(Layout.ownedDirectory(storeRoot, "engine"), "memo")
  let names: Array<string>
  try {
    names = fs.readdirSync(dir)
  } catch (e) {
    if (errnoOf(e) === "ENOENT") return { files: 0, bytes: 0 }
    throw e
  }
  let files = 0
  let bytes = 0
  for (const name of names.filter((n) => n.endsWith(".json"))) {
    const memo = path.join(dir, name)
    // The memo is written with its workspace last (`RunMemo.write`).
    const workspace = Records.directoryNamedIn(memo, "workspace", "tail")
    if (workspace === undefined || !Records.isGone(workspace)) continue
    const records = RunRecords.fileOf(storeRoot, workspace)
    for (const file of [memo, memo.replace(/\.json$/, ".journal"), records, records.replace(/\.json$/, ".journal")]) {
      const size = Records.remove(file)
      if (size !== undefined) {
        files++
        bytes += size
      }
    }
  }
  return { files, bytes }
}
