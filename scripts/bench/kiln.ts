/**
 * What the CLI benchmarks (noop, cold, scale) share: generated workspaces of small processes in three shapes, `kiln
 * run` driven through the real CLI with everything it writes kept under the benchmark's temp root, a bare spawn of
 * the same graph at the same concurrency, and a check that nothing was left running.
 */
import { type ChildProcess, spawn } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import * as Proc from "../../src/os/Proc.js"
import { standbyPids } from "../../src/programs/kiln/standby/protocol.js"
import {
  cli,
  emit,
  kilnStart,
  now,
  progress,
  quick,
  rawTable,
  rm,
  type Row,
  type Samples,
  type TempRoot
} from "./report.js"

// ---------------------------------------------------------------------------------------------------------------
// Workspaces

/** wide: N independent processes; chain: each depends on the one before; diamond: layers of 1 and W, alternating. */
export type Shape = "wide" | "chain" | "diamond"
export const SHAPES: ReadonlyArray<Shape> = ["wide", "chain", "diamond"]

/** The fan-out of a diamond: every one of W processes depends on the join before, and the next join on all W. */
export const DIAMOND_WIDTH = 32
export const FILES_PER_PROCESS = 5
const PATH = "/usr/bin:/bin"

export interface Node {
  readonly name: string
  readonly deps: ReadonlyArray<string>
  readonly argv: ReadonlyArray<string>
}

export interface Workspace {
  readonly dir: string
  readonly config: string
  readonly shape: Shape
  readonly nodes: ReadonlyArray<Node>
  /** The last process: nothing depends on it, so editing its input re-runs it alone. */
  readonly leaf: Node
  /** One of the leaf's input files. */
  readonly leafFile: string
}

/** A workspace to measure: its shape and its number of processes. */
export interface Case {
  readonly shape: Shape
  readonly n: number
}

/** The cold benchmark's workspaces (and the remote one's): 1,000 processes of each shape; `--quick`: 200 or 100. */
export const SIZED_CASES: ReadonlyArray<Case> = SHAPES.map((shape) => ({
  shape,
  n: quick ? (shape === "wide" ? 200 : 100) : 1000
}))

export const caseLabel = (c: Case) => `${c.shape} ${c.n.toLocaleString("en-US")}`

const depsOf = (shape: Shape, n: number): Array<Array<number>> => {
  const deps: Array<Array<number>> = []
  if (shape === "wide") { for (let i = 0; i < n; i++) deps.push([]) }
  else if (shape === "chain") { for (let i = 0; i < n; i++) deps.push(i === 0 ? [] : [i - 1]) }
  else {
    let previous: Array<number> = []
    let wideLayer = false
    while (deps.length < n) {
      const size = Math.min(wideLayer ? DIAMOND_WIDTH : 1, n - deps.length)
      const layer: Array<number> = []
      for (let k = 0; k < size; k++) {
        layer.push(deps.length)
        deps.push(previous)
      }
      previous = layer
      wideLayer = !wideLayer
    }
  }
  return deps
}

/**
 * Writes a workspace of `n` processes in `shape` into `dir`: process `p<i>` has 5 small input files `src/p<i>/f<j>.txt`
 * (their contents start with `salt`, so that workspaces with different salts share no action) and one tiny output
 * `out/p<i>.txt`, the `cksum` of its own files and of its deps' outputs (which kiln lays into its input tree). With
 * `waitMs`, each process first sleeps that long: a tool that takes time without taking CPU.
 */
export const writeWorkspace = (
  dir: string,
  shape: Shape,
  n: number,
  salt: string,
  options: { readonly waitMs?: number } = {}
): Workspace => {
  const wait = options.waitMs === undefined ? "" : `sleep ${(options.waitMs / 1000).toFixed(3)}; `
  const nodes: Array<Node> = []
  const processes: Record<string, unknown> = {}
  for (const [i, deps] of depsOf(shape, n).entries()) {
    const name = `p${i}`
    const src = path.join(dir, "src", name)
    fs.mkdirSync(src, { recursive: true })
    for (let j = 0; j < FILES_PER_PROCESS; j++) fs.writeFileSync(path.join(src, `f${j}.txt`), `${salt} ${name} f${j}\n`)
    const depNames = deps.map((d) => `p${d}`)
    const argv = [
      "/bin/sh",
      "-c",
      `${wait}cksum src/${name}/*${depNames.map((d) => ` out/${d}.txt`).join("")} > out/${name}.txt`
    ]
    nodes.push({ name, deps: depNames, argv })
    processes[name] = {
      argv,
      inputs: [`src/${name}/**`],
      ...(depNames.length > 0 ? { deps: depNames } : {}),
      outputs: [`out/${name}.txt`],
      env: { PATH }
    }
  }
  const config = path.join(dir, "kiln.json")
  fs.writeFileSync(config, JSON.stringify({ processes }, null, 1))
  const leaf = nodes[nodes.length - 1]!
  return { dir, config, shape, nodes, leaf, leafFile: path.join(dir, "src", leaf.name, "f0.txt") }
}

