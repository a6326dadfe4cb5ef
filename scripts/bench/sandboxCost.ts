/**
 * Issue #37's cost figure: cold `kiln run`s of one workspace with kiln's default sandbox (the strict view, where this
 * machine can make it) beside the same runs with `--sandbox off`, in the same run, the reps interleaved in rotated
 * order, each on a fresh store with the workspace's outputs removed. What `bench:peers --sandbox-cost` and
 * `bench:trees --sandbox-cost` measure on their workloads (`bench:cold` has the same contender on its own).
 */
import * as fs from "node:fs"
import { expectRan, killLive, kilnRun, type Workspace } from "./kiln.js"
import {
  fmtMs,
  median,
  ms,
  progress,
  ratioText,
  rm,
  rotate,
  type Row,
  type Samples,
  type TempRoot,
  times
} from "./report.js"

/** Issue #37: a cold run in the strict sandbox costs at most this much more than one with `--sandbox off`. */
export const SANDBOX_TARGET = 1.15

/** `--sandbox-cost` (its default reps) or `--sandbox-cost=N` (N reps): undefined when the flag is absent. */
export const sandboxCostReps = (defaultReps: number): number | undefined => {
  const arg = process.argv.find((a) => a === "--sandbox-cost" || a.startsWith("--sandbox-cost="))
  if (arg === undefined) return undefined
  const n = arg === "--sandbox-cost" ? defaultReps : Number(arg.slice("--sandbox-cost=".length))
  if (!Number.isInteger(n) || n < 1) throw new Error(`${arg}: the reps must be a whole number of at least 1`)
  return n
}

type Contender = "default" | "off"

export interface SandboxCost {
  readonly label: string
  readonly processes: number
  readonly reps: number
  /** The sandbox kiln's summary says the processes had, by contender (`strict`, `mount`, `none`). */
  readonly kinds: Record<Contender, ReadonlySet<string>>
  /** Each rep's default ÷ off, and (default − off) in ms: the two runs of a rep ran one right after the other. */
  readonly pairs: ReadonlyArray<{ readonly ratio: number; readonly diffMs: number }>
}

export const sampleNames = (label: string) => ({
  default: `kiln cold ${label}, default sandbox`,
  off: `kiln cold ${label} --sandbox off`,
  defaultEngine: `kiln cold ${label}, default sandbox: engine (--summary wallMs)`,
  offEngine: `kiln cold ${label} --sandbox off: engine (--summary wallMs)`,
  defaultCpu: `kiln cold ${label}, default sandbox: CPU of its tree (user + sys)`,
  offCpu: `kiln cold ${label} --sandbox off: CPU of its tree (user + sys)`
})

/**
 * A wrapper around each run, for the CPU (user + sys) of kiln's whole tree: on a shared, loaded machine wall times
 * swing with the others' work, CPU much less. GNU time would count only the descendants kiln waits for, and kiln
 * exits without reaping its spawner (whose children are the reapers and the processes): the wrapper is a child
 * subreaper (PR_SET_CHILD_SUBREAPER), so the spawner is reparented to it and reaped, and it writes kiln's own time
 * from fork to exit (what the run's figure is, as without it), then the tree's user and sys seconds once every
 * descendant has been reaped. The kernel's work in its own threads (a network namespace's teardown) is in neither.
 */
const SUBREAPER = [
  "import ctypes, os, resource, sys, time",
  "ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0)",
  "out, argv = sys.argv[1], sys.argv[2:]",
  "t0 = time.monotonic()",
  "pid = os.fork()",
  "if pid == 0:",
  "    os.execv(argv[0], argv)",
  "status, ms = 1, 0.0",
  "while True:",
  "    try:",
  "        p, st = os.wait()",
  "    except ChildProcessError:",
  "        break",
  "    if p == pid:",
  "        status, ms = os.waitstatus_to_exitcode(st), (time.monotonic() - t0) * 1000",
  "ru = resource.getrusage(resource.RUSAGE_CHILDREN)",
  "open(out, 'w').write(f'{ms} {ru.ru_utime} {ru.ru_stime}')",
  "sys.exit(status if status >= 0 else 128 - status)"
].join("\n")
const PYTHON = "/usr/bin/python3"

