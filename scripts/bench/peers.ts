/**
 * The peers benchmark (`npm run bench:peers [-- --quick] [-- --only=wide500,chain100] [-- --tools=kiln,turbo]`; not
 * part of `npm run bench`: it installs Turborepo and bun from the npm registry and takes 20–30 minutes): kiln beside
 * Turborepo (with bun as its script runner) and Bazel (a warm server, genrules in its linux-sandbox) on the same
 * generated workspaces — the same tasks, the same command in each, 2 at a time for every tool — in the same run, one
 * tool after the other, the reps interleaved in rotated order:
 * - cold: every cache emptied and the outputs removed (Bazel: `bazel clean` and an empty disk cache, its server kept);
 * - warm no-op: nothing changed since the last run;
 * - one leaf edited: a source file of a task nothing depends on gets new contents, then the run;
 * - restore: the outputs deleted, the caches kept (Bazel: `bazel clean`, its disk cache kept);
 * - the peak RSS of each tool's processes during its cold runs.
 * Every tool's outputs are compared, byte for byte, by digest: a difference is reported loudly. It never fails on a
 * missed target: it reports, and run in full (no `--only`, no `--tools`) writes its section into report.md.
 *
 * `--sandbox-cost[=REPS]` measures only issue #37's cost figure (scripts/bench/sandboxCost.ts): cold kiln runs of the
 * esbuild workspace (or of the `--only` ones) with kiln's default sandbox (strict) beside `--sandbox off`, interleaved
 * (6 pairs, `--quick` 3), printing "default ÷ off" and the per-process set-up cost; no peer runs (only esbuild is
 * installed, Bazel never starts), and report.md is left as it is. A few minutes.
 */
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { killLive, kilnEnv, leftovers } from "./kiln.js"
import { bazelTool, killServers } from "./peers/bazel.js"
import { ensureBazel, installEsbuild, installTools } from "./peers/install.js"
import { kilnTool } from "./peers/kilnTool.js"
import { ensureTime } from "./peers/proc.js"
import {
  type Built,
  CONCURRENCY,
  RUN_LIMIT_MS,
  type Session,
  type Tool,
  TOOL_NAMES,
  type ToolName
} from "./peers/tool.js"
import { turboTool } from "./peers/turbo.js"
import {
  type Case,
  caseOf,
  editLeaf,
  leafFile,
  type PeerWorkspace,
  planOf,
  removeOutputs,
  writeCopy
} from "./peers/workspace.js"
import {
  argValue,
  cli,
  closingNotes,
  emit,
  now,
  progress,
  quick,
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
import {
  measureSandboxCost,
  type SandboxCost,
  sandboxCostNotes,
  sandboxCostReps,
  sandboxCostRows
} from "./sandboxCost.js"

const COLD_REPS = quick ? 1 : 3
const NOOP_REPS = quick ? 2 : 5
const EDIT_REPS = quick ? 2 : 5
const RESTORE_REPS = quick ? 1 : 3

/** The issue's workspaces; `--quick` smaller ones and not the two largest. */
const ALL_CASES: ReadonlyArray<Case> = quick
  ? [caseOf("wide", 200), caseOf("chain", 50), caseOf("diamond", 100), caseOf("wide", 50, "esbuild")]
  : [
    caseOf("wide", 500),
    caseOf("chain", 100),
    caseOf("diamond", 300),
    caseOf("wide", 100, "esbuild"),
    caseOf("wide", 1000),
    caseOf("wide", 5000)
  ]

/** `--only=wide500,chain100` (a key) or `--only=chain` (a shape or `esbuild`): some workspaces. */
const onlyArg = argValue("only")
/** `--tools=kiln,turbo`: some tools. */
const toolsArg = argValue("tools")

type Phase = "cold" | "no-op" | "edit" | "restore"
const PHASES: ReadonlyArray<Phase> = ["cold", "no-op", "edit", "restore"]

/** The targets: kiln / the best peer's median, in the same run (issue #25). */
const targetOf = (phase: Phase, c: Case): number =>
  phase === "no-op" ? 0.5 : phase === "edit" ? (c.n >= 300 ? 1.0 : 1.5) : 1.0
const RSS_TARGET = 1.0

const reportFile = path.join(repo, "scripts", "bench", "report.md")
const tmp = tempRoot("kiln-bench-peers-", () => {
  killLive()
  killServers()
})
const samples = new Samples()
/** Peak RSS in kB of each cold run, by `<tool> <workspace>`. */
const rss = new Map<string, Array<number>>()
/** What went wrong, in the order it happened: failed runs, wrong counts, outputs that differ. */
const problems: Array<string> = []
/** The output comparisons, by workspace. */
const compared = new Map<string, Array<string>>()

const reps = (n: number, what: string) => `${n} ${what}${n === 1 ? "" : "s"}`

const sampleName = (tool: ToolName, phase: Phase, c: Case) => `${tool} ${phase} ${c.label}`

const warn = (msg: string) => {
  problems.push(msg)
  progress(`WARNING: ${msg}`)
}

// ---------------------------------------------------------------------------------------------------------------
// Runs

/** The sessions still running on the workspace: a failed run drops its tool from the rest of the workspace. */
type Live = Array<Session>

/**
 * One run of `s` after `prepare` (untimed), recorded under `phase` unless `untimed`; a failure of either is a problem
 * noted, and the session leaves `live` (its cells say so).
 */
const run = async (
  live: Live,
  s: Session,
  c: Case,
  o: { readonly phase: Phase; readonly ran: number; readonly prepare?: () => Promise<void>; readonly untimed?: true }
) => {
  const { phase, untimed = false } = o
  const what = `${s.tool} ${untimed ? "untimed " : ""}${phase} ${c.label}`
  let r: Built
  try {
    await o.prepare?.()
    r = await s.build(o.ran, { rss: phase === "cold" && !untimed })
  } catch (e) {
    // A few lines, each cut short: turbo's first line lists every package in scope.
    const lines = (e instanceof Error ? e.message : String(e)).split("\n").filter((l) => l.trim() !== "")
    warn(`${what} FAILED: ${lines.slice(0, 8).map((l) => (l.length > 200 ? `${l.slice(0, 200)}…` : l)).join(" | ")}`)
    live.splice(live.indexOf(s), 1)
    return
  }
  if (r.check !== undefined) warn(`${what}: ${r.check}`)
  if (untimed) return
  samples.record(sampleName(s.tool, phase, c), r.ms)
  if (phase === "cold" && r.peakRssKb > 0) {
    const key = `${s.tool} ${c.label}`
    rss.set(key, [...(rss.get(key) ?? []), r.peakRssKb])
  }
}

/** Every live tool's outputs against the others', task by task; a difference is a problem. */
const compareOutputs = (live: Live, c: Case, when: string) => {
  if (live.length < 2) return
  const digests = live.map((s) => ({ tool: s.tool, d: s.outputs() }))
  const differ: Array<string> = []
  for (const [task, first] of digests[0]!.d) {
    if (digests.some((x) => x.d.get(task) !== first)) {
      differ.push(
        `${task} (${digests.map((x) => `${x.tool} ${(x.d.get(task) ?? "missing").slice(0, 12)}`).join(", ")})`
      )
    }
  }
  const tools = live.map((s) => s.tool).join(", ")
  const line = differ.length === 0
    ? `${when}: the ${digests[0]!.d.size} outputs are byte-identical (${tools})`
    : `${when}: **OUTPUTS DIFFER** in ${differ.length} of ${digests[0]!.d.size} tasks (${tools}): ${
      differ.slice(0, 5).join("; ")
    }${differ.length > 5 ? "; …" : ""}`
  compared.set(c.label, [...(compared.get(c.label) ?? []), line])
  if (differ.length > 0) warn(`${c.label}: ${line}`)
  else progress(`${c.label}: ${line}`)
}

/** Every live tool once, one after another, in rep `i`'s rotated order (no tool always first, or after another). */
const inTurn = async (live: Live, i: number, f: (s: Session) => Promise<void>) => {
  for (const s of rotate([...live], i)) await f(s)
}

/** Opens every tool on its own copy of the workspace (untimed: writing the copies, `bun install`). */
const openAll = async (tools: ReadonlyArray<Tool>, ws: PeerWorkspace): Promise<Live> => {
  const live: Live = []
  for (const tool of tools) {
    const root = tmp.fresh(`${tool.name}-${ws.case.key}`)
    writeCopy(ws, root)
    try {
      live.push(await tool.open(ws, root))
    } catch (e) {
      warn(`${tool.name} could not be set up on ${ws.case.label}: ${e instanceof Error ? e.message : String(e)}`)
      rm(root)
    }
  }
  return live
}

const benchCase = async (tools: ReadonlyArray<Tool>, esbuild: string, c: Case) => {
  const ws = planOf(c, esbuild)
  const n = c.n
  progress(`${c.label}: writing ${tools.length} copies (${n} tasks each), setting the tools up`)
  const live = await openAll(tools, ws)
  const opened = [...live]
  try {
    // One untimed cold build each: Bazel's server starts and loads the workspace; the others read their binaries.
    progress(`${c.label}: an untimed warm-up build each, then ${reps(COLD_REPS, "cold rep")}`)
    for (const s of [...live]) await run(live, s, c, { phase: "cold", ran: n, prepare: s.toCold, untimed: true })
    for (let i = 0; i < COLD_REPS; i++) {
      await inTurn(live, i, (s) => run(live, s, c, { phase: "cold", ran: n, prepare: s.toCold }))
    }
    compareOutputs(live, c, "after the cold runs")
    // The first run after a cold one, whatever it warms, is not a rep.
    for (const s of [...live]) await run(live, s, c, { phase: "no-op", ran: 0, untimed: true })
    progress(
      `${c.label}: ${reps(NOOP_REPS, "no-op")}, ${reps(EDIT_REPS, "edit")} of ${leafFile(ws)}, ` +
        reps(RESTORE_REPS, "restore")
    )
    for (let i = 0; i < Math.max(NOOP_REPS, EDIT_REPS, RESTORE_REPS); i++) {
      if (i < NOOP_REPS) await inTurn(live, i, (s) => run(live, s, c, { phase: "no-op", ran: 0 }))
      if (i < EDIT_REPS) {
        // New contents every rep, the same in every copy.
        const prepare = (s: Session) => async () => editLeaf(ws, s.root, i + 1)
        await inTurn(live, i, (s) => run(live, s, c, { phase: "edit", ran: 1, prepare: prepare(s) }))
      }
      if (i < RESTORE_REPS) {
        await inTurn(live, i, (s) => run(live, s, c, { phase: "restore", ran: 0, prepare: s.dropOutputs }))
      }
    }
    compareOutputs(live, c, `after ${reps(EDIT_REPS, "edit")} of the leaf and the restores`)
  } finally {
    for (const s of opened) {
      await s.close()
      rm(s.root)
    }
  }
}

// ---------------------------------------------------------------------------------------------------------------
// The table

const medianOf = (tool: ToolName, phase: Phase, c: Case): number | undefined => {
  const name = sampleName(tool, phase, c)
  return samples.has(name) ? samples.summary(name).median : undefined
}

const rssOf = (tool: ToolName, c: Case): number | undefined => {
  const xs = rss.get(`${tool} ${c.label}`)
  return xs === undefined || xs.length === 0 ? undefined : [...xs].sort((a, b) => a - b)[xs.length >> 1]
}

const fmtSeconds = (x: number) => (x / 1000).toFixed(2)
const fmtMillis = (x: number) => Math.round(x).toLocaleString("en-US")
const fmtMb = (kb: number) => Math.round(kb / 1024).toLocaleString("en-US")

/** The best peer's median: the lower of Turborepo's and Bazel's. */
const bestPeer = (tools: ReadonlyArray<ToolName>, value: (t: ToolName) => number | undefined) => {
  const peers = tools.filter((t) => t !== "kiln").flatMap((t) => {
    const v = value(t)
    return v === undefined ? [] : [{ tool: t, v }]
  })
  return peers.sort((a, b) => a.v - b.v)[0]
}

/** `3.93 / 3.33 / 9.17 s (1.18×)`: every tool's median, then kiln's ratio to `against` (the best peer's). */
const cell = (
  tools: ReadonlyArray<ToolName>,
  value: (t: ToolName) => number | undefined,
  fmt: (x: number) => string,
  unit: string,
  against: () => number | undefined = () => bestPeer(tools, value)?.v
) => {
  const figures = tools.map((t) => {
    const v = value(t)
    return v === undefined ? "–" : fmt(v)
  })
  const k = value("kiln")
  const base = against()
  return `${figures.join(" / ")} ${unit}${k !== undefined && base !== undefined ? ` (${times(k / base)})` : ""}`
}

const peersTable = (tools: ReadonlyArray<ToolName>, cases: ReadonlyArray<Case>): string => {
  const names = tools.join(" / ")
  const m = (phase: Phase, c: Case) => (t: ToolName) => medianOf(t, phase, c)
  return [
    `| workspace | cold: ${names} | warm no-op | one leaf edited | restore (outputs deleted, cache kept) | peak RSS, cold |`,
    "|---|---|---|---|---|---|",
    ...cases.map((c) =>
      `| ${c.label} | ${cell(tools, m("cold", c), fmtSeconds, "s")} | ${
        cell(tools, m("no-op", c), fmtMillis, "ms")
      } | ${cell(tools, m("edit", c), fmtMillis, "ms")} | ${cell(tools, m("restore", c), fmtMillis, "ms")} | ${
        cell(tools, (t) => rssOf(t, c), fmtMb, "MB", () => rssOf("turbo", c))
      } |`
    )
  ].join("\n")
}

const PHASE_FIGURE: Record<Phase, string> = {
  cold: "cold (empty caches, no outputs)",
  "no-op": "warm no-op (nothing changed)",
  edit: "one leaf edited (1 task runs)",
  restore: "restore (outputs deleted, cache kept)"
}

const fmtPhase = (phase: Phase, x: number) => (phase === "cold" ? `${fmtSeconds(x)} s` : `${fmtMillis(x)} ms`)

/** One row a workspace and figure: kiln against the best peer, with the target. */
const rowsOf = (tools: ReadonlyArray<ToolName>, c: Case): Array<Row> => {
  const rows: Array<Row> = []
  for (const phase of PHASES) {
    const k = medianOf("kiln", phase, c)
    const best = bestPeer(tools, (t) => medianOf(t, phase, c))
    if (k === undefined || best === undefined) continue
    const others = tools.filter((t) => t !== "kiln" && t !== best.tool).flatMap((t) => {
      const v = medianOf(t, phase, c)
      return v === undefined ? [] : [`${t} ${fmtPhase(phase, v)}`]
    })
    rows.push({
      figure: `${c.label}: ${PHASE_FIGURE[phase]}`,
      value: fmtPhase(phase, k),
      baseline: `best peer: ${best.tool} ${fmtPhase(phase, best.v)}${
        others.length > 0 ? ` (${others.join(", ")})` : ""
      }`,
      ratio: times(k / best.v),
      target: { op: "<=", value: targetOf(phase, c), actual: k / best.v, unit: "×" }
    })
  }
  const [k, t] = [rssOf("kiln", c), rssOf("turbo", c)]
  if (k !== undefined && t !== undefined) {
    const b = rssOf("bazel", c)
    rows.push({
      figure: `${c.label}: peak RSS of the process tree, cold`,
      value: `${fmtMb(k)} MB`,
      baseline: `turbo ${fmtMb(t)} MB${b !== undefined ? ` (bazel ${fmtMb(b)} MB)` : ""}`,
      ratio: times(k / t),
      target: { op: "<=", value: RSS_TARGET, actual: k / t, unit: "×" }
    })
  }
  return rows
}

const rssTable = (): string =>
  [
    "| peak RSS of a cold run | runs | median MB | max MB |",
    "|---|---|---|---|",
    ...[...rss].map(([name, xs]) =>
      `| ${name} | ${xs.length} | ${fmtMb([...xs].sort((a, b) => a - b)[xs.length >> 1]!)} | ${
        fmtMb(Math.max(...xs))
      } |`
    )
  ].join("\n")

// ---------------------------------------------------------------------------------------------------------------
// The section

const notes = (o: {
  readonly tools: ReadonlyArray<Tool>
  readonly skipped: ReadonlyArray<string>
  readonly cases: ReadonlyArray<Case>
  readonly timeOk: boolean
}): string => {
  const names = o.tools.map((t) => t.name).join(" / ")
  return [
    `Each cell: the median of every tool's runs (${names}), then kiln's ratio to the best peer's median in brackets` +
    " (for the peak RSS, to Turborepo's); – where a tool did not run.",
    "",
    "Notes:",
    `- Tools: ${o.tools.map((t) => t.version).join("; ")}.${o.skipped.length > 0 ? ` ${o.skipped.join("; ")}.` : ""}`,
    `- The same tasks for every tool, ${CONCURRENCY} at a time: task \`p<i>\` lives in \`packages/p<i>/\` with 5 small` +
    " source files in `src/`; a hash task runs `cat src/f0.txt … src/f4.txt ../p<dep>/hash.txt… | sha256sum >" +
    " hash.txt` in its package directory (kiln: `/bin/bash -c` with `workingDirectory`, PATH only; Turborepo: the" +
    " package's `build` script, which bun runs with bash; Bazel: a genrule `cat $(SRCS) | sha256sum > $@`, the same" +
    " pipeline on the same files in the same order); an esbuild task runs the npm package's native binary by absolute" +
    " path, `esbuild --bundle --minify src/index.js --outfile=bundle.js` (Bazel: `$(location src/index.js)`, `$@`)." +
    " wide: independent tasks; chain: each on the one before; diamond: layers of 1 and 32 alternating, each on every" +
    " task of the layer before. Every tool has its own copy of the same bytes.",
    `- kiln: \`dist/kiln run --config kiln.json --store-dir S --concurrency ${CONCURRENCY} --progress none` +
    " --summary F`, its store, sandboxes and sockets under the benchmark's temp root. Turborepo: its binary from" +
    ` \`@turbo/linux-64\`, \`turbo run build --concurrency=${CONCURRENCY} --output-logs=none --cache-dir=D\` in a bun` +
    " workspace (`packageManager: bun@…`, a `bun.lock` from an untimed `bun install`), unsandboxed, local cache only," +
    " no daemon (2.x uses none for `turbo run`), `TURBO_TELEMETRY_DISABLED=1 DO_NOT_TRACK=1`, no git repository (it" +
    " hashes the `inputs: [\"src/**\"]` itself). Bazel: `bazel build //... --spawn_strategy=linux-sandbox" +
    ` --disk_cache=D --jobs=${CONCURRENCY} --nosandbox_debug\` by its native client (not the wrapper script), with` +
    " `--output_user_root` under the temp root and no rc file but Debian's system one (it names the install base, and" +
    " turns `--sandbox_debug` on, which keeps every sandbox: turned off again); one warm server a workspace, started" +
    " by an untimed build and shut down after the workspace.",
    `- Per workspace: an untimed cold build each, then ${
      reps(COLD_REPS, "cold rep")
    } (kiln: store removed; turbo: cache dir` +
    " removed; both: outputs removed; Bazel: `bazel clean` and the disk cache removed, the server kept), one untimed" +
    ` no-op, then ${reps(NOOP_REPS, "no-op")}, ${reps(EDIT_REPS, "edit")} (the last task's last source file rewritten` +
    ` with new contents, the same in every copy, then the run: exactly 1 task runs) and ${
      reps(RESTORE_REPS, "restore")
    }` +
    ` (every output` +
    " deleted, Bazel `bazel clean`; the caches kept). In each rep the tools go one after another, never at once, in" +
    " rotated order. Every run is timed from spawn to exit and checked: kiln's `--summary`, turbo's `Tasks:`/`Cached:`" +
    " lines, Bazel's `N processes: … linux-sandbox` line say how many tasks ran.",
    `- Peak RSS: the largest sum of the RSS of the tool's process tree, sampled from /proc every 50 ms during each` +
    ` cold rep${o.timeOk ? ", or the largest single process's own peak (`/usr/bin/time -f %M`) if larger" : ""};` +
    " for Bazel, whose client is tiny, the server's tree is summed too and its `VmHWM` (reset through" +
    " `/proc/<pid>/clear_refs` before the run) counts. Shared pages count in each process that maps them.",
    `- Targets (issue #25), kiln / the best peer in the same run: cold ≤ 1.0×; warm no-op ≤ 0.5×; one leaf edited` +
    " ≤ 1.0× on workspaces of 300+ tasks, ≤ 1.5× on smaller ones; restore ≤ 1.0×; peak RSS ≤ 1.0× Turborepo's.",
    "- Outputs compared (SHA-256 of every task's output, across the tools):",
    ...o.cases.flatMap((c) => (compared.get(c.label) ?? ["not compared"]).map((l) => `  - ${c.label}: ${l}`)),
    problems.length === 0
      ? "- Problems: none (every run did what it should, every output agreed)."
      : ["- **Problems**:", ...problems.map((p) => `  - ${p}`)].join("\n")
  ].join("\n")
}

const revision = (): string => {
  const commit = sh("git", ["-C", repo, "log", "-1", "--format=%h %s"])
  const dirty = sh("git", ["-C", repo, "status", "--porcelain", "--", "src"]) !== ""
  return `- kiln: commit ${commit}${dirty ? " **with uncommitted changes in src/**" : ""}`
}

/** `--sandbox-cost`: how many pairs of cold runs, if that comparison alone is asked for. */
const costReps = sandboxCostReps(quick ? 3 : 6)

const selectedCases = (): ReadonlyArray<Case> => {
  if (onlyArg === undefined) return costReps === undefined ? ALL_CASES : ALL_CASES.filter((c) => c.kind === "esbuild")
  const wanted = onlyArg.split(",")
  const cases = ALL_CASES.filter((c) => wanted.includes(c.key) || wanted.includes(c.key.replace(/\d+$/, "")))
  if (cases.length === 0) {
    throw new Error(`--only=${onlyArg} names no workspace of this run: ${ALL_CASES.map((c) => c.key).join(", ")}`)
  }
  return cases
}

const selectedTools = (): ReadonlyArray<ToolName> => {
  if (toolsArg === undefined) return TOOL_NAMES
  const wanted = toolsArg.split(",")
  const unknown = wanted.filter((w) => !TOOL_NAMES.includes(w as ToolName))
  if (unknown.length > 0) throw new Error(`--tools: unknown ${unknown.join(", ")} (of ${TOOL_NAMES.join(", ")})`)
  return TOOL_NAMES.filter((t) => wanted.includes(t))
}

/** The tools of this run, installed; Bazel left out (and said why) when it cannot be had. */
const setUpTools = (names: ReadonlyArray<ToolName>) => {
  const ctx = { tmp }
  const installed = installTools(path.join(tmp.root, "tools"))
  const tools: Array<Tool> = []
  const skipped: Array<string> = []
  for (const name of names) {
    if (name === "kiln") tools.push(kilnTool(ctx))
    else if (name === "turbo") tools.push(turboTool(ctx, installed))
    else {
      const bazel = ensureBazel()
      if (typeof bazel === "string") {
        skipped.push(`Bazel skipped: ${bazel}`)
        warn(`Bazel skipped: ${bazel}`)
      } else tools.push(bazelTool(ctx, bazel))
    }
  }
  return { tools, skipped, esbuild: installed.esbuild }
}

/**
 * `--sandbox-cost`: kiln alone, its default sandbox beside `--sandbox off`, cold, on each selected workspace (one copy
 * each); its section is printed, never written into report.md.
 */
const sandboxCostMain = async (reps: number) => {
  const cases = selectedCases()
  const loadStart = os.loadavg()
  const t0 = now()
  let section: Section | undefined
  try {
    const { esbuild, version } = installEsbuild(path.join(tmp.root, "tools"))
    const env = kilnEnv(tmp)
    const costs: Array<SandboxCost> = []
    for (const c of cases) {
      const ws = planOf(c, esbuild)
      const root = tmp.fresh(`kiln-${c.key}`)
      writeCopy(ws, root)
      costs.push(
        await measureSandboxCost({
          tmp,
          env,
          samples,
          label: c.label,
          config: path.join(root, "kiln.json"),
          processes: c.n,
          concurrency: CONCURRENCY,
          reps,
          clean: () => removeOutputs(ws, root),
          limitMs: RUN_LIMIT_MS
        })
      )
      rm(root)
    }
    const left = await leftovers(tmp)
    const wallSeconds = (now() - t0) / 1000
    section = {
      name: "peers",
      title: "Strict sandbox cost on the peers' workspaces (`npm run bench:peers -- --sandbox-cost`)",
      quick,
      wallSeconds,
      loadStart,
      loadEnd: os.loadavg(),
      rows: costs.flatMap((c) => sandboxCostRows(samples, c)),
      body: [
        sandboxCostNotes({
          what: `The peers' workspaces (scripts/bench/peers/workspace.ts), kiln's description only, ${CONCURRENCY} in` +
            ` flight; esbuild ${version} (its npm package's native binary, by absolute path, declared in each` +
            " process's `hostPaths`)."
        }),
        closingNotes({
          left,
          kiln: revision(),
          loadStart,
          tempDir: path.dirname(tmp.root),
          wallSeconds: wallSeconds,
          samples
        })
      ].join("\n")
    }
  } finally {
    if (section === undefined) await leftovers(tmp)
    tmp.cleanup()
  }
  emit(section, path.dirname(tmp.root))
}

const main = async () => {
  if (!fs.existsSync(cli)) throw new Error(`${cli} is missing: run \`npm run build\` first`)
  if (costReps !== undefined) return sandboxCostMain(costReps)
  const cases = selectedCases()
  const names = selectedTools()
  const loadStart = os.loadavg()
  const t0 = now()
  let section: Section | undefined
  try {
    const timeOk = ensureTime()
    const { esbuild, skipped, tools } = setUpTools(names)
    progress(`tools: ${tools.map((t) => t.version).join("; ")}`)
    for (const c of cases) await benchCase(tools, esbuild, c)
    const left = await leftovers(tmp)
    const toolNames = tools.map((t) => t.name)
    const wallSeconds = (now() - t0) / 1000
    section = {
      name: "peers",
      title: "Peers: kiln beside Turborepo and Bazel on the same tasks (`npm run bench:peers`)",
      quick,
      wallSeconds,
      loadStart,
      loadEnd: os.loadavg(),
      rows: cases.flatMap((c) => rowsOf(toolNames, c)),
      body: [
        peersTable(toolNames, cases),
        "",
        notes({ tools, skipped, cases, timeOk }),
        closingNotes({
          left,
          kiln: revision(),
          loadStart,
          tempDir: path.dirname(tmp.root),
          wallSeconds: wallSeconds,
          samples,
          alone: true
        }),
        "",
        rssTable()
      ].join("\n")
    }
  } finally {
    if (section === undefined) await leftovers(tmp)
    killServers()
    tmp.cleanup()
  }
  emit(section, path.dirname(tmp.root))
  if (argValue("section-json") === undefined && onlyArg === undefined && toolsArg === undefined) {
    writeOwnSection(reportFile, "peers", renderSection(section, "##"))
    progress(`wrote its section into ${path.relative(process.cwd(), reportFile)}`)
  }
}

await main().catch((e: unknown) => {
  process.stderr.write(`bench:peers: ${e instanceof Error ? e.message : String(e)}\n`)
  process.exitCode = 1
})
