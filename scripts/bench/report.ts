/**
 * What every benchmark shares: timed samples and their statistics, the report's tables, machine notes, the common
 * flags (`--quick`, `--section-json=FILE`), a temp root removed at the end, and how a benchmark hands its section to
 * `npm run bench` (scripts/bench/bench.ts) or, run alone, prints it.
 *
 * A benchmark never fails on a missed target: a row's `met?` says so, and the exit code stays 0.
 */
import { Effect } from "effect"
import { execFileSync } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { fileURLToPath } from "node:url"

// dist/bench/*.mjs → the repository root.
export const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..", "..")
export const cli = path.join(repo, "dist", "cli.js")
/**
 * How a user's `kiln` starts: the package's bin (`dist/kiln`, the native client that hands a run to a waiting standby
 * without starting Node). With Node options (a CPU profile), Node and the loader, which read them.
 */
export const kilnStart = (nodeArgs: ReadonlyArray<string> = []): Array<string> =>
  nodeArgs.length === 0 ? [path.join(repo, "dist", "kiln")] : [process.execPath, ...nodeArgs, cli]

// ---------------------------------------------------------------------------------------------------------------
// Flags every benchmark takes

export const argValue = (name: string): string | undefined =>
  process.argv.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3)
export const hasFlag = (name: string): boolean => process.argv.includes(`--${name}`)
/** `--quick`: smaller sizes and fewer reps, for a fast look (the figures are noisier). */
export const quick = hasFlag("quick")

// ---------------------------------------------------------------------------------------------------------------
// Samples and statistics

export const now = (): number => performance.now()

export const median = (xs: ReadonlyArray<number>): number => {
  const s = [...xs].sort((a, b) => a - b)
  const m = s.length >> 1
  return s.length % 2 === 1 ? s[m]! : (s[m - 1]! + s[m]!) / 2
}

export const quantile = (xs: ReadonlyArray<number>, q: number): number => {
  const s = [...xs].sort((a, b) => a - b)
  return s[Math.min(s.length - 1, Math.floor(q * s.length))]!
}

export interface Summary {
  readonly median: number
  readonly min: number
  readonly max: number
  readonly n: number
}

/** Timed samples in ms, by name, in the order the names were first recorded. */
export class Samples {
  private readonly byName = new Map<string, Array<number>>()
  record(name: string, ms: number): void {
    const xs = this.byName.get(name) ?? []
    xs.push(ms)
    this.byName.set(name, xs)
  }
  has(name: string): boolean {
    return (this.byName.get(name)?.length ?? 0) > 0
  }
  get(name: string): ReadonlyArray<number> {
    return this.byName.get(name) ?? []
  }
  names(): ReadonlyArray<string> {
    return [...this.byName.keys()]
  }
  summary(name: string): Summary {
    const xs = this.byName.get(name)
    if (xs === undefined || xs.length === 0) throw new Error(`no samples for ${name}`)
    return { median: median(xs), min: Math.min(...xs), max: Math.max(...xs), n: xs.length }
  }
  timeSync<A>(name: string, f: () => A): A {
    const t0 = now()
    const a = f()
    this.record(name, now() - t0)
    return a
  }
  async timeAsync<A>(name: string, f: () => Promise<A>): Promise<A> {
    const t0 = now()
    const a = await f()
    this.record(name, now() - t0)
    return a
  }
}

/** Records the wall time of `eff` in `samples` under `name`. */
export const timeEffect = <A, E>(samples: Samples, name: string, eff: Effect.Effect<A, E>): Effect.Effect<A, E> =>
  Effect.suspend(() => {
    const t0 = now()
    return Effect.tap(eff, () => Effect.sync(() => samples.record(name, now() - t0)))
  })

/** The order of the contenders in rep `i`: rotated, so that no one always runs first (or right after another). */
export const rotate = <T>(xs: ReadonlyArray<T>, i: number): Array<T> => xs.map((_, j) => xs[(i + j) % xs.length]!)

export const progress = (msg: string): void => {
  process.stderr.write(`[bench] ${msg}\n`)
}

// ---------------------------------------------------------------------------------------------------------------
// Formatting

