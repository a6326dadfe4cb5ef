/**
 * What a run left under a sandbox root: every sandbox with anything in it, every file beside one, and every empty
 * sandbox but the idle ones of this process and their logs (an engine keeps emptied sandboxes for its next process:
 * see `SandboxDir.pool`; its scope removes them).
 */
import * as fs from "node:fs"
import * as path from "node:path"
import * as SandboxDir from "../../src/layers/internal/sandboxDir.js"

export const sandboxesLeft = (root: string): Array<string> => {
  const names = fs.readdirSync(root)
  const idle = new Set(names.filter((name) => {
    const p = path.join(root, name)
    return fs.lstatSync(p).isDirectory() && fs.readdirSync(p).length === 0 &&
      SandboxDir.ownerOfName(name)?.pid === process.pid
  }))
  // An idle sandbox keeps the log files beside it for its next process.
  return names.filter((name) => !idle.has(SandboxDir.sandboxNameOf(name)))
}
