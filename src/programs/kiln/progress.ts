/**
 * What `kiln run` shows while it runs: on a TTY a live status line (running processes with their elapsed time, and
 * the tally) redrawn at a calm rate under the finished lines; elsewhere plain lines only.
 */
import * as Effect from "effect/Effect"
import * as Schedule from "effect/Schedule"
import type * as Scope from "effect/Scope"
import type * as Engine from "../../layers/engine/Engine.js"

export type Mode = "tty" | "plain" | "none"

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
}

/** A progress display for `total` processes, its redraw fiber scoped; the status line is cleared at the end. */
export const make = (mode: Mode, total: number): Effect.Effect<Progress, never, Scope.Scope> =>
  Effect.gen(function*() {
    const running = new Map<string, number>()
    let done = 0
    let cached = 0
    let failed = 0
    let drawn = false
    const out = process.stderr
    const clear = () => {
      if (drawn) out.write("\r\x1b[2K")
      drawn = false
    }
    const draw = () => {
      if (mode !== "tty") return
      const now = Date.now()
      const names = [...running].slice(0, 4).map(([n, t]) => `${n} ${seconds(now - t)}`).join(", ")
      const more = running.size > 4 ? ` +${running.size - 4}` : ""
      const queued = total - done - running.size
      const status =
        `${done}/${total} done, ${cached} cached, ${running.size} running, ${queued} queued, ${failed} failed` +
        (names === "" ? "" : ` | ${names}${more}`)
      const width = out.columns ?? 120
      out.write(`\r\x1b[2K${status.slice(0, width - 1)}`)
      drawn = true
    }
    if (mode === "tty") {
      yield* Effect.forkScoped(Effect.repeat(Effect.sync(draw), Schedule.spaced("150 millis")))
      yield* Effect.addFinalizer(() => Effect.sync(clear))
    }
    return {
      onEvent: (e) =>
        Effect.sync(() => {
          if (mode === "none") return
          if (e._tag === "Started") {
            running.set(e.name, Date.now())
            return
          }
          running.delete(e.report.name)
          done++
          if (e.report.source === "cache-hit" || e.report.source === "remote-cache") cached++
          if (!line(e.report).startsWith("✓")) failed++
          clear()
          out.write(`${line(e.report)}\n`)
          draw()
        })
    }
  })
