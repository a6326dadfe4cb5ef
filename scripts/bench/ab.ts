/**
 * Two builds of kiln side by side (`npm run bench:ab -- --base=REV [--cases=chain:100,diamond:300] [--pairs=12]`):
 * this checkout's `dist/` against REV (default HEAD: the change not yet committed) built in a worktree of its own,
 * on the same generated workspaces, cold, in interleaved pairs, standbys off. A change worth a few per cent is below
 * what the peers' three reps can tell on a shared box: the two runs of a pair meet the same load, and the engine's
 * main-thread CPU (its on-CPU time from `/proc/self/task/<pid>/schedstat`, read as it exits) is steadier than its
 * wall time. It prints each figure's medians, the pairs' median difference and how many pairs went each way, and
 * writes no report section: it compares two commits, it is not a figure of the project.
 */
import { execFileSync } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"
import { caseLabel, killLive, kilnEnv, type Shape, SHAPES, timedSpawn, writeWorkspace } from "./kiln.js"
import { argValue, median, progress, repo, rm, rotate, tempRoot } from "./report.js"

const CONCURRENCY = 2

/** What each run's engine says of itself as it exits (the preload below). */
interface Figures {
  readonly wallMs: number
  readonly mainCpuMs: number
  readonly processCpuMs: number
  readonly maxRssMb: number
}

const FIGURES: ReadonlyArray<[keyof Figures, string]> = [
  ["wallMs", "wall ms"],
  ["mainCpuMs", "main-thread CPU ms"],
  ["processCpuMs", "process CPU ms"],
  ["maxRssMb", "engine's peak RSS MB"]
]

/** Loaded with `node -r` into each run: one JSON line of its own figures, appended to `$KILN_AB_FIGURES`. */
const PRELOAD = `
const fs = require("fs")
process.on("exit", () => {
  const main = fs.readFileSync("/proc/self/task/" + process.pid + "/schedstat", "utf8").split(" ")[0]
  const cpu = process.cpuUsage()
  fs.appendFileSync(process.env.KILN_AB_FIGURES, JSON.stringify({
    mainCpuMs: Number(main) / 1e6,
    processCpuMs: (cpu.user + cpu.system) / 1000,
    maxRssMb: process.resourceUsage().maxRSS / 1024
  }) + "\\n")
})
`

const casesOf = (text: string): Array<{ readonly shape: Shape; readonly n: number }> =>
  text.split(",").map((c) => {
    const [shape, n] = c.split(":")
    if (!SHAPES.includes(shape as Shape) || !/^[1-9][0-9]*$/.test(n ?? "")) {
      throw new Error(`--cases: ${c} is not <${SHAPES.join("|")}>:<count>`)
    }
    return { shape: shape as Shape, n: Number(n) }
  })

const base = argValue("base") ?? "HEAD"
const pairs = Number(argValue("pairs") ?? "12")
const cases = casesOf(argValue("cases") ?? "chain:100,diamond:300")
if (!Number.isInteger(pairs) || pairs < 1) throw new Error(`--pairs: ${argValue("pairs")} is not a count`)

const tmp = tempRoot("kiln-bench-ab-", killLive)
const env = { ...kilnEnv(tmp), KILN_STANDBY: "off" }
const preload = path.join(tmp.root, "figures.cjs")
fs.writeFileSync(preload, PRELOAD)

/** REV built in a worktree under the temp root, sharing this checkout's node_modules. */
const buildBase = (): string => {
  const dir = path.join(tmp.root, "base")
  const rev = execFileSync("git", ["-C", repo, "rev-parse", "--short", base], { encoding: "utf8" }).trim()
  progress(`building ${base} (${rev}) in ${dir}`)
  execFileSync("git", ["-C", repo, "worktree", "add", "--detach", dir, rev], { stdio: "ignore" })
  fs.symlinkSync(path.join(repo, "node_modules"), path.join(dir, "node_modules"))
  execFileSync("npm", ["run", "build"], { cwd: dir, stdio: ["ignore", "ignore", "inherit"] })
  return dir
}

const coldRun = async (dist: string, ws: string, config: string, n: number, log: string): Promise<Figures> => {
  const store = tmp.fresh("store")
  rm(path.join(ws, "out"))
  const figures = path.join(tmp.root, "figures.jsonl")
  rm(figures)
  const summaryFile = tmp.fresh("summary")
  const options = {
    "--store-dir": store,
    "--concurrency": `${CONCURRENCY}`,
    "--progress": "none",
    "--summary": summaryFile
  }
  const r = await timedSpawn(
    [
      process.execPath,
      "-r",
      preload,
      path.join(dist, "dist", "cli.js"),
      "run",
      "--config",
      config,
      ...Object.entries(options).flat()
    ],
    { env: { ...env, KILN_AB_FIGURES: figures }, log }
  )
  const summary = JSON.parse(fs.readFileSync(summaryFile, "utf8")) as { readonly ran: number; readonly failed: number }
  if (r.code !== 0 || summary.ran !== n || summary.failed !== 0) {
    throw new Error(`a cold run of ${config} under ${dist}: exit ${r.code}, ${summary.ran} of ${n} ran (see ${log})`)
  }
  rm(store)
  return { wallMs: r.ms, ...(JSON.parse(fs.readFileSync(figures, "utf8")) as Omit<Figures, "wallMs">) }
}

const row = (cells: ReadonlyArray<string>) => `| ${cells.join(" | ")} |`
/** Whole numbers, without a "-0". */
const whole = (x: number) => (Math.round(x) === 0 ? 0 : Math.round(x)).toString()

try {
  // Inside the try: a build that fails after its worktree was added still has it removed.
  const builds = [{ name: "this", dir: repo }, { name: "base", dir: buildBase() }] as const
  const lines = [
    `Cold runs, standbys off, ${pairs} interleaved pairs a workspace: this checkout against ${base} (base).`,
    "",
    row(["workspace", "figure", "base", "this", "this − base, pairs' median", "this lower in"]),
    row(["---", "---", "---:", "---:", "---:", "---:"])
  ]
  for (const c of cases) {
    const label = caseLabel({ shape: c.shape, n: c.n })
    const seen = { this: [] as Array<Figures>, base: [] as Array<Figures> }
    // A copy each (the same salt: the same actions), written once; every run starts from an empty store.
    const ws = Object.fromEntries(
      builds.map((b) => [b.name, writeWorkspace(tmp.fresh(`ws-${b.name}`), c.shape, c.n, label)])
    )
    progress(`${label}: ${pairs} pairs`)
    for (let i = 0; i < pairs; i++) {
      for (const b of rotate(builds, i)) {
        const w = ws[b.name]!
        seen[b.name].push(await coldRun(b.dir, w.dir, w.config, c.n, path.join(tmp.root, `${b.name}.log`)))
      }
    }
    for (const [key, name] of FIGURES) {
      const diffs = seen.this.map((f, i) => f[key] - seen.base[i]![key])
      lines.push(row([
        label,
        name,
        whole(median(seen.base.map((f) => f[key]))),
        whole(median(seen.this.map((f) => f[key]))),
        whole(median(diffs)),
        `${diffs.filter((d) => d < 0).length} of ${pairs}`
      ]))
    }
  }
  process.stdout.write(`${lines.join("\n")}\n`)
} finally {
  killLive()
  try {
    execFileSync("git", ["-C", repo, "worktree", "remove", "--force", path.join(tmp.root, "base")], { stdio: "ignore" })
  } catch {
    // Never added (the build of REV failed first): nothing to remove.
  }
  tmp.cleanup()
}
