/**
 * `--trace FILE`: Chrome trace-event JSON (Perfetto and chrome://tracing open it): one complete span per process,
 * on lanes packed so spans never overlap, with its phases (cache lookup, wait for a permit, materialize, run,
 * capture) as child spans.
 */
import type * as Engine from "../../layers/engine/Engine.js"

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

export const traceEvents = (report: Engine.RunReport) => {
  const lanes: Array<number> = []
  const events: Array<Record<string, unknown>> = [
    { name: "process_name", ph: "M", pid: 1, args: { name: "kiln run" } }
  ]
  for (const p of [...report.processes].sort((a, b) => a.startMs - b.startMs)) {
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
        ...(p.sandbox !== undefined ? { sandbox: p.sandbox } : {})
      }
    })
    let t = p.startMs
    for (const phase of PHASES) {
      const d = p.timings[phase]
      if (d === undefined) continue
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
