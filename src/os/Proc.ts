/**
 * Processes as the kernel sees them: one parser of `/proc/<pid>/stat`, whether a pid is alive, a process's identity
 * (pid and start time, so that a recycled pid is not taken for the process that had it), and scans of every process
 * (by group, by working directory). A zombie is dead everywhere here: it has exited, holds no lock, file or mapping,
 * and only waits for its parent to reap it (LMDB's reader check agrees, since its fcntl locks are gone).
 *
 * Linux-specific: everything that reads `/proc` ({@link statOf}, {@link pids}, {@link cwdOf}, and so the zombie test
 * of {@link isAlive} and {@link groupAlive}, and start times). Where `/proc` is absent they answer "unknown"
 * (undefined, an empty start time), and a port (macOS: `proc_pidinfo`, `sysctl`) re-implements them. Plain code
 * without Effect, synchronous: process-group scans run at the end of every process.
 */
import * as fs from "node:fs"

/** What kiln reads of `/proc/<pid>/stat`. */
export interface Stat {
  /** `R`, `S`, `D`, `Z` (zombie), … (field 3). */
  readonly state: string
  readonly ppid: number
  readonly pgid: number
  /** Clock ticks since boot (field 22), as text: it is compared and recorded, never computed with. */
  readonly startTime: string
}

/**
 * Parses a `/proc/<pid>/stat` line. The command name (field 2, in parentheses) may hold spaces and parentheses
 * itself, so fields are counted after the *last* `)`. Undefined for text that is not such a line.
 */
export const parseStat = (text: string): Stat | undefined => {
  const close = text.lastIndexOf(")")
  if (close === -1) return undefined
  // Fields 3.. are single spaces apart: walk them rather than split ~50 strings off a line read per process.
  let start = close + 2
  let state = ""
  let ppid = 0
  let pgid = 0
  for (let field = 3; field <= 22; field++) {
    let end = text.indexOf(" ", start)
    if (end === -1) end = text.length
    if (end <= start) return undefined
    if (field === 3) state = text.slice(start, end)
    else if (field === 4) ppid = Number(text.slice(start, end))
    else if (field === 5) pgid = Number(text.slice(start, end))
    else if (field === 22) {
      const startTime = text.slice(start, end).trimEnd()
      return Number.isNaN(ppid) || Number.isNaN(pgid) ? undefined : { state, ppid, pgid, startTime }
    }
    start = end + 1
  }
  return undefined
}

/** The stat of `pid`; undefined when it is gone, not ours to read, or there is no `/proc`. */
export const statOf = (pid: number | string): Stat | undefined => {
  let text: string
  try {
    text = fs.readFileSync(`/proc/${pid}/stat`, "utf8")
  } catch {
    return undefined
  }
  return parseStat(text)
}

/** The start time of `pid` (see {@link Stat.startTime}); undefined when it cannot be read. */
export const startTimeOf = (pid: number): string | undefined => statOf(pid)?.startTime

const isEperm = (e: unknown): boolean =>
  typeof e === "object" && e !== null && (e as NodeJS.ErrnoException).code === "EPERM"

/** Whether `kill(target, 0)` finds a process (EPERM: one that is someone else's, alive all the same). */
const signalable = (target: number): boolean => {
  try {
    process.kill(target, 0)
    return true
  } catch (e) {
    return isEperm(e)
  }
}

/**
 * Whether `pid` runs. A zombie (exited, not yet reaped: an engine whose own parent has not waited for it, a worker
 * orphaned under an init that does not reap) answers `kill(pid, 0)` but is dead.
 */
export const isAlive = (pid: number): boolean => signalable(pid) && statOf(pid)?.state !== "Z"

/** The pids of every process; undefined when there is no `/proc` to list. */
export const pids = (): Array<string> | undefined => {
  let names: Array<string>
  try {
    names = fs.readdirSync("/proc")
  } catch {
    return undefined
  }
  // The other entries (self, sys, meminfo, …) do not start with a digit.
  return names.filter((p) => p.charCodeAt(0) >= 48 && p.charCodeAt(0) <= 57)
}

