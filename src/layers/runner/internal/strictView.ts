/**
 * Which processes get the strict view (`MountNamespace.View`), and which host paths it shows them beyond the ones
 * they declare.
 *
 * @internal
 */
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import type { Process } from "../../../domain/Process.js"
import * as MountNamespace from "../../../os/mounts/MountNamespace.js"
import { SYSTEM_DIRS } from "../../../os/mounts/ViewScript.js"
import { SandboxMode } from "../SandboxMode.js"

/** Whether `p` is `dir` or under it. */
const within = (p: string, dir: string) => p === dir || p.startsWith(dir === "/" ? "/" : `${dir}/`)

const SYSTEM = SYSTEM_DIRS.map((d) => `/${d}`)

/**
 * The view a process gets: the strict view where the run's mode (`SandboxMode`, `auto` when absent) is not `off`
 * and this machine can make it (`MountNamespace.strictProbe`), with its declared host paths and network; else
 * undefined (the mount namespace alone, as before the view).
 *
 * @internal
 */
export const viewFor = (proc: Process) =>
  Effect.map(Effect.serviceOption(SandboxMode), (mode): MountNamespace.View | undefined => {
    if (Option.getOrElse(mode, () => "auto" as const) === "off" || !MountNamespace.strictProbe().works) return undefined
    return { hostPaths: proc.hostPaths, network: proc.network }
  })

const isDirectory = (p: string) => {
  try {
    return fs.statSync(p).isDirectory()
  } catch {
    return false
  }
}

/**
 * The tool directories of the process's PATH that the view shows too, read-only, beside its declared host paths:
 * the programs it is given by name must be there to run. Each absolute PATH entry that is an existing directory,
 * outside the system directories (shown anyway) and the path the process sees its sandbox at, and neither in nor
 * above the store or the sandboxes; for the directory of the `node` running kiln (which tasks put on their PATH),
 * its whole install prefix (`~/.nvm/versions/node/v22`: npm's `bin` entries are links into its `lib`), unless that
 * prefix holds the store, the sandboxes or the home directory.
 *
 * @internal
 */
export const toolDirs = (
  pathVariable: string | undefined,
  seen: string,
  excluded: ReadonlyArray<string>
): Array<string> => {
  const guarded = [...excluded, os.homedir()]
  const nodeBin = path.dirname(process.execPath)
  const nodePrefix = path.dirname(nodeBin)
  const dirs = new Set<string>()
  for (const raw of (pathVariable ?? "").split(":")) {
    if (!path.isAbsolute(raw)) continue
    const entry = path.normalize(raw).replace(/(.)\/$/, "$1")
    if (entry === "/" || SYSTEM.some((s) => within(entry, s)) || within(entry, seen)) continue
    if (excluded.some((x) => within(entry, x) || within(x, entry)) || !isDirectory(entry)) continue
    const prefix = entry === nodeBin && nodePrefix !== "/" && !SYSTEM.some((s) => within(nodePrefix, s)) &&
      !guarded.some((x) => within(x, nodePrefix))
    dirs.add(prefix ? nodePrefix : entry)
  }
  return [...dirs]
}

/** The host paths a view shows: declared ones and tool directories, each once, sorted (the wire stays the same). */
export const hostPathsOf = (view: MountNamespace.View, tools: ReadonlyArray<string>): Array<string> =>
  [...new Set([...view.hostPaths, ...tools])].sort()
