/**
 * Running a tool, timed, with the peak RSS of its process tree: a sampler that sums the RSS of every process
 * descending from the tool's (and from any other roots named, such as Bazel's server, a daemon that no client
 * begets), and `/usr/bin/time -f %M` around the command for the largest single process's own high-water mark, which
 * catches a spike between two samples.
 */
import { type ChildProcess, spawn, spawnSync } from "node:child_process"
import * as fs from "node:fs"
import { trackLive } from "../kiln.js"
import { now, progress, rm } from "../report.js"

// ---------------------------------------------------------------------------------------------------------------
// /usr/bin/time

const TIME = "/usr/bin/time"

/** GNU time, installed from Debian's `time` when missing; without it the sampler alone measures RSS. */
export const ensureTime = (): boolean => {
  if (fs.existsSync(TIME)) return true
  progress(`${TIME} is missing: apt-get install -y time`)
  spawnSync("apt-get", ["install", "-y", "--no-install-recommends", "time"], { stdio: "ignore" })
  return fs.existsSync(TIME)
}

// ---------------------------------------------------------------------------------------------------------------
// Sampling /proc

const PAGE_KB = 4

interface ProcStat {
  readonly ppid: number
  readonly rssKb: number
}

/** Every process's parent and RSS, from /proc/<pid>/stat (about 1 ms for 100 processes). */
const snapshot = (): Map<number, ProcStat> => {
  const out = new Map<number, ProcStat>()
  for (const name of fs.readdirSync("/proc")) {
    const c = name.charCodeAt(0)
    if (c < 48 || c > 57) continue
    try {
      const stat = fs.readFileSync(`/proc/${name}/stat`, "latin1")
      // The fields after the command's name, which may hold spaces and parentheses: state, ppid, …, rss (24th).
      const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ")
      out.set(Number(name), { ppid: Number(fields[1]), rssKb: Number(fields[21]) * PAGE_KB })
    } catch {
      // Gone while we looked.
    }
  }
  return out
}

/** The summed RSS of `roots` and every process descending from them, but those `notCounted` names (and theirs). */
export const treeRssKb = (roots: ReadonlyArray<number>, notCounted?: (pid: number) => boolean): number => {
  const procs = snapshot()
  const children = new Map<number, Array<number>>()
  for (const [pid, p] of procs) {
    const xs = children.get(p.ppid) ?? []
    xs.push(pid)
    children.set(p.ppid, xs)
  }
  let sum = 0
  const seen = new Set<number>()
  const stack = roots.filter((r) => procs.has(r))
  while (stack.length > 0) {
    const pid = stack.pop()!
    if (seen.has(pid)) continue
    seen.add(pid)
    if (notCounted !== undefined && !roots.includes(pid) && notCounted(pid)) continue
    sum += procs.get(pid)!.rssKb
    stack.push(...(children.get(pid) ?? []))
  }
  return sum
}

/** A process's own peak RSS so far (`VmHWM`), in kB; 0 when it is gone. */
export const highWaterKb = (pid: number): number => {
  try {
    const m = /^VmHWM:\s+(\d+) kB/m.exec(fs.readFileSync(`/proc/${pid}/status`, "utf8"))
    return m === null ? 0 : Number(m[1])
  } catch {
    return 0
  }
}

/** Resets a process's `VmHWM` to its current RSS (`clear_refs` 5), so that it then says the peak of what follows. */
export const resetHighWater = (pid: number): void => {
  try {
    fs.writeFileSync(`/proc/${pid}/clear_refs`, "5")
  } catch {
    // Gone, or not ours: its VmHWM is then the peak of its whole life.
  }
}

// ---------------------------------------------------------------------------------------------------------------
// A timed run

export interface Measured {
  /** From spawn to the process's exit, in ms. */
  readonly ms: number
  readonly code: number | null
  readonly signal: NodeJS.Signals | null
  /**
   * The peak RSS of the tree in kB: the largest sampled sum, or the largest single process's own peak if larger
   * (0 when not measured).
   */
  readonly peakRssKb: number
  /** Everything the command wrote to stdout and stderr. */
  readonly output: string
}

