/**
 * Sandbox directories on disk and their owners. Each sandbox `kiln-sandbox-<random>` has a sibling
 * `kiln-sandbox-<random>.owner` naming the engine that made it by pid *and* process start time (from /proc), so
 * that after the engine dies, even as a recycled pid, any later engine can tell the sandbox is orphaned and sweep
 * it. The owner file sits beside the sandbox, not in it: a process sees exactly its declared inputs.
 *
 * @internal
 */
import { randomBytes } from "node:crypto"
import * as fs from "node:fs"
import * as path from "node:path"
import { errnoOf } from "./errno.js"
import { mkdirp } from "./mkdirp.js"
import { removeTree } from "./removeTree.js"

/** @internal */
export const PREFIX = "kiln-sandbox-"
const OWNER_SUFFIX = ".owner"
/** The files a sandbox's process writes its stdout and stderr to, beside the sandbox like the owner file. @internal */
export const STDOUT_SUFFIX = ".stdout"
/** @internal */
export const STDERR_SUFFIX = ".stderr"
const SUFFIXES = [OWNER_SUFFIX, STDOUT_SUFFIX, STDERR_SUFFIX]

/** The sandbox a name under the root belongs to: itself, or the sandbox its owner or log file sits beside. @internal */
export const sandboxNameOf = (name: string): string => {
  for (const suffix of SUFFIXES) if (name.endsWith(suffix)) return name.slice(0, -suffix.length)
  return name
}

/** @internal */
export interface Owner {
  readonly pid: number
  /** Start time in clock ticks since boot (`/proc/<pid>/stat` field 22); empty where /proc is absent. */
  readonly startTime: string
  /** A kept sandbox is the user's to inspect: sweeps leave it to `kiln clean --kept`. */
  readonly kept?: boolean
}

const procStat = (pid: number): Array<string> | undefined => {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, "utf8")
    // The command name (field 2) may hold spaces and parentheses: count fields after the last `)`.
    return stat.slice(stat.lastIndexOf(")") + 2).split(" ")
  } catch {
    return undefined
  }
}

/** @internal */
export const processStartTime = (pid: number): string | undefined => procStat(pid)?.[19]

/**
 * Whether a process runs. A zombie (exited, not yet reaped: an engine whose own parent has not waited for it, or
 * a sandboxer reparented to an init that does not reap) answers `kill(pid, 0)` but is dead.
 *
 * @internal
 */
export const isAlive = (pid: number): boolean => {
  try {
    process.kill(pid, 0)
  } catch (e) {
    if (errnoOf(e) !== "EPERM") return false
  }
  return procStat(pid)?.[0] !== "Z"
}

/** Whether the owner still runs: its pid is alive and started at the recorded time. @internal */
export const ownerAlive = (owner: Owner): boolean => {
  if (!isAlive(owner.pid)) return false
  if (owner.startTime === "") return true
  return processStartTime(owner.pid) === owner.startTime
}

/** @internal */
export const self = (): Owner => ({ pid: process.pid, startTime: processStartTime(process.pid) ?? "" })

/** @internal */
export const ownerFileOf = (sandbox: string): string => `${sandbox}${OWNER_SUFFIX}`

/** Creates a sandbox directory under `root`, its owner file first so that no sandbox is ever ownerless. @internal */
export const create = (root: string, owner: Owner): string => {
  mkdirp(root)
  for (;;) {
    const dir = path.join(root, `${PREFIX}${randomBytes(6).toString("hex")}`)
    try {
      fs.writeFileSync(ownerFileOf(dir), JSON.stringify(owner), { flag: "wx" })
    } catch (e) {
      if (errnoOf(e) === "EEXIST") continue
      throw e
    }
    try {
      fs.mkdirSync(dir, { mode: 0o755 })
    } catch (e) {
      fs.rmSync(ownerFileOf(dir), { force: true })
      throw e
    }
    return dir
  }
}

/** Marks a sandbox kept, so that sweeps leave it. @internal */
export const markKept = (sandbox: string, owner: Owner): void =>
  fs.writeFileSync(ownerFileOf(sandbox), JSON.stringify({ ...owner, kept: true }))

/**
 * Removes a sandbox (writable fix-up included), the logs beside it, then its owner file. Throws the error that
 * stopped it.
 *
 * @internal
 */
export const remove = (sandbox: string): void => {
  removeTree(sandbox)
  fs.rmSync(`${sandbox}${STDOUT_SUFFIX}`, { force: true })
  fs.rmSync(`${sandbox}${STDERR_SUFFIX}`, { force: true })
  fs.rmSync(ownerFileOf(sandbox), { force: true })
}

/** @internal */
export const readOwner = (sandbox: string): Owner | undefined => {
  try {
    const o = JSON.parse(fs.readFileSync(ownerFileOf(sandbox), "utf8"))
    return typeof o?.pid === "number" && typeof o?.startTime === "string" ? o : undefined
  } catch {
    return undefined
  }
}

/** @internal */
export interface SweepResult {
  readonly removed: Array<string>
  kept: number
  readonly failed: Array<{ readonly path: string; readonly error: unknown }>
}

/**
 * Removes the sandboxes under `root` whose owner is dead (and, with `kept`, the kept ones too). A sandbox without a
 * readable owner file is only removed when it is older than `grace`: its owner may be writing the file right now.
 *
 * @internal
 */
export const sweep = (
  root: string,
  options: { readonly kept?: boolean; readonly graceMs?: number } = {}
): SweepResult => {
  const result: SweepResult = { removed: [], kept: 0, failed: [] }
  let names: Array<string>
  try {
    names = fs.readdirSync(root)
  } catch (e) {
    if (errnoOf(e) === "ENOENT") return result
    throw e
  }
  const grace = options.graceMs ?? 60_000
  const now = Date.now()
  const candidates = new Set<string>()
  for (const name of names) {
    if (!name.startsWith(PREFIX)) continue
    candidates.add(sandboxNameOf(name))
  }
  for (const name of candidates) {
    const dir = path.join(root, name)
    const owner = readOwner(dir)
    let orphan: boolean
    if (owner === undefined) {
      try {
        const present = [dir, ...SUFFIXES.map((suffix) => `${dir}${suffix}`)].find((p) => fs.existsSync(p))
        if (present === undefined) continue
        orphan = now - fs.lstatSync(present).mtimeMs > grace
      } catch {
        continue
      }
    } else if (owner.kept === true) {
      orphan = options.kept === true
      if (!orphan) result.kept++
    } else {
      orphan = !ownerAlive(owner)
    }
    if (!orphan) continue
    try {
      remove(dir)
      result.removed.push(dir)
    } catch (error) {
      result.failed.push({ path: dir, error })
    }
  }
  return result
}