/**
 * One untimed cold run of each contender (the page cache, the sandbox root's first sandboxes), then `reps` timed
 * pairs, each on a fresh store after `clean` (untimed: the workspace's outputs removed). Every run must run every
 * process (its summary is checked); a failed run throws, since a comparison missing a side says nothing.
 */
export const measureSandboxCost = async (o: {
  readonly tmp: TempRoot
  readonly env: NodeJS.ProcessEnv
  readonly samples: Samples
  readonly label: string
  /** The workspace's kiln.json (both contenders run the same copy). */
  readonly config: string
  readonly processes: number
  readonly concurrency: number
  readonly reps: number
  /** Further arguments of every run (`--sandbox-root`). */
  readonly args?: ReadonlyArray<string>
  readonly clean: () => void
  /** A run that takes longer is ended (every live child SIGKILLed) and fails the comparison. */
  readonly limitMs: number
}): Promise<SandboxCost> => {
  const names = sampleNames(o.label)
  const kinds = { default: new Set<string>(), off: new Set<string>() }
  const withCpu = fs.existsSync(PYTHON)
  const ws: Pick<Workspace, "config"> = { config: o.config }
  const once = async (which: Contender) => {
    const store = o.tmp.fresh("store")
    o.clean()
    const cpuFile = o.tmp.fresh("cpu")
    const limit = setTimeout(killLive, o.limitMs)
    try {
      const r = await kilnRun(o.tmp, o.env, {
        ws,
        store,
        concurrency: o.concurrency,
        args: [...(o.args ?? []), ...(which === "off" ? ["--sandbox", "off"] : [])],
        ...(withCpu ? { wrapper: [PYTHON, "-c", SUBREAPER, cpuFile] } : {})
      })
      expectRan(`${which} ${o.label}`, r, o.processes, o.processes)
      for (const p of r.summary.processes) kinds[which].add(p.sandbox ?? "null")
      if (!withCpu) return { ...r, cpuMs: undefined }
      const [kilnMs, user, sys] = fs.readFileSync(cpuFile, "utf8").trim().split(" ").map(Number)
      return { ...r, ms: kilnMs!, cpuMs: (user! + sys!) * 1000 }
    } finally {
      clearTimeout(limit)
      rm(store)
      rm(cpuFile)
    }
  }
  progress(
    `${o.label}: an untimed cold run each, then ${o.reps} interleaved pair${
      o.reps === 1 ? "" : "s"
    } (default sandbox, --sandbox off)`
  )
  for (const which of ["default", "off"] as const) await once(which)
  const pairs: Array<{ ratio: number; diffMs: number }> = []
  for (let i = 0; i < o.reps; i++) {
    const rep: Partial<Record<Contender, number>> = {}
    for (const which of rotate(["default", "off"] as const, i)) {
      const r = await once(which)
      rep[which] = r.ms
      o.samples.record(which === "off" ? names.off : names.default, r.ms)
      o.samples.record(which === "off" ? names.offEngine : names.defaultEngine, r.summary.wallMs)
      if (r.cpuMs !== undefined) o.samples.record(which === "off" ? names.offCpu : names.defaultCpu, r.cpuMs)
    }
    pairs.push({ ratio: rep.default! / rep.off!, diffMs: rep.default! - rep.off! })
    progress(`${o.label}: rep ${i + 1}: ${ms(rep.default!)} / ${ms(rep.off!)} ms (${times(rep.default! / rep.off!)})`)
  }
  return { label: o.label, processes: o.processes, reps: o.reps, kinds, pairs }
}

const geomean = (xs: ReadonlyArray<number>) => Math.exp(xs.reduce((a, x) => a + Math.log(x), 0) / xs.length)

const perProcess = (x: number, n: number) => `${(x / n).toFixed(2)} ms/process`

