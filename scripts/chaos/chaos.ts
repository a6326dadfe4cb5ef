/**
 * The fault harness (`npm run chaos`, `npm run chaos:quick`): many real `kiln run` processes on one workspace and
 * one store at once, some of them killed, and after every round a count of what they left behind. It reproduces the
 * two tests Pants users ran on their engine (../shared/reference/field-reports.md §2):
 *
 * - a concurrency round: `--long-runs` concurrent long runs (a graph of `--long-procs` processes that sleep
 *   `--long-secs` each, never cached) plus `--short-loops` loops of short runs, back to back until the long ones end;
 *   every process's input tree holds `--input-files` files, so that materializing a sandbox takes a while;
 * - a kill round: `--bystanders` long runs plus `--victim-loops` loops of short runs; every `--kill-every` seconds a
 *   random (seeded) live victim gets SIGINT or SIGKILL, alternating. The signal goes to the engine's pid only, as
 *   `kill` from another terminal would: its spawner must notice on its own (and start the post-mortem sandboxer).
 *
 * After each round (every run ended, then `--settle` seconds) it counts, per round: bystander failures (a non-zero
 * exit of a run no signal was sent to), hung runs (a run still going after `--run-timeout` seconds is SIGKILLed with
 * its process group), stale LMDB reader slots (slots held by dead pids, in every shard environment), orphaned
 * sandboxers (still running although their `--parent-pid` is dead), leaked sandboxes (sandbox dirs or owner files
 * whose owner is dead), leftover sockets (`*.sock` in the private runtime dir), stray processes (anything else still
 * running in the temp root, a process of a run that outlived its engine) and whether `kiln store check` fails. A
 * table at the end has one row per round; the exit code is 1 when any figure is not zero.
 *
 * Reader slots are counted through environments this harness opened before the first round and keeps open: opening
 * an LMDB environment (lmdb-js always does) runs LMDB's reader check, which clears exactly the stale slots we count,
 * so neither a fresh open nor `kiln store stats` can see them once the engines are gone. A victim loop whose run was
 * killed always starts one more run, even when the round is ending: kiln reclaims a dead process's slots when the
 * store is next opened, so a slot still stale after that open is a leak, and one left by the round's last kill is
 * not.
 *
 * Everything lives in one temp root (workspace, store, sandbox root, named caches, and a private
 * `$XDG_RUNTIME_DIR` for the sandboxers' sockets), removed at the end, on Ctrl-C too, after every process it started
 * is killed and `kiln clean` swept the sandbox root. With `--logs DIR` (or when a figure is not zero, into a fresh
 * temp dir) the logs of failed and hung runs, the sandboxers' logs and what each bad figure counted are kept.
 */
import { type ChildProcess, spawn, spawnSync } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { parseArgs } from "node:util"
import * as SandboxDir from "../../src/layers/sandbox/internal/sandboxDir.js"
import { errnoOf } from "../../src/os/Errno.js"
import * as Proc from "../../src/os/Proc.js"
import { removeTree } from "../../src/os/RemoveTree.js"
import * as StandbyProtocol from "../../src/programs/kiln/standby/protocol.js"

// dist/chaos/chaos.mjs → the repository root.
const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..", "..")
const cli = path.join(repo, "dist", "cli.js")

// ---------------------------------------------------------------------------------------------------------------
// Options

interface Settings {
  readonly rounds: number
  readonly seed: number
  readonly longRuns: number
  readonly shortLoops: number
  readonly bystanders: number
  readonly victimLoops: number
  readonly longProcs: number
  readonly shortProcs: number
  readonly longSecs: number
  readonly shortSecs: number
  readonly inputFiles: number
  readonly killEverySecs: number
  readonly runTimeoutSecs: number
  readonly settleSecs: number
  readonly logs: string | undefined
  readonly quick: boolean
  /** Every run executes its processes on this REAPI executor (a remote worker on 127.0.0.1 in CI). */
  readonly remoteExecutor: string | undefined
}

const USAGE = `usage: node dist/chaos/chaos.mjs [--quick] [--rounds R] [--seed N] [--long-runs N] [--short-loops N]
  [--bystanders N] [--victim-loops N] [--long-procs N] [--short-procs N] [--long-secs S] [--short-secs S]
  [--input-files N] [--kill-every S] [--run-timeout S] [--settle S] [--logs DIR] [--remote-executor URL]

R concurrency rounds and R kill rounds, alternating (full preset: R = 6; --quick: R = 1 with shorter processes).
Exit code 0 when every figure of every round is zero, 1 when one is not, 2 on a usage or setup error.`

const presets = {
  full: { rounds: 6, longProcs: 6, shortProcs: 3, longSecs: 6, shortSecs: 0.2 },
  quick: { rounds: 1, longProcs: 4, shortProcs: 3, longSecs: 4, shortSecs: 0.1 }
} as const

const usageError = (message: string): never => {
  process.stderr.write(`chaos: ${message}\n${USAGE}\n`)
  process.exit(2)
}