/** Milliseconds: whole above 100, one decimal below. */
export const ms = (x: number): string => (Math.abs(x) >= 100 ? x.toFixed(0) : x.toFixed(1))
/** `median ms (min min)` of a sample. */
export const fmtMs = (s: Summary): string => `${ms(s.median)} ms (min ${ms(s.min)})`
export const times = (x: number): string => `${x.toFixed(2)}×`
/** The ratio of two samples' medians, and of their mins. */
export const ratioText = (a: Summary, b: Summary): string =>
  `${times(a.median / b.median)} (mins ${times(a.min / b.min)})`

// ---------------------------------------------------------------------------------------------------------------
// Tables

/**
 * A target on a row: `<=` for lower-is-better, `>=` for higher-is-better; `actual` is what is compared, in `unit`
 * (a ratio, `×`, or milliseconds, `ms`).
 */
export interface Target {
  readonly op: "<=" | ">="
  readonly value: number
  readonly actual: number
  readonly unit: "×" | "ms"
}

/** One row of a benchmark's table: a figure, kiln's value, the baseline measured in the same run, their ratio. */
export interface Row {
  readonly figure: string
  readonly value: string
  readonly baseline: string
  readonly ratio: string
  readonly target?: Target
}

export const targetText = (t: Target): string =>
  `${t.op === ">=" ? "≥" : "≤"} ${t.unit === "×" ? `${t.value}×` : `${t.value} ms`}`

export const isMet = (t: Target): boolean => (t.op === ">=" ? t.actual >= t.value : t.actual <= t.value)

export const met = (row: Row): string => row.target === undefined ? "(info)" : isMet(row.target) ? "yes" : "**NO**"

const cell = (s: string) => s.replaceAll("|", "\\|")

export const table = (rows: ReadonlyArray<Row>): string =>
  [
    "| figure | kiln | baseline (same run) | ratio | target | met? |",
    "|---|---|---|---|---|---|",
    ...rows.map((r) =>
      `| ${cell(r.figure)} | ${cell(r.value)} | ${cell(r.baseline)} | ${cell(r.ratio)} | ${
        r.target === undefined ? "" : targetText(r.target)
      } | ${met(r)} |`
    )
  ].join("\n")

/** Every sample: runs, median, min. */
export const rawTable = (samples: Samples): string =>
  [
    "| measurement | runs | median ms | min ms |",
    "|---|---|---|---|",
    ...samples.names().map((name) => {
      const s = samples.summary(name)
      return `| ${cell(name)} | ${s.n} | ${s.median.toFixed(1)} | ${s.min.toFixed(1)} |`
    })
  ].join("\n")

// ---------------------------------------------------------------------------------------------------------------
// Machine notes

export const sh = (cmd: string, args: ReadonlyArray<string>): string => {
  try {
    return execFileSync(cmd, args, { encoding: "utf8", stdio: ["ignore", "pipe", "ignore"] }).trim()
  } catch {
    return "?"
  }
}

export const fsTypeOf = (dir: string): string => sh("df", ["-T", dir]).split("\n")[1]?.split(/\s+/)[1] ?? "?"

const loadText = (xs: ReadonlyArray<number>) => xs.map((x) => x.toFixed(2)).join(" ")

export const machineNotes = (o: {
  readonly loadStart: ReadonlyArray<number>
  readonly loadEnd: ReadonlyArray<number>
  readonly tempDir: string
  readonly wallSeconds: number
}): string =>
  [
    `- date: ${new Date().toISOString()}`,
    `- CPU: ${os.cpus()[0]?.model ?? "?"}; nproc ${sh("nproc", [])}, ${os.cpus().length} logical, ` +
    `availableParallelism ${os.availableParallelism()}`,
    `- memory: ${(os.totalmem() / 1024 ** 3).toFixed(1)} GiB; kernel: ${os.type()} ${os.release()}`,
    `- Node ${process.version}; temp dirs on ${fsTypeOf(o.tempDir)} (${o.tempDir})`,
    `- load average (1/5/15 min): ${loadText(o.loadStart)} before, ${loadText(o.loadEnd)} after`,
    `- wall time: ${o.wallSeconds.toFixed(0)} s`
  ].join("\n")

/**
 * How a benchmark's section ends: what the run left behind, the kiln it measured (`kiln`: its revision line), the
 * machine, and every sample. `alone`: it says that the benchmark runs on its own, not in `npm run bench`.
 */
