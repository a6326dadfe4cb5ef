/**
 * What `kiln run` shows while it runs: on a TTY a live status line (running processes with their elapsed time, and
 * the tally) redrawn at a calm rate under the finished lines; elsewhere plain lines only. While input files are
 * hashed for longer than a moment (a first run over a large tree), the status line says so, and off a TTY a line
 * says when it starts and another when it ends.
 */
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Schedule from "effect/Schedule"
import type * as Scope from "effect/Scope"
import type * as Engine from "../../../layers/engine/Engine.js"
import type { HashProgress } from "../../../layers/store/Store.js"

export type Mode = "tty" | "plain" | "none"

/** How often the status line is redrawn (ms). */
const REDRAW_MS = 150

const seconds = (ms: number) => `${(ms / 1000).toFixed(ms < 10_000 ? 1 : 0)}s`

/** Why a process failed; the engine names the process at its start, and the line names it already. */
const reason = (r: Engine.ProcessReport): string => {
  const detail = r.detail ?? "error"
  return detail.startsWith(`${r.name}: `) ? detail.slice(r.name.length + 2) : detail
}

/** How long its tool ran: its report's duration is its whole span, a wait for a free slot included. */
const ranFor = (r: Engine.ProcessReport): number => r.timings.remoteExecution ?? r.timings.run ?? r.durationMs

/** Where it ran, when not here: remotely, with the server's queue time when it says. */
const where = (r: Engine.ProcessReport): string =>
  r.source !== "remote"
    ? ""
    : ` (remote${r.timings.remoteQueue !== undefined ? `, queued ${seconds(r.timings.remoteQueue)}` : ""})`

export const line = (r: Engine.ProcessReport): string => {
  // It ran (or hit the cache) and exited 0, but its outputs could not be written back into the workspace.
  if (!r.ok && r.source !== "skipped" && r.source !== "error" && r.exitCode === 0 && !r.timedOut) {
    return `✗ ${r.name}: ${reason(r)}`
  }
  switch (r.source) {
    case "cache-hit":
      return r.exitCode === 0 ? `✓ ${r.name} (cached)` : `✗ ${r.name} exit ${r.exitCode} (cached)`
    case "remote-cache":
      return r.exitCode === 0 ? `✓ ${r.name} (remote cache)` : `✗ ${r.name} exit ${r.exitCode} (remote cache)`
    case "remote":
    case "ran":
      if (r.timedOut) return `✗ ${r.name} timed out after ${seconds(ranFor(r))}${where(r)}`
      if (r.exitCode === null) return `✗ ${r.name} killed${where(r)}`
      return r.exitCode === 0
        ? `✓ ${r.name} ${seconds(ranFor(r))}${where(r)}${r.backtracks > 0 ? ` (${r.backtracks} backtrack)` : ""}`
        : `✗ ${r.name} exit ${r.exitCode}${where(r)}`
    case "skipped":
      return `- ${r.name} skipped: ${r.detail ?? ""}`
    case "error":
      return `✗ ${r.name}: ${reason(r)}`
  }
}

export interface Progress {
  readonly onEvent: (e: Engine.Event) => Effect.Effect<void>
  readonly onHashing: HashProgress
}

/** How long hashing goes on before it is shown, unless `KILN_HASHING_NOTICE_MS` says (tests set 0). */
const HASHING_NOTICE_MS = 1000

/** The threshold from `KILN_HASHING_NOTICE_MS`, else the default. */
export const hashingNoticeFrom = (env: NodeJS.ProcessEnv = process.env): number => {
  const text = env.KILN_HASHING_NOTICE_MS
  const n = Number(text)
  return text !== undefined && text !== "" && Number.isInteger(n) && n >= 0 ? n : HASHING_NOTICE_MS
}

/** Why it takes a while, and that it will not again: the stat index vouches for these files from now on. */
const ONCE = "(once: later runs read the stat index)"