// ---------------------------------------------------------------------------------------------------------------
// kiln run, through the CLI

/** The environment of every kiln run: sandboxes, named caches and the sandboxers' sockets under the temp root. */
export const kilnEnv = (tmp: TempRoot): NodeJS.ProcessEnv => {
  const runtimeDir = path.join(tmp.root, "run")
  fs.mkdirSync(runtimeDir, { recursive: true, mode: 0o700 })
  fs.mkdirSync(path.join(tmp.root, "sandboxes"), { recursive: true })
  return {
    ...Object.fromEntries(
      Object.entries(process.env).filter(([k]) => !k.startsWith("KILN_") && k !== "XDG_CACHE_HOME")
    ),
    KILN_SANDBOX_ROOT: path.join(tmp.root, "sandboxes"),
    KILN_NAMED_CACHES_DIR: path.join(tmp.root, "named"),
    XDG_RUNTIME_DIR: runtimeDir,
    XDG_CACHE_HOME: path.join(tmp.root, "cache")
  }
}

/** Every child started here and not yet exited, so that Ctrl-C can end their process groups. */
const live = new Set<ChildProcess>()
/** Tracks a child until it exits, for {@link killLive}. */
export const trackLive = (child: ChildProcess): void => {
  live.add(child)
  child.once("exit", () => live.delete(child))
}
export const killLive = (): void => {
  for (const child of live) {
    try {
      if (child.pid !== undefined) process.kill(-child.pid, "SIGKILL")
    } catch {
      // Already gone.
    }
  }
}

export interface Exited {
  /** From spawn to the process's exit, in ms. */
  readonly ms: number
  readonly code: number | null
  readonly signal: NodeJS.Signals | null
}

/**
 * Spawns `argv` in a process group of its own with stdout and stderr into `log`, and resolves when it exits (not
 * when its pipes close: a sandboxer that outlives its engine by a moment does not count).
 */
export const timedSpawn = (
  argv: ReadonlyArray<string>,
  o: { readonly env: NodeJS.ProcessEnv; readonly log: string; readonly cwd?: string }
) =>
  new Promise<Exited>((resolve, reject) => {
    const fd = fs.openSync(o.log, "a")
    let child: ChildProcess
    const t0 = now()
    try {
      child = spawn(argv[0]!, argv.slice(1), {
        env: o.env,
        detached: true,
        stdio: ["ignore", fd, fd],
        ...(o.cwd !== undefined ? { cwd: o.cwd } : {})
      })
    } finally {
      fs.closeSync(fd)
    }
    live.add(child)
    child.once("error", (e) => {
      live.delete(child)
      reject(e)
    })
    child.once("exit", (code, signal) => {
      const ms = now() - t0
      live.delete(child)
      resolve({ ms, code, signal })
    })
  })

export interface RunSummary {
  readonly processes: ReadonlyArray<
    { readonly name: string; readonly source: string; readonly exitCode: number; readonly sandbox?: string | null }
  >
  readonly ran: number
  readonly cacheHits: number
  readonly failed: number
  readonly wallMs: number
}

export interface KilnRun extends Exited {
  readonly summary: RunSummary
}

const tail = (file: string) => {
  try {
    return fs.readFileSync(file, "utf8").split("\n").slice(-20).join("\n")
  } catch {
    return ""
  }
}

/**
 * `kiln run` of the whole workspace on `store`, end to end, with `--progress none` and a `--summary` (read after the
 * run, to check what ran). Throws when the run fails.
 */