export const closingNotes = (o: {
  readonly left: { readonly processes: number; readonly sandboxes: number }
  readonly kiln: string
  readonly loadStart: ReadonlyArray<number>
  readonly tempDir: string
  readonly wallSeconds: number
  readonly samples: Samples
  readonly alone?: boolean
}): string =>
  [
    `- Left behind at the end: ${o.left.processes} processes, ${o.left.sandboxes} sandboxes.`,
    "",
    ...(o.alone === true ? ["Machine (this benchmark runs alone, not in `npm run bench`):", ""] : []),
    o.kiln,
    machineNotes({ loadStart: o.loadStart, loadEnd: os.loadavg(), tempDir: o.tempDir, wallSeconds: o.wallSeconds }),
    "",
    "Raw measurements:",
    "",
    rawTable(o.samples)
  ].join("\n")

// ---------------------------------------------------------------------------------------------------------------
// Report files

/**
 * The report holds the latest run and one section of notes about it, below this line: a rewrite keeps that
 * section, and whoever writes up a new run replaces it (earlier notes stay in git's history of the file).
 */
export const HAND_WRITTEN =
  "<!-- The notes below are kept when the benchmark rewrites this file: one section, about the latest run. " +
  "Replace them when you write up a new run; earlier notes are in `git log -p scripts/bench/report.md`. -->"

/** The markers of earlier reports, whose notes are kept too. */
const EARLIER_MARKERS = ["<!-- Hand-written notes below this line are kept when the benchmark rewrites this file. -->"]

export const NOTES_HEADING = "## Notes"

/** The notes section of a report's text: what is below its marker, under one `## Notes` heading. */
export const notesOf = (report: string): string => {
  const marker = [HAND_WRITTEN, ...EARLIER_MARKERS].find((m) => report.includes(m))
  const notes = marker === undefined ? "" : report.slice(report.indexOf(marker) + marker.length).trim()
  if (notes.startsWith(`${NOTES_HEADING}\n`) || notes === NOTES_HEADING) return `${notes}\n`
  return `${NOTES_HEADING}\n\n${notes === "" ? "None yet about this run." : notes}\n`
}

/** The notes section of the report file (see {@link notesOf}); a missing file has none yet. */
export const keptNotes = (file: string): string => {
  let old = ""
  try {
    old = fs.readFileSync(file, "utf8")
  } catch {
    // No report yet.
  }
  return notesOf(old)
}

/** Writes through a temp file and a rename, so that an interrupted run never leaves half a report. */
export const writeAtomically = (file: string, text: string): void => {
  fs.writeFileSync(`${file}.tmp`, text)
  fs.renameSync(`${file}.tmp`, file)
}

/**
 * A section written by a benchmark too slow for `npm run bench` (`npm run bench:trees`): run alone, it writes its
 * section into the report between these two markers (above the notes), replacing the one it wrote before; a rewrite
 * by `npm run bench` keeps it as it was, with its own date and machine.
 */
export const ownSectionBegin = (name: string): string =>
  `<!-- section ${name}: written by \`npm run bench:${name}\`, kept when \`npm run bench\` rewrites this file -->`
export const ownSectionEnd = (name: string): string => `<!-- end of section ${name} -->`

/** The block of the section `name` in a report's text, markers included, if it has one. */
export const ownSectionOf = (report: string, name: string): string | undefined => {
  const begin = report.indexOf(ownSectionBegin(name))
  const end = report.indexOf(ownSectionEnd(name))
  return begin < 0 || end < begin ? undefined : report.slice(begin, end + ownSectionEnd(name).length)
}

/**
 * Every section a benchmark of its own wrote into a report's text, in the report's order: whichever command wrote it,
 * so that one added later is kept without being listed here.
 */
export const ownSectionsIn = (report: string): Array<string> => {
  const names = [...report.matchAll(/<!-- section ([\w-]+): written by /g)].map((m) => m[1]!)
  return [...new Set(names)].flatMap((name) => ownSectionOf(report, name) ?? [])
}