const parseSettings = (argv: ReadonlyArray<string>): Settings => {
  const numeric = [
    "rounds",
    "seed",
    "long-runs",
    "short-loops",
    "bystanders",
    "victim-loops",
    "long-procs",
    "short-procs",
    "long-secs",
    "short-secs",
    "input-files",
    "kill-every",
    "run-timeout",
    "settle"
  ] as const
  let values: Record<string, string | boolean | undefined>
  try {
    values = parseArgs({
      args: [...argv],
      options: {
        ...Object.fromEntries(numeric.map((name) => [name, { type: "string" as const }])),
        logs: { type: "string" },
        "remote-executor": { type: "string" },
        quick: { type: "boolean" },
        help: { type: "boolean" }
      },
      strict: true,
      allowPositionals: false
    }).values as Record<string, string | boolean | undefined>
  } catch (e) {
    return usageError(e instanceof Error ? e.message : String(e))
  }
  if (values.help === true) {
    process.stdout.write(`${USAGE}\n`)
    process.exit(0)
  }
  const quick = values.quick === true
  const preset = quick ? presets.quick : presets.full
  const num = (name: typeof numeric[number], fallback: number, integer: boolean, min: number): number => {
    const text = values[name]
    if (typeof text !== "string") return fallback
    const n = Number(text)
    if (!Number.isFinite(n) || (integer && !Number.isInteger(n)) || n < min) {
      return usageError(`--${name} wants ${integer ? "an integer" : "a number"} of at least ${min}, got ${text}`)
    }
    return n
  }
  return {
    rounds: num("rounds", preset.rounds, true, 1),
    seed: num("seed", Date.now() % 2 ** 31, true, 0),
    longRuns: num("long-runs", 6, true, 1),
    shortLoops: num("short-loops", 5, true, 0),
    bystanders: num("bystanders", 6, true, 1),
    victimLoops: num("victim-loops", 3, true, 1),
    longProcs: num("long-procs", preset.longProcs, true, 1),
    shortProcs: num("short-procs", preset.shortProcs, true, 1),
    longSecs: num("long-secs", preset.longSecs, false, 0),
    shortSecs: num("short-secs", preset.shortSecs, false, 0),
    inputFiles: num("input-files", 200, true, 0),
    killEverySecs: num("kill-every", 3, false, 0.1),
    runTimeoutSecs: num("run-timeout", 60, false, 1),
    settleSecs: num("settle", 2, false, 0),
    logs: typeof values.logs === "string" ? path.resolve(values.logs) : undefined,
    quick,
    remoteExecutor: typeof values["remote-executor"] === "string" ? values["remote-executor"] : undefined
  }
}

const settings = parseSettings(process.argv.slice(2))

/** mulberry32: a small seeded generator, so that a seed replays the same victim choices. */
const seeded = (seed: number) => {
  let a = seed >>> 0
  return () => {
    a = (a + 0x6d2b79f5) >>> 0
    let t = a
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
}
const random = seeded(settings.seed)

const say = (line: string) => process.stdout.write(`${line}\n`)
const warn = (line: string) => process.stderr.write(`[chaos] ${line}\n`)
const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms))
const sleepSync = (ms: number) => Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms)

// ---------------------------------------------------------------------------------------------------------------
// The temp root: workspace, store, sandboxes, named caches, and the runtime dir that holds the sandboxers' sockets

/** kiln puts sockets in `$XDG_RUNTIME_DIR/kiln` only when that path leaves 40 bytes for the name (of 107). */
const SOCKET_NAME_ROOM = 40
const MAX_SOCKET_PATH = 107
const tempBase = path.join(os.tmpdir(), "kiln-chaos-XXXXXX", "run", "kiln").length + SOCKET_NAME_ROOM <=
    MAX_SOCKET_PATH
  ? os.tmpdir()
  : "/tmp"
const root = fs.mkdtempSync(path.join(tempBase, "kiln-chaos-"))
const ws = path.join(root, "ws")
const storeDir = path.join(root, "store")
const sandboxRoot = path.join(root, "sandboxes")
const runtimeDir = path.join(root, "run")
const socketDir = path.join(runtimeDir, "kiln")
const runLogs = path.join(root, "logs")
for (const dir of [ws, sandboxRoot, runLogs]) fs.mkdirSync(dir, { recursive: true })
fs.mkdirSync(runtimeDir, { mode: 0o700 })

const env: NodeJS.ProcessEnv = Object.fromEntries(
  Object.entries(process.env).filter(([k]) => !k.startsWith("KILN_") && k !== "XDG_CACHE_HOME")
)
Object.assign(env, {
  KILN_STORE_DIR: storeDir,
  KILN_SANDBOX_ROOT: sandboxRoot,
  KILN_NAMED_CACHES_DIR: path.join(root, "named"),
  XDG_RUNTIME_DIR: runtimeDir,
  XDG_CACHE_HOME: path.join(root, "cache")
})

// ---------------------------------------------------------------------------------------------------------------
// The workspace: `long-all` (a graph of long processes, two levels deep) and `short-all` (a few short processes)

