/**
 * The runner benchmark (`npm run bench:runner`, part of `npm run bench`): 200 trivial processes (`/bin/true`, each
 * with its own one-file input tree, so that each is a distinct action) through the whole stack — ProcessRunner, the
 * real spawner process (a sandboxer is not needed for small trees), sandboxes, a fresh temp store — beside a bare `child_process.spawn` of the same command at
 * the same concurrency, in the same run. Run alone, it prints its report; `--quick` runs 100 processes, 2 reps. It
 * never fails on a missed target: it reports.
 *
 * For profiling: `node --cpu-prof dist/bench/runner.mjs --only=kiln --sandboxer-cpu-prof=DIR`. `--only=kiln` or
 * `--only=bare` runs one contender and prints the cold (and cached) windows (in the profiles' clock) to stderr;
 * `--sandboxer-cpu-prof=DIR` runs the sandboxer under `--cpu-prof` too (Node refuses it in NODE_OPTIONS).
 */
import { Context, Effect, Layer } from "effect"
import { spawn } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import type * as Digest from "../../src/domain/Digest.js"
import { Process, type ProcessResult } from "../../src/domain/Process.js"
import * as ProcessRunner from "../../src/layers/runner/ProcessRunner.js"
import * as Sandboxes from "../../src/layers/sandbox/Sandboxes.js"
import * as Sandboxer from "../../src/layers/sandboxer/Sandboxer.js"
import { nativeName, PROGRAM_ENV } from "../../src/layers/spawner/Warm.js"
import * as Store from "../../src/layers/store/Store.js"
import {
  argValue,
  cli,
  emit,
  fmtMs as fmtSummary,
  ms as f1,
  now,
  progress,
  quantile,
  quick,
  ratioText as ratioOf,
  rawTable,
  rm,
  rotate,
  type Row,
  Samples,
  tempRoot,
  timeEffect as timeEffectIn
} from "./report.js"

const PROCESSES = quick ? 100 : 200
const REPS = quick ? 2 : 3
const CONCURRENCY = os.availableParallelism()
const COMMAND = ["/bin/true"] as const
const PHASES = ["cacheLookup", "queue", "materialize", "run", "capture"] as const

const CONTENDERS = ["kiln", "bare"] as const
type Contender = typeof CONTENDERS[number]
const onlyArg = argValue("only")
const selected: ReadonlySet<string> = new Set(onlyArg === undefined ? CONTENDERS : onlyArg.split(","))
const runs = (c: Contender) => selected.has(c)
const sandboxerProfDir = argValue("sandboxer-cpu-prof")
const sandboxerCommand = [
  process.execPath,
  ...(sandboxerProfDir === undefined ? [] : ["--cpu-prof", `--cpu-prof-dir=${path.resolve(sandboxerProfDir)}`]),
  cli
]
// The spawner program beside the CLI's bundles (dist/), as the CLI runs it: the library's modules look for it
// relative to where they are built, and bundled into this benchmark they are in dist/bench/.
const dist = path.dirname(fs.realpathSync(cli))
process.env[PROGRAM_ENV] ??= fs.existsSync(path.join(dist, nativeName))
  ? path.join(dist, nativeName)
  : path.join(dist, "spawner.cjs")

// ---------------------------------------------------------------------------------------------------------------
// Measurements

const samples = new Samples()
const record = (name: string, ms: number) => samples.record(name, ms)
const summary = (name: string) => samples.summary(name)

/** Per-process figures (phase timings of every result, and each `run` call's latency), by name; not in `samples`. */
const perProcess = new Samples()
const recordPer = (name: string, ms: number) => perProcess.record(name, ms)

/** CPU time (user + system, ms) this process spent since `since`. */
const recordCpu = (name: string, since: NodeJS.CpuUsage) => {
  const d = process.cpuUsage(since)
  record(name, (d.user + d.system) / 1000)
}

