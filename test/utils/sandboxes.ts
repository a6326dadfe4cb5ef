/**
 * What a run left under a sandbox root: every sandbox with anything in it and every file beside one. An empty
 * sandbox is an idle one its engine keeps for the next process (see `SandboxDir.pool`), removed with its scope.
 */
import * as fs from "node:fs"
import * as path from "node:path"

export const sandboxesLeft = (root: string): Array<string> =>
  fs.readdirSync(root).filter((name) => {
    const p = path.join(root, name)
    const st = fs.lstatSync(p)
    return !(st.isDirectory() && fs.readdirSync(p).length === 0)
  })