const PATH = "/usr/local/bin:/usr/bin:/bin"
const longWidth = Math.ceil(settings.longProcs / 2)
const secs = (s: number) => s.toFixed(2)

const kilnJson = () => {
  const processes: Record<string, unknown> = {}
  const longNames: Array<string> = []
  for (let i = 0; i < settings.longProcs; i++) {
    const dep = i >= longWidth ? `long-${i - longWidth}` : undefined
    // Up to ±25% of the duration, seeded: processes of one run do not all end in the same instant.
    const d = settings.longSecs * (0.75 + random() / 2)
    const steps = [
      `sleep ${secs(d)}`,
      ...(dep === undefined ? [] : [`cat out/${dep}.txt > /dev/null`]),
      // One output of 600 KB: files of 512 KiB and more take the store's large-file path.
      ...(i === 0 ? ["head -c 600000 /dev/urandom > out/long-0.bin"] : []),
      `date +%s%N > out/long-${i}.txt`
    ]
    processes[`long-${i}`] = {
      argv: ["/bin/sh", "-c", steps.join(" && ")],
      inputs: ["in/**"],
      ...(dep === undefined ? {} : { deps: [dep] }),
      outputs: [`out/long-${i}.txt`, ...(i === 0 ? ["out/long-0.bin"] : [])],
      env: { PATH },
      cache: "never",
      timeout: "5m"
    }
    longNames.push(`long-${i}`)
  }
  processes["long-all"] = {
    argv: ["/bin/sh", "-c", "cat out/long-*.txt > out/long-all.txt"],
    inputs: ["in/**"],
    deps: longNames,
    outputs: ["out/long-all.txt"],
    env: { PATH },
    cache: "never"
  }
  const shortNames: Array<string> = []
  for (let i = 0; i < settings.shortProcs; i++) {
    // Every other short process is cacheable (same input, same output: a cache hit after the first run), so the
    // short runs exercise both the cache's reads and real spawns.
    const cached = i % 2 === 1
    processes[`short-${i}`] = {
      argv: [
        "/bin/sh",
        "-c",
        `sleep ${secs(settings.shortSecs)} && ${cached ? "cat in/seed.txt" : "date +%s%N"} > out/short-${i}.txt`
      ],
      inputs: ["in/**"],
      outputs: [`out/short-${i}.txt`],
      env: { PATH },
      cache: cached ? "successful" : "never"
    }
    shortNames.push(`short-${i}`)
  }
  processes["short-all"] = {
    argv: ["/bin/sh", "-c", "cat out/short-*.txt > out/short-all.txt"],
    inputs: ["in/**"],
    deps: shortNames,
    outputs: ["out/short-all.txt"],
    env: { PATH }
  }
  return { processes }
}

fs.mkdirSync(path.join(ws, "in", "data"), { recursive: true })
fs.writeFileSync(path.join(ws, "in", "seed.txt"), `chaos seed ${settings.seed}\n`)
// Every process's input tree: enough files that materializing a sandbox takes a while, so kills land during it.
for (let i = 0; i < settings.inputFiles; i++) {
  fs.writeFileSync(path.join(ws, "in", "data", `f${i}.txt`), `input file ${i}\n`)
}
fs.writeFileSync(path.join(ws, "kiln.json"), JSON.stringify(kilnJson(), null, 2) + "\n")

// ---------------------------------------------------------------------------------------------------------------
// Processes: listing /proc, and the harness's own runs

interface Proc {
  readonly pid: number
  readonly state: string
  readonly pgid: number
  readonly cmdline: string
  readonly cwd: string
}

const listProcs = (): Array<Proc> => {
  const procs: Array<Proc> = []
  for (const name of fs.readdirSync("/proc")) {
    if (!/^\d+$/.test(name) || Number(name) === process.pid) continue
    try {
      const stat = fs.readFileSync(`/proc/${name}/stat`, "utf8")
      const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ")
      const cmdline = fs.readFileSync(`/proc/${name}/cmdline`, "utf8").split("\0").filter((s) => s !== "").join(" ")
      let cwd = ""
      try {
        cwd = fs.readlinkSync(`/proc/${name}/cwd`)
      } catch {
        // Not ours to read, or gone.
      }
      procs.push({ pid: Number(name), state: fields[0] ?? "?", pgid: Number(fields[2]), cmdline, cwd })
    } catch {
      // It exited while we looked.
    }
  }
  return procs
}

/** The standby engines of this harness's runs: `kiln standby`, in its runtime directory. */
const standbysOf = (procs: ReadonlyArray<Proc>): Array<Proc> => {
  const ours = new Set(
    StandbyProtocol.standbyPids((pid) => Proc.environOf(pid)?.includes(`XDG_RUNTIME_DIR=${runtimeDir}`) === true)
  )
  return procs.filter((p) => ours.has(p.pid))
}

/** Stops standbys as a logout would (SIGTERM), and waits for them: what they leave is then counted. */
const stopStandbys = async (standbys: ReadonlyArray<Proc>) => {
  for (const p of standbys) signal(p.pid, "SIGTERM")
  for (let i = 0; i < 100 && standbys.some((p) => Proc.isAlive(p.pid)); i++) await sleep(50)
}