/** Files hashed since the last snapshot finished, by the workspace's top-level directory they are under. */
interface Hashing {
  readonly startedAt: number
  files: number
  bytes: number
  readonly byDir: Map<string, number>
  /** The directory of the last file hashed. */
  dir: string
  announced: boolean
}

const count = (n: number) => n.toLocaleString("en-US")

const megabytes = (bytes: number) => `${(bytes / 1e6).toFixed(bytes < 10e6 ? 1 : 0)} MB`

/** The top-level directory a workspace-relative path is under (`./` for a file at the top). */
const topDir = (rel: string) => {
  const slash = rel.indexOf("/")
  return slash < 0 ? "./" : rel.slice(0, slash + 1)
}

const hashingStatus = (h: Hashing) => `hashing inputs: ${h.dir} ${count(h.files)} files, ${megabytes(h.bytes)} ${ONCE}`

const hashingStarted = (h: Hashing) => `kiln: hashing inputs: ${h.dir} ${ONCE}`

/** Its totals, naming the directories that held the most of the files. */
const hashingEnded = (h: Hashing, now: number) => {
  const dirs = [...h.byDir].sort((a, b) => b[1] - a[1])
  const named = dirs.slice(0, 3).map(([d, n]) => `${d} ${count(n)}`).join(", ")
  const more = dirs.length > 3 ? `, ${dirs.length - 3} more` : ""
  return `kiln: hashed ${count(h.files)} input files, ${megabytes(h.bytes)} in ${seconds(now - h.startedAt)}: ` +
    `${named}${more} ${ONCE}`
}

/** What the status line counts. */
export interface Counts {
  readonly total: number
  readonly done: number
  readonly cached: number
  readonly failed: number
  /** The processes whose tool runs now (each has a slot), with when it started: those waiting for one are queued. */
  readonly running: ReadonlyMap<string, number>
  /** Processes whose tool has exited, their outputs being stored: neither running nor queued. */
  readonly ending: number
}

/** The status line: the tally, then the running processes with their time so far (from their start, not their wait). */
export const statusLine = (c: Counts, now: number): string => {
  const names = [...c.running].slice(0, 4).map(([n, t]) => `${n} ${seconds(now - t)}`).join(", ")
  const more = c.running.size > 4 ? ` +${c.running.size - 4}` : ""
  const queued = c.total - c.done - c.running.size - c.ending
  return `${c.done}/${c.total} done, ${c.cached} cached, ${c.running.size} running, ${queued} queued, ${c.failed} failed` +
    (names === "" ? "" : ` | ${names}${more}`)
}

/** What an interrupted run says it cut short. */
export const interruptedLine = (running: ReadonlyArray<string>, notStarted: number): string =>
  `kiln: interrupted${running.length > 0 ? ` ${running.join(", ")}` : ""}` +
  (notStarted > 0 ? `${running.length > 0 ? ";" : ""} ${notStarted} not started` : "")

/**
 * Whether a finished process's line is shown when lines are off (`--progress none`, `--output-logs none`): a failure
 * is always said, so that the run says what failed.
 */
const saidAnyway = (r: Engine.ProcessReport) => !r.ok && r.source !== "skipped"

/** Which finished processes get their line: all, or only failures (`--output-logs none`, as turbo's hides them). */
export type Lines = "all" | "failures"

/**
 * A progress display for `total` processes, its redraw fiber scoped; the status line is cleared at the end. Hashing
 * is shown once it has gone on for `hashingNoticeMs`. What `after` gives for a finished process (its output, a
 * failure's re-run command: `output.ts`) is printed under its line, in the same write, so that nothing another
 * process prints comes between them, and the status line is drawn again below. `lines` says which finished
 * processes get a line (under `--progress none`, only failures do whatever it says).
 */