/** CPU time (user + system, ms) another process has spent so far, from /proc; 0 where /proc is not there. */
/** This process's spawner (`node …/dist/spawner.cjs kiln-spawner <pid>`), from /proc. */
const spawnerPid = (): number | undefined => {
  for (const name of fs.readdirSync("/proc")) {
    if (!/^\d+$/.test(name)) continue
    try {
      if (fs.readFileSync(`/proc/${name}/cmdline`, "utf8").endsWith(`\0kiln-spawner\0${process.pid}\0`)) {
        return Number(name)
      }
    } catch {
      // Gone meanwhile, or not ours to read.
    }
  }
  return undefined
}

const cpuOfPid = (pid: number): number => {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, "utf8")
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ")
    return ((Number(fields[11]) + Number(fields[12])) * 1000) / 100
  } catch {
    return 0
  }
}

const timeAsync = <A>(name: string, f: () => Promise<A>): Promise<A> => samples.timeAsync(name, f)
const timeEffect = <A, E>(name: string, eff: Effect.Effect<A, E>): Effect.Effect<A, E> =>
  timeEffectIn(samples, name, eff)

// ---------------------------------------------------------------------------------------------------------------
// Temp dirs: one root, removed at the end (and on Ctrl-C). It is short: the sandboxer's socket goes under it.

const tmp = tempRoot("kiln-bench-runner-")
const tmpRoot = tmp.root
const freshDir = tmp.fresh

/** One tiny directory per process (`p<i>/input.txt`, distinct contents) plus one for the untimed first runs. */
const inputsDir = path.join(tmpRoot, "inputs")
const inputNames = [...Array.from({ length: PROCESSES }, (_, i) => `p${i}`), "first", "second"]
const writeInputs = () => {
  for (const name of inputNames) {
    fs.mkdirSync(path.join(inputsDir, name), { recursive: true })
    fs.writeFileSync(path.join(inputsDir, name, "input.txt"), `input of ${name}\n`)
  }
}

const processOf = (name: string, inputDigest: Digest.Digest) =>
  new Process({ argv: [...COMMAND], env: {}, inputDigest, description: `bench ${name}` })

// ---------------------------------------------------------------------------------------------------------------
// kiln: the whole stack on a fresh store, sandbox root and sandboxer socket dir

const stackLayer = (root: string) =>
  ProcessRunner.layer({ namedCachesDir: path.join(root, "named_caches"), concurrency: CONCURRENCY }).pipe(
    Layer.provideMerge(
      Layer.mergeAll(
        Sandboxer.layer({ command: sandboxerCommand, socketDir: path.join(root, "sock") }),
        Sandboxes.layer({ root: path.join(root, "sandboxes"), keep: "never", sweepOnStart: false })
      )
    ),
    Layer.provideMerge(Store.layer({ root: path.join(root, "store") }))
  )

const check = (what: string, results: ReadonlyArray<ProcessResult>, source: ProcessResult["source"]) => {
  const bad = results.filter((r) => r.exitCode !== 0 || r.source !== source)
  if (bad.length > 0) {
    throw new Error(`${what}: ${bad.length} of ${results.length} results are not exit 0 / ${source}`)
  }
}

/**
 * One rep: a fresh stack; the inputs snapshotted (untimed); one process run alone (the spawner starts on this
 * first request) and a second one alone (started); then the 200 cold, then the same 200 again (all hits).
 */