/** A live process of this harness's: run from the temp root, or naming it (a sandboxer names its socket). */
const ours = (p: Proc) =>
  p.state !== "Z" && (p.cmdline.includes(root) || p.cwd === root || p.cwd.startsWith(`${root}/`))

interface Sandboxer extends Proc {
  readonly parent: SandboxDir.Owner
}

const flagValue = (cmdline: string, flag: string) => cmdline.match(new RegExp(`(?:^| )${flag} (\\S+)`))?.[1]

const sandboxersOf = (procs: ReadonlyArray<Proc>): Array<Sandboxer> =>
  procs.filter((p) => ours(p) && p.cmdline.includes(" sandboxer ") && p.cmdline.includes(`--socket ${socketDir}/`))
    .map((p) => {
      const startTime = flagValue(p.cmdline, "--parent-start-time")
      return {
        ...p,
        parent: {
          pid: Number(flagValue(p.cmdline, "--parent-pid") ?? -1),
          startTime: startTime === "-" ? "" : startTime ?? ""
        }
      }
    })

const signal = (pid: number, sig: NodeJS.Signals): boolean => {
  try {
    process.kill(pid, sig)
    return true
  } catch (e) {
    if (errnoOf(e) !== "ESRCH") warn(`kill ${pid} ${sig}: ${e instanceof Error ? e.message : String(e)}`)
    return false
  }
}

type Role = "long" | "short" | "bystander" | "victim"

interface Run {
  readonly id: number
  readonly role: Role
  readonly child: ChildProcess
  readonly pid: number
  readonly log: string
  readonly startedAt: number
  endedAt: number | undefined
  exit: { readonly code: number | null; readonly signal: NodeJS.Signals | null } | undefined
  /** The signal the killer sent it (a victim). */
  signalled: NodeJS.Signals | undefined
  /** Whether its sandboxer was up when the signal went: the kill landed while it ran processes. */
  watchdogAtKill: boolean
  hung: boolean
  done: Promise<void>
}

const allRuns: Array<Run> = []
let runCounter = 0

const describeGroup = (pgid: number) =>
  listProcs().filter((p) => p.pgid === pgid).map((p) => `  pid ${p.pid} state ${p.state} cwd ${p.cwd}: ${p.cmdline}`)
    .join("\n")

const startRun = (round: number, role: Role): Run => {
  const id = ++runCounter
  const target = role === "long" || role === "bystander" ? "long-all" : "short-all"
  const concurrency = target === "long-all" ? longWidth : settings.shortProcs
  const log = path.join(runLogs, `round${round}-run${id}-${role}.log`)
  // O_APPEND: the harness appends its own notes (a signal sent) while the run writes.
  const fd = fs.openSync(log, "a")
  let child: ChildProcess
  try {
    child = spawn(
      process.execPath,
      [
        cli,
        "run",
        target,
        "--progress",
        "plain",
        "--concurrency",
        String(concurrency),
        ...(settings.remoteExecutor !== undefined ? ["--remote-executor", settings.remoteExecutor] : [])
      ],
      // A process group of its own: the harness can kill all of it at the end, and Ctrl-C reaches only the harness.
      { cwd: ws, env, detached: true, stdio: ["ignore", fd, fd] }
    )
  } finally {
    fs.closeSync(fd)
  }
  const run: Run = {
    id,
    role,
    child,
    pid: child.pid ?? -1,
    log,
    startedAt: Date.now(),
    endedAt: undefined,
    exit: undefined,
    signalled: undefined,
    watchdogAtKill: false,
    hung: false,
    done: Promise.resolve()
  }
  run.done = new Promise<void>((resolve) => {
    const timer = setTimeout(() => {
      run.hung = true
      fs.appendFileSync(
        log,
        `\n[chaos] run ${id} still going after ${settings.runTimeoutSecs}s: SIGKILL to its group. It held:\n` +
          `${describeGroup(run.pid)}\n`
      )
      signal(-run.pid, "SIGKILL")
    }, settings.runTimeoutSecs * 1000)
    const finish = (code: number | null, sig: NodeJS.Signals | null) => {
      if (run.exit !== undefined) return
      clearTimeout(timer)
      run.exit = { code, signal: sig }
      run.endedAt = Date.now()
      resolve()
    }
    child.once("exit", finish)
    child.once("error", (e) => {
      fs.appendFileSync(log, `\n[chaos] spawn failed: ${e.message}\n`)
      finish(null, null)
    })
  })
  allRuns.push(run)
  return run
}

const failed = (r: Run) => r.exit !== undefined && (r.exit.code !== 0 || r.exit.signal !== null)

/** The lines of a run's log where it found bytes missing from the store and re-made them. */
const missingLines = (file: string): Array<string> => {
  try {
    return fs.readFileSync(file, "utf8").split("\n").filter((l) => /(is|was) missing from the store/.test(l))
  } catch {
    return []
  }
}