export const make = (
  mode: Mode,
  total: number,
  hashingNoticeMs: number = HASHING_NOTICE_MS,
  after: (report: Engine.ProcessReport) => Effect.Effect<string> = () => Effect.succeed(""),
  during: (output: Extract<Engine.Event, { _tag: "Output" }>) => string = () => "",
  lines: Lines = "all"
): Effect.Effect<Progress, never, Scope.Scope> =>
  Effect.gen(function*() {
    // Started (their tool has a slot) and not yet exited, with when; exited, their outputs being stored.
    const running = new Map<string, number>()
    const ending = new Set<string>()
    let done = 0
    let cached = 0
    let failed = 0
    let drawn = false
    let drawnAt = 0
    let hashing: Hashing | undefined
    const out = process.stderr
    const clear = () => {
      if (drawn) out.write("\r\x1b[2K")
      drawn = false
    }
    const draw = () => {
      if (mode !== "tty") return
      const now = Date.now()
      const status = hashing?.announced === true ?
        hashingStatus(hashing) :
        statusLine({ total, done, cached, failed, running, ending: ending.size }, now)
      const width = out.columns ?? 120
      out.write(`\r\x1b[2K${status.slice(0, width - 1)}`)
      drawn = true
      drawnAt = now
    }
    // Told from inside a snapshot's walk, which holds the thread while it hashes: the redraw fiber does not run
    // then, so the status line is redrawn from here, at the fiber's rate.
    const onHashing: HashProgress = {
      hashed: (rel, bytes) => {
        if (mode === "none") return
        const now = Date.now()
        const h = hashing ??= { startedAt: now, files: 0, bytes: 0, byDir: new Map(), dir: "./", announced: false }
        h.files++
        h.bytes += bytes
        h.dir = topDir(rel)
        h.byDir.set(h.dir, (h.byDir.get(h.dir) ?? 0) + 1)
        if (!h.announced && now - h.startedAt >= hashingNoticeMs) {
          h.announced = true
          if (mode === "plain") out.write(`${hashingStarted(h)}\n`)
        }
        if (h.announced && now - drawnAt >= REDRAW_MS) draw()
      },
      settled: () => {
        const h = hashing
        hashing = undefined
        if (h === undefined || !h.announced) return
        clear()
        out.write(`${hashingEnded(h, Date.now())}\n`)
        draw()
      }
    }
    // Ctrl-C (or any interruption) says what it cut short: what was running, and how many had not started.
    yield* Effect.addFinalizer((exit) =>
      Effect.sync(() => {
        if (!Exit.isInterrupted(exit)) return
        clear()
        // Those whose tool has just been ended by the interruption itself are among what it cut short.
        const cut = [...running.keys(), ...ending]
        out.write(`${interruptedLine(cut, total - done - cut.length)}\n`)
      })
    )
    if (mode === "tty") {
      yield* Effect.forkScoped(Effect.repeat(Effect.sync(draw), Schedule.spaced(REDRAW_MS)))
      yield* Effect.addFinalizer(() => Effect.sync(clear))
    }
    return {
      onHashing,
      onEvent: (e) =>
        e._tag === "Started"
          ? Effect.sync(() => {
            running.set(e.name, Date.now())
          })
          : e._tag === "Exited"
          ? Effect.sync(() => {
            if (running.delete(e.name)) ending.add(e.name)
          })
          : e._tag === "Output"
          ? Effect.sync(() => {
            const text = during(e)
            if (text === "") return
            clear()
            out.write(`${text}\n`)
            draw()
          })
          : Effect.flatMap(after(e.report), (shown) =>
            Effect.sync(() => {
              const said = (mode !== "none" && lines === "all") || saidAnyway(e.report) ? `${line(e.report)}\n` : ""
              const text = `${said}${shown === "" ? "" : `${shown}\n`}`
              running.delete(e.report.name)
              ending.delete(e.report.name)
              done++
              if (e.report.source === "cache-hit" || e.report.source === "remote-cache") cached++
              if (!line(e.report).startsWith("✓")) failed++
              if (mode === "none") {
                if (text !== "") out.write(text)
                return
              }
              clear()
              out.write(text)
              draw()
            }))
    }
  })
