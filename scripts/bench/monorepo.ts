/**
 * The real-monorepo benchmark (`npm run bench:monorepo [-- --reps 3] [-- --only react-email]
 * [-- --scenarios cold,noop] [-- --profile root]`; issue #36; not part of `npm run bench`): real open-source workspaces
 * (scripts/bench/monorepo/repos.ts: a pnpm one with its own Turborepo, an npm-workspaces one), installed at their lock
 * files, each run by kiln (kiln.json's `tasks`, a few lines as a user writes them: scripts/bench/monorepo/kilnConfig.ts)
 * and by Turborepo (`turbo run build test`), each on its own copy, 2 tasks at a time, one tool after the other with the
 * reps interleaved in rotated order:
 * - cold: outputs removed, every cache emptied;
 * - warm no-op: nothing changed since the last run (three runs each a rep);
 * - restore: the build outputs deleted, the caches kept (three runs each a rep);
 * - leaf edit: a source file of a package nothing depends on gets new contents;
 * - root edit: a file most tasks depend on gets new contents (a package most depend on, or the root tsconfig.json);
 * - the peak RSS of each tool's process tree, over all its timed runs.
 * Both tools' build outputs are compared, byte for byte, after the first cold runs and at the end; every run is
 * checked (every task succeeded; how many ran and how many came from a cache). It reports ratios, kiln / Turborepo,
 * medians of one run; it never fails on a missed target. Run without `--only` and `--scenarios`, it writes its section
 * into scripts/bench/report.md.
 *
 * `--profile <scenario>[,<scenario>…]`: after the reps, one more kiln run of each scenario with `--trace` and `node --cpu-prof`,
 * summarised in the section (scripts/bench/monorepo/profile.ts).
 */
import { execFileSync } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { killLive, leftovers, timedSpawn } from "./kiln.js"
import { kilnConfigOf, kilnProcesses } from "./monorepo/kilnConfig.js"
import { cpuSummary, traceSummary } from "./monorepo/profile.js"
import { prepare, type Prepared, type Repo, REPOS } from "./monorepo/repos.js"
import {
  CONCURRENCY,
  type Counted,
  type Installed,
  installTools,
  kilnSession,
  outputDigests,
  type Session,
  type ToolName,
  turboSession
} from "./monorepo/tools.js"
import { readWorkspace, transitiveDeps, type Workspace } from "./monorepo/workspace.js"
import { ensureTime } from "./peers/proc.js"
import {
  cli,
  closingNotes,
  emit,
  now,
  progress,
  renderSection,
  repo,
  rm,
  rotate,
  type Row,
  Samples,
  type Section,
  sh,
  tempRoot,
  times,
  writeOwnSection
} from "./report.js"

// ---------------------------------------------------------------------------------------------------------------
// Flags: `--name value` or `--name=value`

const flag = (name: string): string | undefined => {
  const args = process.argv.slice(2)
  const i = args.indexOf(`--${name}`)
  if (i >= 0 && args[i + 1] !== undefined && !args[i + 1]!.startsWith("--")) return args[i + 1]
  return args.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3)
}

type Scenario = "cold" | "noop" | "restore" | "leaf" | "root"
const SCENARIOS: ReadonlyArray<Scenario> = ["cold", "noop", "restore", "leaf", "root"]

/**
 * Runs of each tool a rep makes of a scenario that takes milliseconds: a restore's time moves by tens of per cent from
 * one run to the next with what the file system just freed (docs/bench-log.md, session 52), and three more runs cost
 * well under a second.
 */
const QUICK_RUNS: Partial<Record<Scenario, number>> = { noop: 3, restore: 3 }
const SCENARIO_TEXT: Record<Scenario, string> = {
  cold: "cold (no outputs, empty caches)",
  noop: "warm no-op (nothing changed)",
  restore: "restore (outputs deleted, caches kept)",
  leaf: "one leaf edited",
  root: "root edited"
}
/** kiln / Turborepo, medians of one run (issue #36). */
const TARGET = 1.0
const RSS_TARGET = 1.1