const tail = (file: string, lines = 15) => {
  try {
    return fs.readFileSync(file, "utf8").trimEnd().split("\n").slice(-lines).map((l) => `    ${l}`).join("\n")
  } catch {
    return "    (no log)"
  }
}

// ---------------------------------------------------------------------------------------------------------------
// LMDB reader slots, through environments held open from before the first round (see the header)

interface HeldEnv {
  readonly path: string
  readonly env: { readerList(): string; readerCheck(): number; close(): Promise<void> }
}

let held: Array<HeldEnv> = []

const MiB = 1024 * 1024
const mapSizes: Record<string, number> = {
  files: 16 * 1024 * MiB,
  directories: 4 * 1024 * MiB,
  actions: 4 * 1024 * MiB,
  locks: 64 * MiB
}

const holdEnvironments = async () => {
  const { open } = await import("lmdb")
  for (const kind of Object.keys(mapSizes)) {
    let shards: Array<string>
    try {
      shards = fs.readdirSync(path.join(storeDir, kind)).sort()
    } catch (e) {
      if (errnoOf(e) === "ENOENT") continue
      throw e
    }
    for (const shard of shards) {
      const dir = path.join(storeDir, kind, shard)
      if (!fs.existsSync(path.join(dir, "lock.mdb"))) continue
      // As kiln opens it (lmdbEnvs.ts), read-only: this process only lists the reader table.
      const env = open<Buffer, Buffer>({
        path: dir,
        noSubdir: false,
        readOnly: true,
        mapSize: mapSizes[kind]!,
        maxReaders: 4096,
        maxDbs: 4,
        encoding: "binary",
        keyEncoding: "binary",
        compression: false,
        cache: false
      })
      held.push({ path: dir, env })
    }
  }
}

/** Reader-table slots held by dead processes: `[pid, thread, txnid]` per line, after a header. */
const staleReaders = () => {
  const stale: Array<string> = []
  for (const { env, path: dir } of held) {
    for (const line of env.readerList().split("\n").slice(1)) {
      const pid = line.trim().split(/\s+/)[0]
      if (pid !== undefined && /^\d+$/.test(pid) && !Proc.isAlive(Number(pid))) {
        stale.push(`${path.relative(storeDir, dir)}: ${line.trim()}`)
      }
    }
  }
  return stale
}

// ---------------------------------------------------------------------------------------------------------------
// Rounds

type Kind = "concurrency" | "kill"

const FIGURES = [
  "bystander failures",
  "hung",
  "stale readers",
  "orphaned sandboxers",
  "leaked sandboxes",
  "leftover sockets",
  "stray processes",
  "store check"
] as const
type Figure = typeof FIGURES[number]

interface RoundResult {
  readonly index: number
  readonly kind: Kind
  readonly runs: number
  readonly killed: string
  readonly wallSecs: number
  readonly figures: Record<Figure, number>
}

/** Where evidence goes when a figure is not zero (or always, with --logs). */
let keepDir: string | undefined = settings.logs
const evidenceDir = () => {
  if (keepDir === undefined) keepDir = fs.mkdtempSync(path.join(os.tmpdir(), "kiln-chaos-logs-"))
  fs.mkdirSync(keepDir, { recursive: true })
  return keepDir
}

const concurrencyRound = async (index: number) => {
  const longs = Array.from({ length: settings.longRuns }, () => startRun(index, "long"))
  let longsDone = false
  const loops = Array.from({ length: settings.shortLoops }, async () => {
    while (!longsDone) await startRun(index, "short").done
  })
  await Promise.all(longs.map((r) => r.done))
  longsDone = true
  await Promise.all(loops)
}

const killRound = async (index: number) => {
  const bystanders = Array.from({ length: settings.bystanders }, () => startRun(index, "bystander"))
  let bystandersDone = false
  const liveVictims = new Set<Run>()
  const loops = Array.from({ length: settings.victimLoops }, async () => {
    // After a killed run, one more: its open of the store is where kiln reclaims the dead run's reader slots.
    for (let lastKilled = false; !bystandersDone || lastKilled;) {
      const run = startRun(index, "victim")
      liveVictims.add(run)
      await run.done
      liveVictims.delete(run)
      lastKilled = run.signalled !== undefined
    }
  })
  let nextSignal: NodeJS.Signals = "SIGINT"
  const killer = setInterval(() => {
    if (bystandersDone) return
    const candidates = [...liveVictims].filter((r) => r.exit === undefined && r.signalled === undefined)
    if (candidates.length === 0) return
    const victim = candidates[Math.floor(random() * candidates.length)]!
    // Its watchdog is its spawner (a sandboxer runs only for large trees, or after it died).
    const watchdogUp = listProcs().some((p) => ours(p) && p.cmdline.endsWith(` kiln-spawner ${victim.pid}`))
    if (!signal(victim.pid, nextSignal)) return
    victim.watchdogAtKill = watchdogUp
    victim.signalled = nextSignal
    fs.appendFileSync(
      victim.log,
      `\n[chaos] sent ${nextSignal} to pid ${victim.pid} at ${new Date().toISOString()}, ` +
        `${Date.now() - victim.startedAt} ms after its start, ${watchdogUp ? "with" : "before"} its spawner\n`
    )
    nextSignal = nextSignal === "SIGINT" ? "SIGKILL" : "SIGINT"
  }, settings.killEverySecs * 1000)
  await Promise.all(bystanders.map((r) => r.done))
  bystandersDone = true
  clearInterval(killer)
  await Promise.all(loops)
}