/** The command line of `pid`, as it was started; undefined when it is gone, not ours to read, or there is no `/proc`. */
export const argvOf = (pid: number | string): Array<string> | undefined => {
  try {
    return fs.readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0").filter((a) => a !== "")
  } catch {
    return undefined
  }
}

/** The environment `pid` was started with (`NAME=value` each); undefined as for {@link argvOf}. */
export const environOf = (pid: number | string): Array<string> | undefined => {
  try {
    return fs.readFileSync(`/proc/${pid}/environ`, "utf8").split("\0").filter((a) => a !== "")
  } catch {
    return undefined
  }
}

/** The working directory of `pid`; undefined when it is gone, not ours to read, or there is no `/proc`. */
export const cwdOf = (pid: number | string): string | undefined => {
  try {
    return fs.readlinkSync(`/proc/${pid}/cwd`)
  } catch {
    return undefined
  }
}

/**
 * Whether any member of process group `pgid` still runs. Members killed but not yet reaped (zombies: orphans wait
 * for init to reap them, which can take a while in containers) are dead, although `kill(-pgid, 0)` still finds
 * them. Without `/proc` to tell, a group that `kill` finds is alive.
 */
export const groupAlive = (pgid: number): boolean => {
  if (!signalable(-pgid)) return false
  const all = pids()
  if (all === undefined) return true
  for (const pid of all) {
    const st = statOf(pid)
    // Undefined: it exited while we looked.
    if (st !== undefined && st.pgid === pgid && st.state !== "Z") return true
  }
  return false
}

const idOf = (p: string): string | undefined => {
  const st = fs.statSync(p, { throwIfNoEntry: false })
  return st === undefined ? undefined : `${st.dev}:${st.ino}`
}

/**
 * The process groups of processes whose working directory is one of `dirs` or inside one, except groups `exclude`
 * says no to. Empty without `/proc`.
 *
 * A process that sees one of `dirs` at `boundAt` (its sandbox bound there in a mount namespace of its own, see
 * `MountNamespace.EXEC_ROOT`) names its working directory by that path: it is in `dirs` when the directory it sees
 * there (through `/proc/<pid>/root`, which resolves in its namespace) is one of them.
 */
export const groupsWorkingIn = (
  dirs: ReadonlyArray<string>,
  exclude: (pgid: number) => boolean,
  boundAt?: string
): Set<number> => {
  const found = new Set<number>()
  if (dirs.length === 0) return found
  let ids: Set<string> | undefined
  const bound = (pid: string, cwd: string) => {
    if (boundAt === undefined || !(cwd === boundAt || cwd.startsWith(`${boundAt}/`))) return false
    ids ??= new Set(dirs.flatMap((d) => idOf(d) ?? []))
    const seen = idOf(`/proc/${pid}/root${boundAt}`)
    return seen !== undefined && ids.has(seen)
  }
  for (const pid of pids() ?? []) {
    const cwd = cwdOf(pid)
    if (cwd === undefined) continue
    if (dirs.some((d) => cwd === d || cwd.startsWith(`${d}/`)) || bound(pid, cwd)) {
      const pgid = statOf(pid)?.pgid
      if (pgid !== undefined && !exclude(pgid)) found.add(pgid)
    }
  }
  return found
}

/** A process, told apart from a later one that reuses its pid by its start time. */
export interface Owner {
  readonly pid: number
  /** Start time in clock ticks since boot (see {@link Stat.startTime}); empty where it cannot be read. */
  readonly startTime: string
}

/** Whether the owner still runs: its pid is alive and started at the recorded time. */
export const ownerAlive = (owner: Owner): boolean => {
  if (!isAlive(owner.pid)) return false
  if (owner.startTime === "") return true
  return startTimeOf(owner.pid) === owner.startTime
}

/** This process, as an {@link Owner}. */
export const self = (): Owner => ({ pid: process.pid, startTime: startTimeOf(process.pid) ?? "" })