const reps = Number(flag("reps") ?? "3")
const onlyArg = flag("only")
const scenariosArg = flag("scenarios")
const profileArg = flag("profile")?.split(",") as Array<Scenario> | undefined

const selected = <T extends string>(all: ReadonlyArray<T>, arg: string | undefined, what: string): Array<T> => {
  if (arg === undefined) return [...all]
  const wanted = arg.split(",")
  const unknown = wanted.filter((w) => !all.includes(w as T))
  if (unknown.length > 0) throw new Error(`--${what}: unknown ${unknown.join(", ")} (of ${all.join(", ")})`)
  return all.filter((x) => wanted.includes(x))
}

const reportFile = path.join(repo, "scripts", "bench", "report.md")
const tmp = tempRoot("kiln-bench-mono-", killLive)
const samples = new Samples()
const rss = new Map<string, number>()
/** How many tasks ran in each timed run, by `<tool> <repo> <scenario>`. */
const ranCounts = new Map<string, Array<number>>()
const problems: Array<string> = []
const notesByRepo = new Map<string, Array<string>>()

const warn = (msg: string) => {
  problems.push(msg)
  progress(`WARNING: ${msg}`)
}
const note = (r: Repo, line: string) => {
  notesByRepo.set(r.key, [...(notesByRepo.get(r.key) ?? []), line])
  progress(`${r.key}: ${line}`)
}

// ---------------------------------------------------------------------------------------------------------------
// One repository

interface Bench {
  readonly r: Repo
  readonly ws: Workspace
  readonly taskCount: number
  /** The tasks of the leaf's package and of its dependents: what a leaf edit must re-run. */
  readonly leafTasks: number
  readonly live: Array<Session>
}

/**
 * New contents for an edited file, different for every `n`: a TypeScript export named after the file (a package that
 * re-exports two edited ones, as `export *`, must not see one name twice), or whitespace in JSON.
 */
const edited = (original: string, file: string, n: number) =>
  file.endsWith(".json")
    ? `${original.trimEnd()}\n${" ".repeat(n)}\n`
    : `${original.trimEnd()}\nexport const kilnBenchEdit_${file.replace(/\W/g, "_")}_${n} = ${n};\n`

const originals = new Map<string, string>()
const edit = (s: Session, rel: string, n: number) => {
  const file = path.join(s.root, rel)
  const key = `${s.root}\0${rel}`
  if (!originals.has(key)) originals.set(key, fs.readFileSync(file, "utf8"))
  fs.writeFileSync(file, edited(originals.get(key)!, rel, n))
}

const expectedRan = (b: Bench, scn: Scenario): number | undefined =>
  scn === "cold" ? b.taskCount : scn === "noop" || scn === "restore" ? 0 : scn === "leaf" ? b.leafTasks : undefined

/** Readies `s` for `scn` (untimed), then one run; recorded unless `untimed`. A failure drops the tool. */
const runOne = async (b: Bench, s: Session, scn: Scenario, i: number, untimed = false) => {
  const what = `${s.tool} ${b.r.key} ${scn}${untimed ? " (untimed)" : ""}`
  let c: Counted
  try {
    if (scn === "cold") s.toCold()
    else if (scn === "restore") s.dropOutputs()
    else if (scn === "leaf") edit(s, b.r.leafFile, i + 1)
    else if (scn === "root") edit(s, b.r.rootFile, i + 1)
    c = await s.run({ rss: !untimed })
  } catch (e) {
    warn(`${what} FAILED: ${(e instanceof Error ? e.message : String(e)).split("\n").slice(0, 30).join("\n    ")}`)
    b.live.splice(b.live.indexOf(s), 1)
    return
  }
  const expected = expectedRan(b, scn)
  if (expected !== undefined && c.ran !== expected) warn(`${what}: ${c.ran} tasks ran, not ${expected}`)
  if (untimed) return
  progress(
    `${what}: ${(c.ms / 1000).toFixed(2)} s, ${c.ran} ran, ${c.cached} cached, ${Math.round(c.peakRssKb / 1024)} MB`
  )
  samples.record(`${s.tool} ${b.r.key} ${scn}`, c.ms)
  const key = `${s.tool} ${b.r.key} ${scn}`
  ranCounts.set(key, [...(ranCounts.get(key) ?? []), c.ran])
  rss.set(`${s.tool} ${b.r.key}`, Math.max(rss.get(`${s.tool} ${b.r.key}`) ?? 0, c.peakRssKb))
}

