/**
 * Where a kiln run's time goes, from one profiled run (`--profile=<scenario>`): its `--trace` (each process's
 * phases: cache lookup, queue, materialize, run, capture) summed over the processes, and the V8 CPU profile of the
 * kiln process (`node --cpu-prof`), its self time by function and by where the code lives.
 */
import * as fs from "node:fs"
import { SourceMap } from "node:module"
import * as path from "node:path"

interface TraceEvent {
  readonly name: string
  readonly cat?: string
  readonly ph: string
  readonly ts?: number
  readonly dur?: number
  readonly args?: { readonly source?: string }
}

const fmt = (ms: number) => `${(ms / 1000).toFixed(2)} s`

/** The trace's phases summed over every process, and how many processes ran or came from a cache. */
export const traceSummary = (file: string): Array<string> => {
  const events = (JSON.parse(fs.readFileSync(file, "utf8")) as { readonly traceEvents: ReadonlyArray<TraceEvent> })
    .traceEvents
  const processes = events.filter((e) => e.cat === "process")
  const sources = new Map<string, number>()
  for (const p of processes) sources.set(p.args?.source ?? "?", (sources.get(p.args?.source ?? "?") ?? 0) + 1)
  const phases = new Map<string, number>()
  for (const e of events.filter((x) => x.cat === "phase")) {
    phases.set(e.name, (phases.get(e.name) ?? 0) + (e.dur ?? 0) / 1000)
  }
  const start = Math.min(...processes.map((p) => p.ts ?? 0))
  const end = Math.max(...processes.map((p) => (p.ts ?? 0) + (p.dur ?? 0)))
  const busy = processes.reduce((s, p) => s + (p.dur ?? 0) / 1000, 0)
  return [
    `processes: ${[...sources].map(([s, n]) => `${n} ${s}`).join(", ")}; first start to last end ${
      fmt((end - start) / 1000)
    }, summed process spans ${fmt(busy)}`,
    `phases summed over the processes: ${
      [...phases].sort((a, b) => b[1] - a[1]).map(([k, v]) => `${k} ${fmt(v)}`).join(", ")
    }`
  ]
}

interface ProfileNode {
  readonly id: number
  readonly callFrame: {
    readonly functionName: string
    readonly url: string
    readonly lineNumber: number
    readonly columnNumber: number
  }
  readonly hitCount?: number
}

/** The bundle's source maps, by the bundle's URL (`dist/kiln.cjs.map` beside it), when they are there. */
const maps = new Map<string, SourceMap | undefined>()
const mapOf = (url: string): SourceMap | undefined => {
  if (!maps.has(url)) {
    const file = `${url.replace(/^file:\/\//, "")}.map`
    maps.set(url, fs.existsSync(file) ? new SourceMap(JSON.parse(fs.readFileSync(file, "utf8"))) : undefined)
  }
  return maps.get(url)
}

/** A frame's name: the bundle's minified ones mapped back to their source file and line through its map. */
const frameName = (f: ProfileNode["callFrame"]): string => {
  const fn = f.functionName || "(anonymous)"
  if (f.url === "") return fn
  const found = /kiln\.cjs$/.test(f.url) ? mapOf(f.url)?.findEntry(f.lineNumber, f.columnNumber) : undefined
  const entry = found as { originalSource?: string; originalLine?: number; name?: string } | undefined
  if (entry?.originalSource !== undefined && entry.originalLine !== undefined) {
    const src = entry.originalSource.replace(/^.*?\/(src|node_modules)\//, "$1/")
    return `${entry.name ?? fn} ${src}:${entry.originalLine + 1}`
  }
  return `${fn} ${path.basename(f.url)}:${f.lineNumber + 1}`
}

interface CpuProfile {
  readonly nodes: ReadonlyArray<ProfileNode>
  readonly samples: ReadonlyArray<number>
  readonly timeDeltas: ReadonlyArray<number>
  readonly startTime: number
  readonly endTime: number
}

/** Where code lives: a package of node_modules, kiln's bundle, Node's own, or V8's pseudo-frames. */
const placeOf = (url: string, fn: string): string => {
  if (url === "") return fn.startsWith("(") ? fn : "(native)"
  const m = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(url)
  if (m !== null) return m[1]!
  if (url.startsWith("node:")) return "node internals"
  if (/dist\/kiln\.cjs|dist\/cli/.test(url)) return "kiln bundle"
  return path.basename(url)
}

/** The largest self times of the profile's functions and places, the top `n` of each. */
export const cpuSummary = (file: string, n = 12): Array<string> => {
  const p = JSON.parse(fs.readFileSync(file, "utf8")) as CpuProfile
  const byId = new Map(p.nodes.map((x) => [x.id, x]))
  const self = new Map<number, number>()
  for (let i = 0; i < p.samples.length; i++) {
    const id = p.samples[i]!
    self.set(id, (self.get(id) ?? 0) + (p.timeDeltas[i] ?? 0) / 1000)
  }
  const fns = new Map<string, number>()
  const places = new Map<string, number>()
  for (const [id, ms] of self) {
    const f = byId.get(id)!.callFrame
    const name = frameName(f)
    fns.set(name, (fns.get(name) ?? 0) + ms)
    const place = placeOf(f.url, f.functionName)
    places.set(place, (places.get(place) ?? 0) + ms)
  }
  const total = (p.endTime - p.startTime) / 1000
  const top = (m: Map<string, number>) =>
    [...m].sort((a, b) => b[1] - a[1]).slice(0, n).map(([k, v]) =>
      `${k.trim()} ${Math.round(v)} ms (${((100 * v) / total).toFixed(1)}%)`
    )
  return [
    `CPU profile of the kiln process: ${fmt(total)} profiled`,
    `self time by place: ${top(places).join("; ")}`,
    `self time by function: ${top(fns).join("; ")}`
  ]
}
