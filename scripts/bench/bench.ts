/**
 * `npm run bench`: every benchmark, one after the other, each in a Node process of its own (store, runner, noop,
 * cold, scale), into one report, `scripts/bench/report.md`: the machine, every target at a glance, then each
 * benchmark's table, notes and raw measurements; then the one section of hand-written notes about the latest run,
 * kept from the old report (below the line {@link HAND_WRITTEN}). A benchmark that fails is reported as failed; the
 * others still run.
 *
 * `--quick` passes `--quick` to every benchmark (smaller sizes, fewer reps: a few minutes in all).
 * The tool-trees benchmark takes too long to be one of them: `npm run bench:trees` writes its own section into the
 * report, and a rewrite here keeps that section as it was.
 * `--only=noop,cold` runs some of them and prints the report instead of writing the file.
 */
import { spawn } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import {
  argValue,
  HAND_WRITTEN,
  isMet,
  keptNotes,
  machineNotes,
  now,
  ownSectionsIn,
  progress,
  quick,
  renderSection,
  repo,
  type Row,
  type Section,
  sh,
  table,
  writeAtomically
} from "./report.js"

const BENCHMARKS = ["store", "runner", "noop", "cold", "scale"] as const
const reportFile = path.join(repo, "scripts", "bench", "report.md")

const onlyArg = argValue("only")
const selected = onlyArg === undefined ? BENCHMARKS : BENCHMARKS.filter((b) => onlyArg.split(",").includes(b))

type Outcome =
  | { readonly _tag: "done"; readonly section: Section }
  | { readonly _tag: "failed"; readonly name: string; readonly detail: string; readonly seconds: number }

let current: ReturnType<typeof spawn> | undefined
process.once("SIGINT", () => {
  // The benchmark got the same Ctrl-C (one process group): it cleans up after itself. Wait for it.
  if (current === undefined) process.exit(130)
  current.once("exit", () => process.exit(130))
})

const runOne = (name: string, jsonFile: string) =>
  new Promise<Outcome>((resolve) => {
    const t0 = now()
    const args = [path.join(repo, "dist", "bench", `${name}.mjs`), `--section-json=${jsonFile}`]
    if (quick) args.push("--quick")
    progress(`== ${name}: node ${args.map((a) => path.relative(repo, a) || a).join(" ")}`)
    const child = spawn(process.execPath, args, { stdio: ["ignore", "inherit", "pipe"] })
    current = child
    let stderrTail = ""
    child.stderr.on("data", (chunk: Buffer) => {
      process.stderr.write(chunk)
      stderrTail = (stderrTail + chunk.toString("utf8")).slice(-2000)
    })
    child.once("close", (code, signal) => {
      current = undefined
      const seconds = (now() - t0) / 1000
      if (code === 0 && fs.existsSync(jsonFile)) {
        resolve({ _tag: "done", section: JSON.parse(fs.readFileSync(jsonFile, "utf8")) as Section })
      } else {
        resolve({
          _tag: "failed",
          name,
          seconds,
          detail: `exited with ${code ?? signal} after ${seconds.toFixed(0)} s; the end of its stderr:\n\n` +
            "```\n" + stderrTail.trim() + "\n```"
        })
      }
    })
  })

/** Which kiln was measured: the commit, and whether src/ differed from it. */
const revision = () => {
  const commit = sh("git", ["-C", repo, "log", "-1", "--format=%h %s"])
  if (commit === "?") return "- kiln: not a git checkout"
  const dirty = sh("git", ["-C", repo, "status", "--porcelain", "--", "src"]) !== ""
  return `- kiln: commit ${commit}${dirty ? " **with uncommitted changes in src/**" : ""}`
}

/** Every row with a target, from every section, prefixed with its benchmark's name. */
const targets = (outcomes: ReadonlyArray<Outcome>): Array<Row> =>
  outcomes.flatMap((o): Array<Row> =>
    o._tag === "failed"
      ? [{ figure: `${o.name}: the benchmark failed (below)`, value: "", baseline: "", ratio: "" }]
      : o.section.rows.filter((r) => r.target !== undefined).map((r) => ({
        ...r,
        figure: `${o.section.name}: ${r.figure.trim()}`
      }))
  )

const main = async () => {
  const loadStart = os.loadavg()
  const t0 = now()
  const jsonDir = fs.mkdtempSync(path.join(os.tmpdir(), "kiln-bench-sections-"))
  const outcomes: Array<Outcome> = []
  try {
    for (const name of selected) outcomes.push(await runOne(name, path.join(jsonDir, `${name}.json`)))
  } finally {
    fs.rmSync(jsonDir, { recursive: true, force: true })
  }
  const wallSeconds = (now() - t0) / 1000
  const targetRows = targets(outcomes)
  const missed = targetRows.filter((r) => r.target !== undefined && !isMet(r.target)).length
  const withTarget = targetRows.filter((r) => r.target !== undefined).length
  const notes = keptNotes(reportFile)
  const oldReport = fs.existsSync(reportFile) ? fs.readFileSync(reportFile, "utf8") : ""
  // The sections of the benchmarks run by commands of their own (see `writeOwnSection`), kept as they were.
  const ownSections = ownSectionsIn(oldReport).flatMap((block) => [block, ""])
  const doc = [
    "# kiln benchmarks",
    "",
    `Written by \`npm run bench${quick ? " -- --quick" : ""}\` (scripts/bench/bench.ts): ${
      selected.join(", ")
    }, one after the other, each in a Node process of its own. Every kiln figure stands beside a baseline measured in` +
    " the same run; a missed target is reported, never a failure. Timings are noisy on this shared box: read the" +
    " load averages.",
    "",
    "## Machine",
    "",
    revision(),
    machineNotes({ loadStart, loadEnd: os.loadavg(), tempDir: os.tmpdir(), wallSeconds }),
    "",
    `## Targets: ${withTarget - missed} of ${withTarget} met`,
    "",
    table(targetRows),
    "",
    ...outcomes.map((o) =>
      o._tag === "done"
        ? renderSection(o.section, "##")
        : [`## ${o.name}: failed`, "", `\`node dist/bench/${o.name}.mjs\` ${o.detail}`, ""].join("\n")
    ),
    ...ownSections,
    HAND_WRITTEN,
    "",
    notes
  ].join("\n")
  const text = doc.endsWith("\n") ? doc : `${doc}\n`
  if (onlyArg === undefined) {
    writeAtomically(reportFile, text)
    progress(`wrote ${path.relative(process.cwd(), reportFile)} (${wallSeconds.toFixed(0)} s)`)
  } else {
    process.stdout.write(text)
  }
}

await main()