const compareOutputs = (b: Bench, when: string) => {
  const [k, t] = [b.live.find((s) => s.tool === "kiln"), b.live.find((s) => s.tool === "turbo")]
  if (k === undefined || t === undefined) return
  const dk = outputDigests(b.ws, b.r, k.root)
  const dt = outputDigests(b.ws, b.r, t.root)
  const bad = [...dk].filter(([task, d]) => d === "missing" || d === "empty" || dt.get(task) !== d)
  if (bad.length === 0) note(b.r, `${when}: the ${dk.size} builds' outputs are byte-identical (kiln, turbo)`)
  else {
    warn(
      `${b.r.key} ${when}: ${bad.length} of ${dk.size} build outputs differ or are missing: ${
        bad.slice(0, 5).map(([task, d]) => `${task} (kiln ${d.slice(0, 12)}, turbo ${dt.get(task)?.slice(0, 12)})`)
          .join("; ")
      }`
    )
  }
}

/**
 * `cp -a`: each tool's own copy of the installed tree (pnpm's symlinks are relative and stay inside it), patched again:
 * a tree installed before a change to the patch gets it too.
 */
const copyOf = (p: Prepared, tool: ToolName, r: Repo): string => {
  const dest = tmp.fresh(`${tool}-${r.key}`)
  execFileSync("cp", ["-a", p.tree, dest])
  r.patch(dest)
  return dest
}

const profileRun = async (b: Bench, scn: Scenario) => {
  const s = b.live.find((x) => x.tool === "kiln")
  if (s === undefined) return
  const dir = tmp.fresh("profile")
  fs.mkdirSync(dir)
  const trace = path.join(dir, "trace.json")
  if (scn === "cold") s.toCold()
  else if (scn === "restore") s.dropOutputs()
  else if (scn === "leaf") edit(s, b.r.leafFile, reps + 1)
  else if (scn === "root") edit(s, b.r.rootFile, reps + 1)
  progress(`${b.r.key}: a profiled kiln run of ${scn}`)
  const t0 = now()
  const c = await s.run({ rss: false, nodeArgs: ["--cpu-prof", `--cpu-prof-dir=${dir}`], args: ["--trace", trace] })
  const lines = [
    `profiled kiln run of ${SCENARIO_TEXT[scn]} (not a rep): ${
      ((now() - t0) / 1000).toFixed(2)
    } s, ${c.ran} ran, ${c.cached} cached`,
    ...traceSummary(trace)
  ]
  const profiles = fs.readdirSync(dir).filter((f) => f.endsWith(".cpuprofile"))
  for (const f of profiles) lines.push(...cpuSummary(path.join(dir, f)).map((l) => `${f.split(".")[3] ?? f}: ${l}`))
  for (const l of lines) note(b.r, l)
  // Kept for a closer look: the trace opens in Perfetto, the profiles in Chrome's DevTools.
  const keep = path.join(os.tmpdir(), `kiln-bench-mono-profile-${b.r.key}-${scn}`)
  rm(keep)
  fs.cpSync(dir, keep, { recursive: true })
  note(b.r, `profile and trace kept in ${keep}`)
}

/** Pairs of `turbo --version` started each way: enough for a stable median of a difference of a few tens of ms. */
const LAUNCHER_REPS = 10
/** The scenarios whose figures are small enough for the launcher's start to count: they get a row against it. */
const LAUNCHER_SCENARIOS: ReadonlyArray<Scenario> = ["noop", "restore"]

/**
 * What a project's scripts pay to start Turborepo beyond its native binary, which the timed runs start directly:
 * `"build": "turbo run build"` (and `npx turbo`) runs the `turbo` npm package's Node launcher, which finds the binary
 * and runs it. Measured as `turbo --version` both ways, interleaved, so that only the start differs.
 */