const storeCheck = () =>
  spawnSync(process.execPath, [cli, "store", "check"], { cwd: ws, env, encoding: "utf8", timeout: 300_000 })

const cleanSandboxes = () =>
  spawnSync(process.execPath, [cli, "clean", "--sandbox-root", sandboxRoot], {
    cwd: root,
    env,
    encoding: "utf8",
    timeout: 120_000
  })

/** Sandbox dirs, and the owner and log files beside them, under the sandbox root whose owner is dead (or unreadable). */
const leakedSandboxes = () => {
  const names = new Set<string>()
  for (const name of fs.readdirSync(sandboxRoot)) {
    if (name.startsWith(SandboxDir.PREFIX)) names.add(SandboxDir.sandboxNameOf(name))
  }
  return [...names].filter((name) => {
    const owner = SandboxDir.readOwner(path.join(sandboxRoot, name))
    return owner === undefined || (owner.kept !== true && !Proc.ownerAlive(owner))
  })
}

/** A leaked sandbox for the evidence: its owner file, and when its dir last changed and how many files it holds. */
const describeSandbox = (name: string) => {
  const dir = path.join(sandboxRoot, name)
  let files = 0
  let mtime = "none (no dir)"
  try {
    mtime = fs.statSync(dir).mtime.toISOString()
    files = fs.readdirSync(dir, { recursive: true, withFileTypes: true }).filter((e) => e.isFile()).length
  } catch {
    // Gone meanwhile, or never made.
  }
  return `${name}: owner ${JSON.stringify(SandboxDir.readOwner(dir)) ?? "none"}, dir mtime ${mtime}, ${files} files`
}

const listSockets = () => {
  try {
    return fs.readdirSync(socketDir).filter((n) => n.endsWith(".sock"))
  } catch (e) {
    if (errnoOf(e) === "ENOENT") return []
    throw e
  }
}