/** The comparison's rows: the ratio (with its target), the per-process set-up cost, and the same inside the engine. */
export const sandboxCostRows = (samples: Samples, c: SandboxCost): Array<Row> => {
  const names = sampleNames(c.label)
  const [d, off] = [samples.summary(names.default), samples.summary(names.off)]
  const de = samples.summary(names.defaultEngine)
  const offE = samples.summary(names.offEngine)
  const n = c.processes
  const kinds = (k: ReadonlySet<string>) => [...k].join(", ")
  return [
    {
      figure: `${c.label}: cold \`kiln run\` (fresh store), default sandbox (${kinds(c.kinds.default)}) beside ` +
        `\`--sandbox off\` (${kinds(c.kinds.off)}), ${c.reps} interleaved pair${c.reps === 1 ? "" : "s"}`,
      value: fmtMs(d),
      baseline: `--sandbox off ${fmtMs(off)}`,
      ratio: `${ratioText(d, off)}; geometric mean of the pairs' ratios ${times(geomean(c.pairs.map((p) => p.ratio)))}`,
      target: { op: "<=", value: SANDBOX_TARGET, actual: d.median / off.median, unit: "×" }
    },
    {
      figure: `  ${c.label}: the sandbox's per-process set-up cost, (default − off) / ${n}`,
      value: `${perProcess(d.median - off.median, n)} (medians; the pairs' differences: median ${
        perProcess(median(c.pairs.map((p) => p.diffMs)), n)
      }, ${c.pairs.map((p) => (p.diffMs / n).toFixed(1)).join(" / ")})`,
      baseline: "",
      ratio: ""
    },
    {
      figure: `  ${c.label}: inside \`engine.run\` only (\`--summary\` wallMs: no start-up, no exit)`,
      value: `${ms(de.median)} ms: (default − off) / ${n} = ${perProcess(de.median - offE.median, n)}`,
      baseline: `--sandbox off ${ms(offE.median)} ms`,
      ratio: times(de.median / offE.median)
    },
    ...(samples.has(names.defaultCpu) && samples.has(names.offCpu) ? [cpuRow(samples, c)] : [])
  ]
}

const cpuRow = (samples: Samples, c: SandboxCost): Row => {
  const names = sampleNames(c.label)
  const [d, off] = [samples.summary(names.defaultCpu), samples.summary(names.offCpu)]
  return {
    figure: `  ${c.label}: CPU of kiln's whole process tree, user + sys (reaped by a subreaper)`,
    value: `${fmtMs(d)}: (default − off) / ${c.processes} = ${perProcess(d.median - off.median, c.processes)} CPU`,
    baseline: `--sandbox off ${fmtMs(off)}`,
    ratio: ratioText(d, off)
  }
}

export const sandboxCostNotes = (o: { readonly what: string }): string =>
  [
    "Notes:",
    `- ${o.what}`,
    "- Each contender: `kiln run --config kiln.json --store-dir S --concurrency C --progress none --summary F`" +
    " (kiln's default sandbox: the strict view where this machine can make it) and the same with `--sandbox off`" +
    " (a sandbox directory and the mount namespace of the exec root only), on the same copy of the workspace, a fresh" +
    " store every run and the workspace's outputs removed first (both untimed), timed from spawn to exit by a python3" +
    " child subreaper around kiln, which also reaps kiln's spawner (kiln exits without reaping it) and so sums the" +
    " user + sys CPU of the whole tree (the spawner, the reapers, the processes); every" +
    " summary checked (every process ran). One untimed run of each first, then the timed pairs, the order rotated" +
    " every rep. Medians, mins in brackets; the geometric mean is of each pair's ratio (the two runs of a pair ran" +
    " one right after the other, so a change of load between pairs moves both).",
    `- Target (issue #37): the default ≤ ${SANDBOX_TARGET}× \`--sandbox off\`; the per-process cost is the difference` +
    " of the medians over the processes of one run."
  ].join("\n")