export interface RunOptions {
  readonly cwd: string
  readonly env: NodeJS.ProcessEnv
  /** A file for the command's output, removed after it is read. */
  readonly log: string
  /** Whether to measure the peak RSS: sampling costs the driver about 1 ms each {@link SAMPLE_MS}. */
  readonly rss?: boolean
  /** Further roots whose trees count (Bazel's server). */
  readonly extraRoots?: ReadonlyArray<number>
  /**
   * Processes below the roots that are not the run's, left out with their trees: the next standby a kiln run starts
   * at its end (just forked, it shares the whole engine's pages, which a sample would count twice).
   */
  readonly notCounted?: (pid: number) => boolean
  /** Past this the run is ended (SIGKILL to its group) and reported as failed: a hang must not hang the benchmark. */
  readonly limitMs: number
}

const SAMPLE_MS = 50

/**
 * Spawns `argv` in a process group of its own, stdout and stderr into `o.log`, and resolves when it exits: its wall
 * time, its exit, its output, and with `o.rss` the peak RSS of its tree.
 */
export const measure = (argv: ReadonlyArray<string>, o: RunOptions): Promise<Measured> =>
  new Promise<Measured>((resolve, reject) => {
    const timeFile = `${o.log}.rss`
    const withTime = o.rss === true && fs.existsSync(TIME)
    const full = withTime ? [TIME, "-f", "%M", "-o", timeFile, ...argv] : [...argv]
    const fd = fs.openSync(o.log, "w")
    let child: ChildProcess
    const t0 = now()
    try {
      child = spawn(full[0]!, full.slice(1), { cwd: o.cwd, env: o.env, detached: true, stdio: ["ignore", fd, fd] })
    } finally {
      fs.closeSync(fd)
    }
    trackLive(child)
    let sampled = 0
    const sample = () => {
      sampled = Math.max(sampled, treeRssKb([child.pid!, ...(o.extraRoots ?? [])], o.notCounted))
    }
    const sampler = o.rss === true && child.pid !== undefined ? setInterval(sample, SAMPLE_MS) : undefined
    const limit = setTimeout(() => {
      progress(`${argv.join(" ").slice(0, 120)}: still running after ${o.limitMs / 1000} s, ended`)
      try {
        process.kill(-child.pid!, "SIGKILL")
      } catch {
        // Gone meanwhile.
      }
    }, o.limitMs)
    const finish = () => {
      clearTimeout(limit)
      if (sampler !== undefined) clearInterval(sampler)
    }
    child.once("error", (e) => {
      finish()
      reject(e)
    })
    child.once("exit", (code, signal) => {
      const ms = now() - t0
      finish()
      let single = 0
      if (withTime) {
        // time's file: its own complaint about a signalled command (if any), then the figure.
        const lines = (fs.existsSync(timeFile) ? fs.readFileSync(timeFile, "utf8") : "").trim().split("\n")
        single = Number(lines[lines.length - 1]) || 0
        rm(timeFile)
      }
      const output = fs.readFileSync(o.log, "utf8")
      rm(o.log)
      resolve({ ms, code, signal, peakRssKb: Math.max(sampled, single), output })
    })
  })

/** The last lines of a command's output, for an error that says why it failed. */
export const tailOf = (output: string, lines = 15): string => output.trim().split("\n").slice(-lines).join("\n")

/** Runs a command to its end, as {@link measure} does; throws with the end of its output when it fails. */
export const runChecked = async (what: string, argv: ReadonlyArray<string>, o: RunOptions): Promise<Measured> => {
  const r = await measure(argv, o)
  if (r.code !== 0) throw new Error(`${what} exited with ${r.code ?? r.signal}:\n${tailOf(r.output)}`)
  return r
}