const launcherCost = async (r: Repo, tools: Installed) => {
  const env: NodeJS.ProcessEnv = {
    PATH: `${path.dirname(process.execPath)}:/usr/bin:/bin`,
    HOME: path.join(tmp.root, "turbo-home"),
    TURBO_TELEMETRY_DISABLED: "1",
    DO_NOT_TRACK: "1",
    TURBO_NO_UPDATE_NOTIFIER: "1"
  }
  const ways: ReadonlyArray<readonly [string, ReadonlyArray<string>]> = [
    ["native", [tools.turbo(r.turbo), "--version"]],
    ["launcher", [process.execPath, tools.launcher(r.turbo), "--version"]]
  ]
  for (let i = 0; i < LAUNCHER_REPS; i++) {
    for (const [way, argv] of rotate([...ways], i)) {
      const log = tmp.fresh("log")
      const x = await timedSpawn(argv, { env, log })
      if (x.code !== 0) return warn(`turbo --version (${way}) exited ${x.code}: ${fs.readFileSync(log, "utf8").trim()}`)
      samples.record(`turbo ${way} ${r.key}`, x.ms)
    }
  }
}

const benchRepo = async (r: Repo, scenarios: ReadonlyArray<Scenario>) => {
  const p = prepare(r)
  note(
    r,
    p.reused ? `installed tree reused from ${p.tree}` : `fetched and installed in ${p.installSeconds.toFixed(0)} s`
  )
  const tools = installTools([r])
  const kilnRoot = copyOf(p, "kiln", r)
  const turboRoot = copyOf(p, "turbo", r)
  const ws = readWorkspace(kilnRoot, r.scope)
  const config = kilnConfigOf({ buildOutputs: r.buildOutputs, testRootInputs: r.testRootInputs })
  fs.writeFileSync(path.join(kilnRoot, "kiln.json"), JSON.stringify(config, null, 1))
  const taskCount = kilnProcesses(ws).length
  // The leaf's package and every package in scope that depends on it: what its edit re-runs in both tools.
  const leafPkg = ws.inScope.find((x) => r.leafFile.startsWith(`${x.dir}/`))
  const rerun = ws.inScope.filter((x) => x === leafPkg || transitiveDeps(ws, x).includes(leafPkg!))
  const leafTasks = rerun.flatMap((x) => ["build", "test"].filter((s) => x.scripts[s] !== undefined)).length
  note(r, `${ws.inScope.length} packages in scope, ${taskCount} tasks (build and test scripts)`)
  const b: Bench = {
    r,
    ws,
    taskCount,
    leafTasks,
    live: [
      kilnSession(tmp, ws, r, kilnRoot, taskCount),
      turboSession(tmp, tools, readWorkspace(turboRoot, r.scope), r, turboRoot, taskCount)
    ]
  }
  const opened = [...b.live]
  try {
    // Without cold runs first, one untimed run each fills the caches the other scenarios start from.
    // Then one untimed no-op each, as after a timed cold run: the first run after a cold one is not a rep.
    if (scenarios[0] !== "cold") {
      for (const s of [...b.live]) await runOne(b, s, "cold", 0, true)
      for (const s of [...b.live]) await runOne(b, s, "noop", 0, true)
    }
    let compared = false
    for (let i = 0; i < reps; i++) {
      for (const scn of scenarios) {
        const runs = QUICK_RUNS[scn] ?? 1
        for (let k = 0; k < runs; k++) for (const s of rotate([...b.live], i * runs + k)) await runOne(b, s, scn, i)
        if (scn === "cold") {
          if (!compared) compareOutputs(b, "after the first cold runs")
          compared = true
          // The first run after a cold one, whatever it warms, is not a rep.
          for (const s of [...b.live]) await runOne(b, s, "noop", i, true)
        }
      }
    }
    // Every output there, and the same in both copies, after the edits (the same in both) and the restores.
    for (const s of [...b.live]) await runOne(b, s, "noop", reps, true)
    compareOutputs(b, "at the end")
    if (scenarios.some((scn) => LAUNCHER_SCENARIOS.includes(scn))) await launcherCost(r, tools)
    for (const scn of profileArg ?? []) await profileRun(b, scn)
  } finally {
    for (const s of opened) {
      s.close()
      rm(s.root)
    }
  }
}

