/**
 * `--trace FILE`: Chrome trace-event JSON (Perfetto and chrome://tracing open it): one complete span per process,
 * on lanes packed so spans never overlap, with its phases as child spans. A process that ran is drawn from when its
 * tool started (it had a slot) to when it was done, its run and capture as phases: what it did before (its cache
 * lookup, its wait for a slot, its sandbox filled) is in its span's arguments, so that the lanes show what ran at
 * once rather than what waited.
 */
import type * as Engine from "../../../layers/engine/Engine.js"

/** A local run's phases, then a remote one's (upload, the execution as kiln saw it, download), in order. */
const PHASES = [
  "cacheLookup",
  "queue",
  "materialize",
  "run",
  "capture",
  "remoteUpload",
  "remoteWait",
  "remoteRun",
  "remoteDownload"
] as const

/** What a process that ran did before its tool started. */
const BEFORE_START: ReadonlySet<string> = new Set(["cacheLookup", "queue", "materialize"])

export const traceEvents = (report: Engine.RunReport) => {
  const lanes: Array<number> = []
  const events: Array<Record<string, unknown>> = [
    { name: "process_name", ph: "M", pid: 1, args: { name: "kiln run" } }
  ]
  for (const p of [...report.processes].sort((a, b) => a.startMs - b.startMs)) {
    const started = p.source === "ran" || p.source === "remote"
    const before = started
      ? Object.fromEntries(
        PHASES.filter((ph) => BEFORE_START.has(ph) && p.timings[ph] !== undefined).map((ph) => [
          `${ph}MsBeforeStart`,
          p.timings[ph]
        ])
      )
      : {}
    const end = p.startMs + p.durationMs
    let lane = lanes.findIndex((free) => free <= p.startMs)
    if (lane < 0) lane = lanes.push(0) - 1
    lanes[lane] = end
    events.push({
      name: p.name,
      cat: "process",
      ph: "X",
      ts: Math.round(p.startMs * 1000),
      dur: Math.max(1, Math.round(p.durationMs * 1000)),
      pid: 1,
      tid: lane + 1,
      args: {
        source: p.source,
        // Where it ran: here, or the executor, with the server's own queue and execution times when it reports them.
        where: p.source === "remote" ? "remote" : p.source === "ran" ? "local" : "cache",
        ...(p.timings.remoteQueue !== undefined ? { remoteQueueMs: p.timings.remoteQueue } : {}),
        ...(p.timings.remoteExecution !== undefined ? { remoteExecutionMs: p.timings.remoteExecution } : {}),
        actionDigest: p.actionDigest,
        exitCode: p.exitCode,
        backtracks: p.backtracks,
        ...before,
        ...(p.sandbox !== undefined ? { sandbox: p.sandbox } : {})
      }
    })
    let t = p.startMs
    for (const phase of PHASES) {
      const d = p.timings[phase]
      if (d === undefined || (started && BEFORE_START.has(phase))) continue
      events.push({
        name: phase,
        cat: "phase",
        ph: "X",
        ts: Math.round(t * 1000),
        dur: Math.max(1, Math.round(d * 1000)),
        pid: 1,
        tid: lane + 1
      })
      t += d
    }
  }
  return { traceEvents: events, displayTimeUnit: "ms" }
}