/** Writes `markdown` into the report file as the section `name` (see {@link ownSectionBegin}). */
export const writeOwnSection = (file: string, name: string, markdown: string): void => {
  let old = ""
  try {
    old = fs.readFileSync(file, "utf8")
  } catch {
    // No report yet: the section and an empty notes section.
  }
  const block = `${ownSectionBegin(name)}\n\n${markdown.trim()}\n\n${ownSectionEnd(name)}`
  const previous = ownSectionOf(old, name)
  const marker = old.indexOf(HAND_WRITTEN)
  const text = previous !== undefined
    ? old.replace(previous, () => block)
    : marker >= 0
    ? `${old.slice(0, marker)}${block}\n\n${old.slice(marker)}`
    : `${old}${old === "" ? "" : "\n"}${block}\n\n${HAND_WRITTEN}\n\n${notesOf(old)}`
  writeAtomically(file, text)
}

// ---------------------------------------------------------------------------------------------------------------
// Sections: what one benchmark hands to the report

export interface Section {
  /** `store`, `runner`, `noop`, `cold`, `scale`. */
  readonly name: string
  readonly title: string
  readonly quick: boolean
  readonly wallSeconds: number
  readonly loadStart: ReadonlyArray<number>
  readonly loadEnd: ReadonlyArray<number>
  readonly rows: ReadonlyArray<Row>
  /** Markdown after the table: further tables, notes, the raw measurements. */
  readonly body: string
}

export const renderSection = (s: Section, level: "#" | "##"): string =>
  [
    `${level} ${s.title}${s.quick ? " (--quick)" : ""}`,
    "",
    `\`node dist/bench/${s.name}.mjs${s.quick ? " --quick" : ""}\` (scripts/bench/${s.name}.ts): ${
      s.wallSeconds.toFixed(0)
    } s, load average ${loadText(s.loadStart)} before, ${loadText(s.loadEnd)} after.`,
    "",
    table(s.rows),
    "",
    s.body.trim(),
    ""
  ].join("\n")

/**
 * Hands a finished section on: with `--section-json=FILE` (how `npm run bench` runs each benchmark) as JSON into
 * FILE; alone, as a markdown report on stdout with the machine notes.
 */
export const emit = (s: Section, tempDir: string): void => {
  const out = argValue("section-json")
  if (out !== undefined) {
    fs.writeFileSync(out, JSON.stringify(s))
    return
  }
  const doc = [
    renderSection(s, "#"),
    "## Machine",
    "",
    machineNotes({ loadStart: s.loadStart, loadEnd: s.loadEnd, tempDir, wallSeconds: s.wallSeconds }),
    ""
  ].join("\n")
  process.stdout.write(doc)
}

// ---------------------------------------------------------------------------------------------------------------
// Temp dirs

/** kiln puts sockets in `$XDG_RUNTIME_DIR/kiln` only when that path leaves 40 bytes for a name (of 107). */
const SOCKET_NAME_ROOM = 40
const MAX_SOCKET_PATH = 107

export interface TempRoot {
  readonly root: string
  /** A path under the root that no other call returns (not created). */
  readonly fresh: (label: string) => string
  readonly cleanup: () => void
}

export const rm = (p: string): void => fs.rmSync(p, { recursive: true, force: true })

/**
 * One temp root for a benchmark, removed at the end and on Ctrl-C or SIGTERM (after `onInterrupt`, which ends what
 * the benchmark started). Short, under /tmp when the OS temp dir is long: sandboxers' sockets go under it.
 */
export const tempRoot = (prefix: string, onInterrupt: () => void = () => {}): TempRoot => {
  const base = path.join(os.tmpdir(), `${prefix}XXXXXX`, "run", "kiln").length + SOCKET_NAME_ROOM <= MAX_SOCKET_PATH
    ? os.tmpdir()
    : "/tmp"
  const root = fs.mkdtempSync(path.join(base, prefix))
  let counter = 0
  let cleaned = false
  const cleanup = () => {
    if (cleaned) return
    cleaned = true
    rm(root)
  }
  for (const signal of ["SIGINT", "SIGTERM"] as const) {
    process.once(signal, () => {
      onInterrupt()
      cleanup()
      process.exit(signal === "SIGINT" ? 130 : 143)
    })
  }
  return { root, fresh: (label) => path.join(root, `${label}-${counter++}`), cleanup }
}