// ---------------------------------------------------------------------------------------------------------------
// The section

const medianOf = (tool: ToolName, r: Repo, scn: Scenario) => {
  const name = `${tool} ${r.key} ${scn}`
  return samples.has(name) ? samples.summary(name).median : undefined
}
const fmtS = (ms: number) => `${(ms / 1000).toFixed(2)} s`
const fmtMb = (kb: number) => `${Math.round(kb / 1024)} MB`
const ranText = (tool: ToolName, r: Repo, scn: Scenario) => {
  const xs = ranCounts.get(`${tool} ${r.key} ${scn}`)
  return xs === undefined ? "" : ` (${[...new Set(xs)].join("/")} ran)`
}

const rowsOf = (r: Repo, scenarios: ReadonlyArray<Scenario>): Array<Row> => {
  const rows: Array<Row> = []
  for (const scn of scenarios) {
    const [k, t] = [medianOf("kiln", r, scn), medianOf("turbo", r, scn)]
    if (k === undefined || t === undefined) continue
    rows.push({
      figure: `${r.key}: ${SCENARIO_TEXT[scn]}`,
      value: `${fmtS(k)}${ranText("kiln", r, scn)}`,
      baseline: `turbo ${fmtS(t)}${ranText("turbo", r, scn)}`,
      ratio: times(k / t),
      target: { op: "<=", value: TARGET, actual: k / t, unit: "×" }
    })
    const [native, launcher] = ["native", "launcher"].map((w) =>
      samples.has(`turbo ${w} ${r.key}`)
        ? samples.summary(`turbo ${w} ${r.key}`).median
        : undefined
    )
    if (LAUNCHER_SCENARIOS.includes(scn) && native !== undefined && launcher !== undefined) {
      const started = t + launcher - native
      rows.push({
        figure: `  ${r.key}: ${SCENARIO_TEXT[scn]}, beside Turborepo as the project's scripts start it`,
        value: fmtS(k),
        baseline: `turbo ${fmtS(started)}: the ${fmtS(t)} above and its npm launcher's start, ${
          Math.round(launcher - native)
        } ms (turbo --version: ${Math.round(launcher)} ms through it, ${Math.round(native)} ms direct)`,
        ratio: times(k / started)
      })
    }
  }
  const [k, t] = [rss.get(`kiln ${r.key}`), rss.get(`turbo ${r.key}`)]
  if (k !== undefined && t !== undefined && k > 0 && t > 0) {
    rows.push({
      figure: `${r.key}: peak RSS of the process tree, over every timed run`,
      value: fmtMb(k),
      baseline: `turbo ${fmtMb(t)}`,
      ratio: times(k / t),
      target: { op: "<=", value: RSS_TARGET, actual: k / t, unit: "×" }
    })
  }
  return rows
}