const round = async (index: number, kind: Kind): Promise<RoundResult> => {
  const first = allRuns.length
  const t0 = Date.now()
  say(`round ${index}: ${kind}…`)
  if (kind === "concurrency") await concurrencyRound(index)
  else await killRound(index)
  const wallSecs = (Date.now() - t0) / 1000
  const runs = allRuns.slice(first)

  // Every engine of the round has exited: give what they left (a SIGKILLed engine's sandboxer notices within
  // 200 ms, drains, removes its sandboxes) the settle time, then look.
  await sleep(settings.settleSecs * 1000)
  const procs = listProcs()
  const sandboxers = sandboxersOf(procs)
  const orphans = sandboxers.filter((s) => !Proc.ownerAlive(s.parent))
  // A standby engine waits for the next run by design: one is expected, a second is a stray. Stopped now, it must
  // leave no socket (what `leftover sockets` then counts is a standby's that died, or anything else's).
  const standbys = standbysOf(procs)
  const strays = [
    ...procs.filter((p) => ours(p) && !sandboxers.some((s) => s.pid === p.pid)),
    ...standbys.slice(1)
  ]
  await stopStandbys(standbys)
  const stale = staleReaders()
  const leaked = leakedSandboxes()
  const sockets = listSockets()
  const check = storeCheck()

  const failures = runs.filter((r) => r.signalled === undefined && !r.hung && failed(r))
  const hung = runs.filter((r) => r.hung)
  const victims = runs.filter((r) => r.signalled !== undefined)
  const figures: Record<Figure, number> = {
    "bystander failures": failures.length,
    hung: hung.length,
    "stale readers": stale.length,
    "orphaned sandboxers": orphans.length,
    "leaked sandboxes": leaked.length,
    "leftover sockets": sockets.length,
    "stray processes": strays.length,
    "store check": check.status === 0 ? 0 : 1
  }
  const roles: Array<Role> = ["long", "short", "bystander", "victim"]
  const byRole = roles.filter((role) => runs.some((r) => r.role === role))
    .map((role) => `${runs.filter((r) => r.role === role).length} ${role}`)
  const exits = (sig: NodeJS.Signals) => {
    const codes = victims.filter((r) => r.signalled === sig).map((r) =>
      `${r.hung ? "hung" : r.exit?.signal ?? String(r.exit?.code)}${r.watchdogAtKill ? "" : " (before its spawner)"}`
    )
    return codes.length === 0 ? "none" : codes.join(",")
  }
  say(
    `round ${index}: ${kind}: ${runs.length} runs (${byRole.join(", ")}) in ${wallSecs.toFixed(1)}s; ` +
      `SIGINT victims exited ${exits("SIGINT")}; SIGKILL victims ${exits("SIGKILL")}; ` +
      FIGURES.map((f) => `${f} ${figures[f]}`).join(", ")
  )

  const bad = FIGURES.some((f) => figures[f] !== 0)
  for (const r of [...failures, ...hung]) {
    const how = r.hung ? "hung" : `exited ${r.exit?.code ?? r.exit?.signal}`
    const took = ((r.endedAt ?? Date.now()) - r.startedAt) / 1000
    warn(`round ${index}: run ${r.id} (${r.role}, pid ${r.pid}) ${how} after ${took.toFixed(1)}s; its log ends:`)
    warn(tail(r.log))
  }

  for (const s of orphans) {
    warn(`round ${index}: orphaned sandboxer pid ${s.pid} (parent ${s.parent.pid}): ${s.cmdline}`)
  }
  for (const p of strays) warn(`round ${index}: stray process pid ${p.pid} state ${p.state} cwd ${p.cwd}: ${p.cmdline}`)
  for (const s of stale.slice(0, 10)) warn(`round ${index}: stale reader slot ${s}`)
  if (stale.length > 10) warn(`round ${index}: … and ${stale.length - 10} more stale reader slots`)
  for (const l of leaked) warn(`round ${index}: leaked sandbox ${describeSandbox(l)}`)
  for (const s of sockets) warn(`round ${index}: leftover socket ${path.join(socketDir, s)}`)
  if (check.status !== 0) {
    warn(`round ${index}: kiln store check exited ${check.status ?? check.signal}:\n${check.stdout}${check.stderr}`)
  }
  // Nothing removes entries from the store here (no GC, no clean), so bytes a run found missing and made again are a
  // store anomaly even when the run succeeded: not a figure (the engine recovered), but shown, with the logs kept.
  const remade = runs.flatMap((r) => missingLines(r.log).map((line) => ({ r, line })))
  for (const { line, r } of remade) warn(`round ${index}: run ${r.id} (${r.role}) recovered missing bytes: ${line}`)
  if (remade.length > 0) {
    const dir = path.join(evidenceDir(), `round${index}-${kind}-recovered`)
    fs.mkdirSync(dir, { recursive: true })
    for (const { r } of remade) fs.copyFileSync(r.log, path.join(dir, path.basename(r.log)))
  }

  if (bad || settings.logs !== undefined) {
    const dir = path.join(evidenceDir(), `round${index}-${kind}`)
    fs.mkdirSync(dir, { recursive: true })
    // Every run's log (they are small), and when each ran: to tell which run a leftover came from.
    for (const r of bad ? runs : [...failures, ...hung, ...victims]) {
      fs.copyFileSync(r.log, path.join(dir, path.basename(r.log)))
    }
    try {
      for (const name of fs.readdirSync(socketDir)) {
        if (name.endsWith(".log")) fs.copyFileSync(path.join(socketDir, name), path.join(dir, `sandboxer-${name}`))
      }
    } catch {
      // No sandboxer left a log.
    }
    fs.writeFileSync(
      path.join(dir, "figures.txt"),
      [
        `seed ${settings.seed}`,
        `figures ${JSON.stringify(figures)}`,
        ...orphans.map((s) => `orphaned sandboxer ${s.pid} state ${s.state}: ${s.cmdline}`),
        ...strays.map((p) => `stray ${p.pid} state ${p.state} cwd ${p.cwd}: ${p.cmdline}`),
        ...stale.map((s) => `stale reader ${s}`),
        ...leaked.map((l) => `leaked sandbox ${describeSandbox(l)}`),
        ...sockets.map((s) => `leftover socket ${s}`),
        `store check: exit ${check.status}\n${check.stdout}${check.stderr}`
      ].join("\n") + "\n"
    )
    fs.writeFileSync(
      path.join(dir, "timeline.txt"),
      runs.map((r) =>
        `run ${r.id} ${r.role} pid ${r.pid} ${new Date(r.startedAt).toISOString()} → ` +
        `${r.endedAt === undefined ? "?" : new Date(r.endedAt).toISOString()} ` +
        `exit ${r.hung ? "hung" : r.exit?.signal ?? r.exit?.code}${
          r.signalled === undefined ? "" : ` (sent ${r.signalled})`
        }`
      ).join("\n") + "\n"
    )
  }
  // Sandboxers' logs of this round are kept (above) or dropped: each round starts from a clean runtime dir.
  try {
    for (const name of fs.readdirSync(socketDir)) {
      if (name.endsWith(".log")) fs.rmSync(path.join(socketDir, name), { force: true })
    }
  } catch {
    // No runtime dir yet.
  }

  // Each round's figures are its own: clear what this one left before the next starts.
  if (bad) {
    for (const p of [...orphans, ...strays]) signal(p.pid, "SIGKILL")
    for (const s of sockets) fs.rmSync(path.join(socketDir, s), { force: true })
    // Directly: a sweep leaves an ownerless sandbox alone for a minute (its owner may be about to write the file).
    for (const l of leaked) {
      removeTree(path.join(sandboxRoot, l))
      for (const suffix of [SandboxDir.STDOUT_SUFFIX, SandboxDir.STDERR_SUFFIX]) {
        fs.rmSync(path.join(sandboxRoot, `${l}${suffix}`), { force: true })
      }
      fs.rmSync(SandboxDir.ownerFileOf(path.join(sandboxRoot, l)), { force: true })
    }
  }
  for (const { env } of held) env.readerCheck()

  return {
    index,
    kind,
    runs: runs.length,
    killed: `${victims.filter((r) => r.signalled === "SIGINT").length}/${
      victims.filter((r) => r.signalled === "SIGKILL").length
    }`,
    wallSecs,
    figures
  }
}