export const kilnRun = async (
  tmp: TempRoot,
  env: NodeJS.ProcessEnv,
  o: {
    readonly ws: Pick<Workspace, "config">
    readonly store: string
    readonly concurrency: number
    readonly args?: ReadonlyArray<string>
    /** A command that runs kiln's, timed with it (`/usr/bin/time -f … -o FILE`, for the CPU of kiln's tree). */
    readonly wrapper?: ReadonlyArray<string>
    /**
     * Started as a user's `kiln` is, the package's bin (`dist/kiln`, see `kilnStart`): a standby an earlier run left
     * takes the run on. Each run then waits for the standby it leaves, as a user's next command comes after it.
     * Otherwise `node dist/cli.js`, whose every run pays Node's start and the engine's loading.
     */
    readonly bin?: boolean
  }
): Promise<KilnRun> => {
  const summaryFile = tmp.fresh("summary")
  const log = tmp.fresh("log")
  const exited = await timedSpawn([
    ...(o.wrapper ?? []),
    ...(o.bin === true ? kilnStart() : [process.execPath, cli]),
    "run",
    "--config",
    o.ws.config,
    "--store-dir",
    o.store,
    "--concurrency",
    String(o.concurrency),
    "--progress",
    "none",
    "--summary",
    summaryFile,
    ...(o.args ?? [])
  ], { env, log })
  if (exited.code !== 0) {
    throw new Error(
      `kiln run of ${o.ws.config} exited with ${exited.code ?? exited.signal}:\n${tail(log)}`
    )
  }
  const summary = JSON.parse(fs.readFileSync(summaryFile, "utf8")) as RunSummary
  rm(summaryFile)
  rm(log)
  if (o.bin === true) await settleStandby(tmp)
  return { ...exited, summary }
}

/** Checks what a run did: `ran` processes ran and every other one was a cache hit. */
export const expectRan = (what: string, run: KilnRun, total: number, ran: number): void => {
  const s = run.summary
  if (s.processes.length !== total || s.ran !== ran || s.cacheHits !== total - ran || s.failed !== 0) {
    throw new Error(
      `${what}: expected ${total} processes, ${ran} ran and ${total - ran} cached; got ${s.processes.length}, ` +
        `${s.ran} ran, ${s.cacheHits} cached, ${s.failed} failed`
    )
  }
}

// ---------------------------------------------------------------------------------------------------------------
// Baseline: the same graph's commands spawned from Node

const spawnOne = (argv: ReadonlyArray<string>, cwd: string) =>
  new Promise<void>((resolve, reject) => {
    const child = spawn(argv[0]!, argv.slice(1), {
      cwd,
      env: { PATH },
      detached: true,
      stdio: ["ignore", "pipe", "pipe"]
    })
    live.add(child)
    child.stdout.resume()
    child.stderr.resume()
    child.once("error", (e) => {
      live.delete(child)
      reject(e)
    })
    child.once("close", (code) => {
      live.delete(child)
      if (code === 0) resolve()
      else reject(new Error(`${argv.join(" ")} exited with ${code}`))
    })
  })

/**
 * Runs every process's command in `ws.dir` (a copy of the workspace: its `out/` is emptied first) with
 * `child_process.spawn` as kiln spawns it (own process group, stdout and stderr piped and drained, only PATH in the
 * environment), at most `concurrency` at once, each as soon as its deps have exited: the floor of a scheduler with no
 * sandbox and no cache.
 * Resolves with the wall time in ms.
 */
export const bareGraph = async (ws: Workspace, concurrency: number): Promise<number> => {
  rm(path.join(ws.dir, "out"))
  fs.mkdirSync(path.join(ws.dir, "out"))
  const waiting = new Map(ws.nodes.map((n) => [n.name, n.deps.length]))
  const dependents = new Map<string, Array<string>>(ws.nodes.map((n) => [n.name, []]))
  for (const n of ws.nodes) for (const d of n.deps) dependents.get(d)!.push(n.name)
  const byName = new Map(ws.nodes.map((n) => [n.name, n]))
  const ready = ws.nodes.filter((n) => n.deps.length === 0).map((n) => n.name)
  const t0 = now()
  await new Promise<void>((resolve, reject) => {
    let running = 0
    let done = 0
    let failed = false
    const pump = () => {
      if (done === ws.nodes.length) return resolve()
      while (!failed && running < concurrency && ready.length > 0) {
        const name = ready.shift()!
        running++
        spawnOne(byName.get(name)!.argv, ws.dir).then(() => {
          running--
          done++
          for (const d of dependents.get(name)!) {
            const left = waiting.get(d)! - 1
            waiting.set(d, left)
            if (left === 0) ready.push(d)
          }
          pump()
        }, (e) => {
          failed = true
          reject(e)
        })
      }
    }
    pump()
  })
  return now() - t0
}

// ---------------------------------------------------------------------------------------------------------------
// The end

const procs = () => {
  const out: Array<{ pid: number; cmdline: string; cwd: string }> = []
  for (const name of fs.readdirSync("/proc")) {
    if (!/^\d+$/.test(name) || Number(name) === process.pid) continue
    try {
      const stat = fs.readFileSync(`/proc/${name}/stat`, "utf8")
      if (stat.slice(stat.lastIndexOf(")") + 2).startsWith("Z")) continue
      const cmdline = fs.readFileSync(`/proc/${name}/cmdline`, "utf8").split("\0").join(" ")
      let cwd = ""
      try {
        cwd = fs.readlinkSync(`/proc/${name}/cwd`)
      } catch {
        // Not ours to read.
      }
      out.push({ pid: Number(name), cmdline, cwd })
    } catch {
      // Gone while we looked.
    }
  }
  return out
}