const kilnRep = async () => {
  const root = freshDir("kiln")
  let tClose = 0
  await Effect.runPromise(Effect.scoped(Effect.gen(function*() {
    const t0 = now()
    const ctx = yield* Layer.build(stackLayer(root))
    record("open the stack: store, sandboxes (untimed elsewhere)", now() - t0)
    const store = Context.get(ctx, Store.Store)
    const runner = Context.get(ctx, ProcessRunner.ProcessRunner)
    const sandboxer = Context.get(ctx, Sandboxer.Sandboxer)

    const digests = yield* timeEffect(
      `snapshot the ${inputNames.length} input dirs (untimed elsewhere)`,
      Effect.forEach(inputNames, (name) => store.snapshot(path.join(inputsDir, name)))
    )
    const byName = new Map(inputNames.map((name, i) => [name, processOf(name, digests[i]!)]))
    const batch = inputNames.slice(0, PROCESSES).map((name) => byName.get(name)!)

    const first = yield* timeEffect("first run of one process (starts the spawner)", runner.run(byName.get("first")!))
    const spawner = spawnerPid()
    if (spawner === undefined) throw new Error("the spawner did not start")
    // Nothing here starts a sandboxer: its trees are small (the engine writes them), and the spawner is the watchdog.
    if ((yield* sandboxer.pid)._tag === "Some") progress("warning: a sandboxer was started")
    const second = yield* timeEffect("second run of one process (spawner up)", runner.run(byName.get("second")!))
    check("single runs", [first, second], "ran")

    const timedRun = (label: "cold" | "cached") => (p: Process) =>
      Effect.suspend(() => {
        const t = now()
        return Effect.tap(runner.run(p), (r) =>
          Effect.sync(() => {
            const latency = now() - t
            recordPer(`${label} latency of one run call`, latency)
            let phases = 0
            for (const [phase, ms] of Object.entries(r.timings)) {
              recordPer(`${label} ${phase}`, ms)
              if ((PHASES as ReadonlyArray<string>).includes(phase)) phases += ms
            }
            recordPer(`${label} latency minus the phases`, latency - phases)
          }))
      })

    const coldStart = process.hrtime.bigint()
    const cpu0 = process.cpuUsage()
    const spawnerCpu0 = cpuOfPid(spawner)
    const cold = yield* timeEffect(
      "kiln cold",
      Effect.forEach(batch, timedRun("cold"), { concurrency: CONCURRENCY })
    )
    recordCpu("kiln cold: engine CPU", cpu0)
    record("kiln cold: spawner CPU", cpuOfPid(spawner) - spawnerCpu0)
    // For profiles: CLOCK_MONOTONIC in µs, the clock of a .cpuprofile's timestamps.
    if (onlyArg !== undefined) progress(`cold window (µs): ${coldStart / 1000n} ${process.hrtime.bigint() / 1000n}`)
    check("cold", cold, "ran")
    const cachedStart = process.hrtime.bigint()
    const cached = yield* timeEffect(
      "kiln cached",
      Effect.forEach(batch, timedRun("cached"), { concurrency: CONCURRENCY })
    )
    if (onlyArg !== undefined) progress(`cached window (µs): ${cachedStart / 1000n} ${process.hrtime.bigint() / 1000n}`)
    check("cached", cached, "cache-hit")
    tClose = now()
  })))
  record("close the stack: end the spawner (untimed elsewhere)", now() - tClose)
  const left = fs.readdirSync(path.join(root, "sandboxes")).filter((x) => !x.endsWith(".owner"))
  if (left.length > 0) progress(`warning: ${left.length} sandboxes were left behind`)
  rm(root)
}

// ---------------------------------------------------------------------------------------------------------------
// Baseline: the same command spawned from Node, as kiln spawns it (own process group, stdout and stderr piped, an
// empty environment), N in flight at a time, each awaited until it exited and its pipes closed.

const spawnOne = (cwd: string) =>
  new Promise<void>((resolve, reject) => {
    const child = spawn(COMMAND[0], COMMAND.slice(1), {
      cwd,
      env: {},
      detached: true,
      stdio: ["ignore", "pipe", "pipe"]
    })
    child.stdout.resume()
    child.stderr.resume()
    child.once("error", reject)
    child.once("close", (code) => (code === 0 ? resolve() : reject(new Error(`${COMMAND[0]} exited with ${code}`))))
  })

