/**
 * What a run left under a sandbox root: every sandbox and every file beside one, but the idle sandboxes of this
 * process and their logs (an engine keeps finished sandboxes, as their processes left them, for its next processes:
 * see `SandboxDir.pool`; its scope removes them, which a test proves by looking once the scope has closed).
 */
import * as fs from "node:fs"
import * as path from "node:path"
import * as SandboxDir from "../../src/layers/sandbox/internal/sandboxDir.js"

export const sandboxesLeft = (root: string): Array<string> => {
  const names = fs.readdirSync(root)
  const idle = new Set(names.filter((name) => {
    const p = path.join(root, name)
    return fs.lstatSync(p).isDirectory() && SandboxDir.ownerOfName(name)?.pid === process.pid
  }))
  // An idle sandbox keeps the log files beside it for its next process.
  return names.filter((name) => !idle.has(SandboxDir.sandboxNameOf(name)))
}