/**
 * The standby engines (`src/programs/kiln/standby/`) of the runs under `tmp`: kiln processes waiting for the next run,
 * found by the runtime directory {@link kilnEnv} gives. A run one takes on is its engine: its memory counts among the
 * run's (`extraRoots`).
 */
export const standbysOf = (tmp: TempRoot): Array<number> => {
  const runtime = `XDG_RUNTIME_DIR=${path.join(tmp.root, "run")}`
  return standbyPids((pid) => Proc.environOf(pid)?.includes(runtime) === true)
}

/**
 * After a kiln run: waits (up to 3 s) for the standby it started to be loaded and listening, as a user's next command
 * comes after it. The next run measured, of kiln or of another tool, then does not share the machine with its
 * loading; one that comes sooner than that finds no standby and loads the engine itself. Then (up to 10 s more) for
 * the engine that took the run on to be gone: its client is released once the outcome is said, and its stack closes
 * after (the store's environments synced, what it added noted in the store), so a cold rep that empties the store
 * right after would race with those writes (`rmdir`: ENOTEMPTY).
 */
export const settleStandby = async (tmp: TempRoot): Promise<void> => {
  const dir = path.join(tmp.root, "run", "kiln")
  const listening = () => {
    try {
      return fs.readdirSync(dir).some((f) => f.startsWith("standby-") && f.endsWith(".sock"))
    } catch {
      return false
    }
  }
  for (let i = 0; i < 300 && standbysOf(tmp).length > 0 && !listening(); i++) {
    await new Promise((r) => setTimeout(r, 10))
  }
  for (let i = 0; i < 1000 && standbysOf(tmp).length > (listening() ? 1 : 0); i++) {
    await new Promise((r) => setTimeout(r, 10))
  }
}

/**
 * After every run ended: stops the standby engines of the runs (they wait by design, and are not counted), then
 * waits up to 3 s for every process of the temp root (a sandboxer names its socket there; a sandboxed process runs
 * there) to end, then SIGKILLs what is left by pid and counts it, and counts the sandboxes left in the sandbox root.
 * Both should be 0; the section's notes print them.
 */
export const leftovers = async (tmp: TempRoot): Promise<{ readonly processes: number; readonly sandboxes: number }> => {
  for (const pid of standbysOf(tmp)) {
    try {
      process.kill(pid, "SIGTERM")
    } catch {
      // Gone.
    }
  }
  const ours = () =>
    procs().filter((p) => p.cmdline.includes(tmp.root) || p.cwd === tmp.root || p.cwd.startsWith(`${tmp.root}/`))
  let left = ours()
  for (let i = 0; i < 30 && left.length > 0; i++) {
    await new Promise((r) => setTimeout(r, 100))
    left = ours()
  }
  for (const p of left) {
    progress(`warning: still running after the benchmark, killed: pid ${p.pid}: ${p.cmdline}`)
    try {
      process.kill(p.pid, "SIGKILL")
    } catch {
      // Gone.
    }
  }
  let sandboxes = 0
  try {
    sandboxes = fs.readdirSync(path.join(tmp.root, "sandboxes")).filter((x) => !x.endsWith(".owner")).length
  } catch {
    // No sandbox root: no run made one.
  }
  if (sandboxes > 0) progress(`warning: ${sandboxes} sandboxes were left behind`)
  return { processes: left.length, sandboxes }
}

/**
 * Emits the section of a benchmark that drives `kiln run`: its rows, then its notes, what it left behind (see
 * {@link leftovers}) and its raw measurements.
 */
export const emitRunSection = (
  s: {
    readonly name: string
    readonly title: string
    readonly started: number
    readonly loadStart: ReadonlyArray<number>
    readonly rows: ReadonlyArray<Row>
    readonly notes: string
    readonly left: { readonly processes: number; readonly sandboxes: number }
    readonly samples: Samples
  },
  tmp: TempRoot
): void =>
  emit({
    name: s.name,
    title: s.title,
    quick,
    wallSeconds: (now() - s.started) / 1000,
    loadStart: s.loadStart,
    loadEnd: os.loadavg(),
    rows: s.rows,
    body: [
      s.notes,
      `- Left behind at the end: ${s.left.processes} processes, ${s.left.sandboxes} sandboxes.`,
      "",
      "Raw measurements:",
      "",
      rawTable(s.samples)
    ].join("\n")
  }, path.dirname(tmp.root))