const pool = async (count: number, concurrency: number, f: (i: number) => Promise<void>) => {
  let next = 0
  const worker = async () => {
    while (next < count) await f(next++)
  }
  await Promise.all(Array.from({ length: Math.min(concurrency, count) }, worker))
}

const bareRep = async () => {
  const cwd = freshDir("bare")
  fs.mkdirSync(cwd)
  const cpu0 = process.cpuUsage()
  await timeAsync("bare spawn", () => pool(PROCESSES, CONCURRENCY, () => spawnOne(cwd)))
  recordCpu("bare spawn: engine CPU", cpu0)
  rm(cwd)
}

// ---------------------------------------------------------------------------------------------------------------
// Report

const fmtMs = (name: string) => fmtSummary(summary(name))
const perProc = (name: string) => {
  const s = summary(name)
  return `${(s.median / PROCESSES).toFixed(2)} ms/process (min ${(s.min / PROCESSES).toFixed(2)})`
}
const ratioText = (a: string, b: string) => ratioOf(summary(a), summary(b))

const rows = (): Array<Row> => {
  const out: Array<Row> = []
  const has = (name: string) => samples.has(name)
  if (has("kiln cold") && has("bare spawn")) {
    const cold = summary("kiln cold")
    const bare = summary("bare spawn")
    out.push({
      figure: `${PROCESSES} × \`${COMMAND.join(" ")}\`, cold (every one runs), ${CONCURRENCY} in flight`,
      value: `${fmtMs("kiln cold")}: ${perProc("kiln cold")}`,
      baseline: `bare spawn ${fmtMs("bare spawn")}: ${perProc("bare spawn")}`,
      ratio: ratioText("kiln cold", "bare spawn"),
      target: { op: "<=", value: 2, actual: cold.median / bare.median, unit: "×" }
    })
    out.push({
      figure: `  per-process overhead, (cold − bare) / ${PROCESSES}`,
      value: `${((cold.median - bare.median) / PROCESSES).toFixed(2)} ms/process (mins: ${
        ((cold.min - bare.min) / PROCESSES).toFixed(2)
      })`,
      baseline: "",
      ratio: ""
    })
  }
  if (has("kiln cold") && has("kiln cached")) {
    out.push({
      figure: `the same ${PROCESSES} again, cached (every one hits)`,
      value: `${fmtMs("kiln cached")}: ${perProc("kiln cached")}`,
      baseline: `cold ${fmtMs("kiln cold")}`,
      ratio: `speedup ${ratioText("kiln cold", "kiln cached")}`,
      target: {
        op: ">=",
        value: 20,
        actual: summary("kiln cold").median / summary("kiln cached").median,
        unit: "×"
      }
    })
  }
  if (has("kiln cached") && has("bare spawn")) {
    out.push({
      figure: "  cached vs bare spawn",
      value: "",
      baseline: "",
      ratio: ratioText("kiln cached", "bare spawn")
    })
  }
  if (has("kiln cold: engine CPU") && has("bare spawn: engine CPU")) {
    out.push({
      figure: "  CPU per process: the engine's (this process), cold",
      value: perProc("kiln cold: engine CPU"),
      baseline: `bare ${perProc("bare spawn: engine CPU")}`,
      ratio: ratioText("kiln cold: engine CPU", "bare spawn: engine CPU")
    })
    out.push({
      figure: "  CPU per process: the spawner's (it forks every process), cold",
      value: perProc("kiln cold: spawner CPU"),
      baseline: "",
      ratio: ""
    })
  }
  const firstName = "first run of one process (starts the spawner)"
  const secondName = "second run of one process (spawner up)"
  if (has(firstName)) {
    out.push({
      figure: "spawner start-up: the first run of one process, alone",
      value: fmtMs(firstName),
      baseline: `second run, alone ${fmtMs(secondName)}`,
      ratio: `+${f1(summary(firstName).median - summary(secondName).median)} ms`
    })
  }
  return out
}