const notes = (repos: ReadonlyArray<Repo>): string =>
  [
    "Notes:",
    ...repos.flatMap((r) => [
      `- **${r.key}**: ${r.github} at ${r.commit}. ${r.why}`,
      ...(notesByRepo.get(r.key) ?? []).map((l) => `  - ${l}`)
    ]),
    `- kiln: \`dist/kiln run --config kiln.json --store-dir S --concurrency ${CONCURRENCY} --progress none` +
    " --summary F <the processes of the packages in scope>`, kiln.json the user's few lines of `tasks`" +
    " (scripts/bench/monorepo/kilnConfig.ts: `build` with deps `^build` and outputs `dist/`; `test` with deps" +
    " `^build` and named caches `vite` at the package's `node_modules/.vite` and `vitest` at its" +
    " `node_modules/.vitest`, where Turborepo's workspace keeps those tools' caches between its runs, and react-email's" +
    " root `vitest.config.ts` and `vitest.workspace.ts` as `rootInputs`); argv, PATH," +
    " inputs and deps inferred by kiln from the workspace. `dist/kiln` is the package's bin, the native client that" +
    " hands a run to the standby engine the last run left (started by the harness's untimed runs as a user's" +
    " earlier commands would), without starting Node. Turborepo: its native binary" +
    ` from npm, \`turbo run build test --concurrency=${CONCURRENCY} --output-logs=none --cache-dir=D --filter=./<each` +
    " package>` (1.x with `--no-daemon`), local cache only, no telemetry, the package manager on PATH. The" +
    " targets are against that binary, started directly; a project's scripts (and `npx turbo`) start it through the" +
    " `turbo` npm package's Node launcher, whose cost is measured apart (`turbo --version` each way, 10 interleaved" +
    " pairs) and added in the indented rows of the no-op and the restore, the figures it counts in.",
    "- Each tool has its own `cp -a` copy of the installed tree. Cold: outputs (`dist/`) removed and the cache emptied" +
    " (kiln's store, turbo's cache dir and `.turbo` logs); after each cold run one untimed no-op each. Restore: the" +
    " outputs removed, caches kept. Leaf and root edits append a new `export const` line (whitespace for a JSON file)," +
    " new contents each rep, the same in both copies. In each rep the tools go one after the other in rotated order." +
    " Peak RSS: the largest sum of RSS over the tool's process tree (sampled from /proc every 50 ms) or the largest" +
    " single process's `/usr/bin/time` peak, over every timed run.",
    `- Targets (issue #36), kiln / Turborepo, medians of this one run: every scenario ≤ ${TARGET}×, peak RSS ≤ ${RSS_TARGET}×.`,
    problems.length === 0
      ? "- Problems: none (every run succeeded with the expected counts, the outputs agreed)."
      : ["- **Problems**:", ...problems.map((p) => `  - ${p}`)].join("\n")
  ].join("\n")

const main = async () => {
  if (!fs.existsSync(cli)) throw new Error(`${cli} is missing: run \`npm run build\` first`)
  if (!Number.isInteger(reps) || reps < 1) throw new Error(`--reps: a whole number ≥ 1, not ${flag("reps")}`)
  const repos = selected(REPOS.map((r) => r.key), onlyArg, "only").map((k) => REPOS.find((r) => r.key === k)!)
  const scenarios = selected(SCENARIOS, scenariosArg, "scenarios")
  if (profileArg?.some((x) => !SCENARIOS.includes(x))) throw new Error(`--profile: some of ${SCENARIOS}`)
  const loadStart = os.loadavg()
  const t0 = now()
  ensureTime()
  let section: Section | undefined
  try {
    for (const r of repos) await benchRepo(r, scenarios)
    const left = await leftovers(tmp)
    const wallSeconds = (now() - t0) / 1000
    const commit = sh("git", ["-C", repo, "log", "-1", "--format=%h %s"])
    section = {
      name: "monorepo",
      title: "Real monorepos: kiln beside their own Turborepo (`npm run bench:monorepo`)",
      quick: false,
      wallSeconds,
      loadStart,
      loadEnd: os.loadavg(),
      rows: repos.flatMap((r) => rowsOf(r, scenarios)),
      body: [
        `Each row: medians of ${reps} rep${reps === 1 ? "" : "s"} (no-op and restore: ${
          reps * QUICK_RUNS.restore!
        } runs, ${QUICK_RUNS.restore} a rep), kiln then Turborepo, and how many tasks ran.`,
        "",
        notes(repos),
        closingNotes({
          left,
          kiln: `- kiln: commit ${commit}`,
          loadStart,
          tempDir: path.dirname(tmp.root),
          wallSeconds: wallSeconds,
          samples,
          alone: true
        })
      ].join("\n")
    }
  } finally {
    if (section === undefined) await leftovers(tmp)
    tmp.cleanup()
  }
  emit(section, path.dirname(tmp.root))
  if (onlyArg === undefined && scenariosArg === undefined) {
    writeOwnSection(reportFile, "monorepo", renderSection(section, "##"))
    progress(`wrote its section into ${path.relative(process.cwd(), reportFile)}`)
  }
}

await main().catch((e: unknown) => {
  process.stderr.write(`bench:monorepo: ${e instanceof Error ? e.stack ?? e.message : String(e)}\n`)
  process.exitCode = 1
})