// ---------------------------------------------------------------------------------------------------------------
// The table

const table = (results: ReadonlyArray<RoundResult>) => {
  const header = ["round", "kind", "runs", "INT/KILL", "wall s", ...FIGURES]
  const total = (f: Figure) => results.reduce((n, r) => n + r.figures[f], 0)
  const rows = [
    ...results.map((r) => [
      String(r.index),
      r.kind,
      String(r.runs),
      r.kind === "kill" ? r.killed : "-",
      r.wallSecs.toFixed(1),
      ...FIGURES.map((f) => String(r.figures[f]))
    ]),
    ["total", "", String(results.reduce((n, r) => n + r.runs, 0)), "", "", ...FIGURES.map((f) => String(total(f)))]
  ]
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((row) => row[i]!.length)))
  const line = (cells: ReadonlyArray<string>) => `| ${cells.map((c, i) => c.padEnd(widths[i]!)).join(" | ")} |`
  return [line(header), `|${widths.map((w) => "-".repeat(w + 2)).join("|")}|`, ...rows.map(line)].join("\n")
}

// ---------------------------------------------------------------------------------------------------------------
// Clean-up: every process it started, the sandboxes, the temp root; on every way out

let cleanedUp = false
const cleanup = () => {
  if (cleanedUp) return
  cleanedUp = true
  // Process groups of runs: a run still going leads its group; an ended run's group is ours only while a member of
  // it still runs from the temp root (a pgid can be reused once its group is empty).
  const procs = listProcs()
  for (const run of allRuns) {
    if (run.pid <= 0) continue
    if (run.exit === undefined || procs.some((p) => p.pgid === run.pid && ours(p))) signal(-run.pid, "SIGKILL")
  }
  // Then anything else running from the temp root (a process that left its group).
  for (let attempt = 0; attempt < 20; attempt++) {
    const left = listProcs().filter(ours)
    if (left.length === 0) break
    for (const p of left) signal(p.pid, "SIGKILL")
    sleepSync(100)
  }
  held = []
  const clean = cleanSandboxes()
  if (clean.status !== 0) warn(`kiln clean exited ${clean.status ?? clean.signal}: ${clean.stdout}${clean.stderr}`)
  try {
    removeTree(root)
  } catch (e) {
    warn(`could not remove ${root}: ${e instanceof Error ? e.message : String(e)}`)
  }
}

for (const sig of ["SIGINT", "SIGTERM", "SIGHUP"] as const) {
  process.once(sig, () => {
    warn(`${sig}: stopping every run and removing ${root}`)
    cleanup()
    process.exit(130)
  })
}
process.once("exit", cleanup)

// ---------------------------------------------------------------------------------------------------------------
// Main

const main = async (): Promise<number> => {
  say(
    `chaos: seed ${settings.seed}, ${settings.rounds} concurrency + ${settings.rounds} kill round(s); ` +
      `long runs ${settings.longProcs} processes × ~${settings.longSecs}s, short runs ${settings.shortProcs} × ` +
      `${settings.shortSecs}s, ${settings.inputFiles} input files; root ${root}`
  )
  if (!fs.existsSync(cli)) {
    warn(`${cli} is missing: run npm run build first`)
    return 2
  }
  // One run first: it creates the store, whose environments this harness then holds open.
  const warmup = startRun(0, "short")
  await warmup.done
  if (failed(warmup) || warmup.hung) {
    warn(`the warm-up run failed (${JSON.stringify(warmup.exit)}); its log ends:\n${tail(warmup.log, 40)}`)
    return 2
  }
  await holdEnvironments()
  if (held.length === 0) {
    warn(`no LMDB environment under ${storeDir} after the warm-up run`)
    return 2
  }
  const results: Array<RoundResult> = []
  for (let i = 0; i < settings.rounds; i++) {
    results.push(await round(2 * i + 1, "concurrency"))
    results.push(await round(2 * i + 2, "kill"))
  }
  say("")
  say(table(results))
  const bad = results.some((r) => FIGURES.some((f) => r.figures[f] !== 0))
  say("")
  if (keepDir !== undefined) say(`chaos: logs kept in ${keepDir}`)
  say(bad ? `chaos: FAILED (seed ${settings.seed}): some figure is not zero` : "chaos: every figure is zero")
  return bad ? 1 : 0
}

main().then(
  (code) => {
    cleanup()
    process.exit(code)
  },
  (e) => {
    warn(`harness error: ${e instanceof Error ? e.stack : String(e)}`)
    cleanup()
    process.exit(2)
  }
)