const phaseTable = () => {
  const names = [...PHASES, "latency of one run call", "latency minus the phases"]
  const cell = (label: string, name: string) => {
    const xs = perProcess.get(`${label} ${name}`)
    if (xs.length === 0) return "–"
    const s = perProcess.summary(`${label} ${name}`)
    return `${s.median.toFixed(1)} / ${quantile(xs, 0.9).toFixed(1)} / ${s.max.toFixed(0)}`
  }
  return [
    "| phase (ms per process) | cold: median / p90 / max | cached: median / p90 / max |",
    "|---|---|---|",
    ...names.map((n) => `| ${n} | ${cell("cold", n)} | ${cell("cached", n)} |`)
  ].join("\n")
}

const NOTES = `Notes:
- Each figure is the median of ${REPS} reps (the best rep in brackets); ratios are of medians, "mins" of the
  best reps. cold/bare is lower-is-better (target ≤ 2×), cold/cached is a speedup (target ≥ 20×). kiln and the
  baseline run interleaved, in rotated order, one rep each at a time.
- kiln: every rep builds the whole stack afresh (a fresh store, sandbox root and sandboxer socket dir; the real
  spawner process, which is the watchdog too; no sandboxer starts, as the input trees are small) with ProcessRunner
  \`concurrency: ${CONCURRENCY}\` (= \`os.availableParallelism()\`), and snapshots the ${PROCESSES} one-file input dirs
  (untimed). Then one process runs alone (the spawner starts on this first request), and a second one alone; then
  the ${PROCESSES} distinct
  processes go through \`ProcessRunner.run\` with \`Effect.forEach(…, { concurrency: ${CONCURRENCY} })\` (cold:
  every one misses the cache and runs), then the same ${PROCESSES} again (cached: every one hits). Every result is
  checked (exit 0; \`ran\`, resp. \`cache-hit\`). Opening and closing the stack are timed apart (raw table).
- baseline: \`child_process.spawn\` of the same \`${COMMAND.join(" ")}\` as kiln spawns it (detached, empty
  environment, stdout and stderr piped and drained), ${CONCURRENCY} in flight at a time, each awaited until it
  exited and its pipes closed.
- phases: \`result.timings\` of every run in every rep (cold: ${REPS} × ${PROCESSES} runs; cached: the same), as
  the runner reports them; "latency of one run call" is each \`run\` effect's wall time measured here, and "minus
  the phases" is what the five phases do not cover (sandbox creation and removal, the action lock, writing the
  action-cache entry).`

// ---------------------------------------------------------------------------------------------------------------

const main = async () => {
  if (!fs.existsSync(cli)) throw new Error(`${cli} is missing: run \`npm run build\` first`)
  const loadStart = os.loadavg()
  const t0 = now()
  try {
    writeInputs()
    progress(`${PROCESSES} × ${COMMAND.join(" ")}, ${CONCURRENCY} in flight, ${REPS} reps`)
    for (let i = 0; i < REPS; i++) {
      for (const which of rotate(CONTENDERS, i).filter(runs)) {
        progress(`rep ${i + 1}/${REPS}: ${which}`)
        if (which === "kiln") await kilnRep()
        else await bareRep()
      }
    }
  } finally {
    tmp.cleanup()
  }
  emit({
    name: "runner",
    title: `Runner: ${PROCESSES} trivial processes through ProcessRunner, beside a bare spawn`,
    quick,
    wallSeconds: (now() - t0) / 1000,
    loadStart,
    loadEnd: os.loadavg(),
    rows: rows(),
    body: [
      "Phases (`result.timings`):",
      "",
      phaseTable(),
      "",
      NOTES,
      "",
      "Raw measurements:",
      "",
      rawTable(samples)
    ].join("\n")
  }, path.dirname(tmpRoot))
}

await main()
