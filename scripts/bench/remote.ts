/**
 * The remote-cache benchmark (`npm run bench:remote [-- --quick]`; not part of `npm run bench`: it needs the servers
 * of scripts/remote/servers.sh): the cold benchmark's workspaces run by `kiln run --remote-cache …` against Bazel's
 * REAPI worker and nginx on 127.0.0.1, beside the same runs without a remote, in the same run, interleaved:
 * - restore: a fresh copy of the workspace on an empty store, every result from the remote, against a local
 *   cache-hit restore (a fresh copy on a store that holds everything);
 * - cold with uploads: a fresh store and a fresh cache namespace (the remote misses), every result uploaded, against
 *   a cold run without a remote;
 * - a dead remote (a closed port) and a silent one (accepts, never answers) on a cold and on a fully cached run.
 * Every measurement has a cache namespace of its own, so runs of other benchmarks or tests on the same servers never
 * collide with it. It never fails on a missed target: it reports, and writes its section into report.md.
 */
import { type ChildProcess, spawn, spawnSync } from "node:child_process"
import { randomBytes } from "node:crypto"
import * as fs from "node:fs"
import * as net from "node:net"
import * as os from "node:os"
import * as path from "node:path"
import {
  type Case,
  caseLabel,
  expectRan,
  killLive,
  kilnEnv,
  kilnRun,
  leftovers,
  type RunSummary,
  SIZED_CASES,
  timedSpawn,
  type Workspace,
  writeWorkspace
} from "./kiln.js"
import { remoteExecution } from "./remoteExec.js"
import {
  argValue,
  cli,
  emit,
  fmtMs,
  machineNotes,
  ms,
  now,
  progress,
  quick,
  ratioText,
  rawTable,
  renderSection,
  repo,
  rm,
  rotate,
  type Row,
  Samples,
  type Section,
  sh,
  type Summary,
  tempRoot,
  writeOwnSection
} from "./report.js"

const CONCURRENCY = os.availableParallelism()
// Two reps, as the cold benchmark: a restore from the remote of 1,000 processes takes tens of seconds.
const REPS = 2
const NOOP_REPS = quick ? 3 : 5
const RESTORE_TARGET = 2
const UPLOAD_TARGET = 1.1
const DEAD_TARGET_MS = 500
const SILENT_TARGET_MS = 2000

const CASES = SIZED_CASES
const label = caseLabel

/** This run's mark, in every salt and namespace: the servers keep what earlier runs and the tests put there. */
const RUN_ID = `bench-${randomBytes(4).toString("hex")}`
const execOnly = process.argv.includes("--exec-only")
const reportFile = path.join(repo, "scripts", "bench", "report.md")
const serversScript = path.join(repo, "scripts", "remote", "servers.sh")
const serversDir = process.env.KILN_REMOTE_DIR ?? "/tmp/kiln-remote-servers"

let silentServer: ChildProcess | undefined
const stopSilent = () => {
  if (silentServer?.pid !== undefined && silentServer.exitCode === null) silentServer.kill("SIGKILL")
}
const tmp = tempRoot("kiln-bench-remote-", () => {
  killLive()
  stopSilent()
})
const env = kilnEnv(tmp)
const samples = new Samples()

// ---------------------------------------------------------------------------------------------------------------
// The servers, a dead port and a silent one

interface Servers {
  readonly grpc: string
  readonly http: string
  /** Whether this run started them (and so stops them). */
  readonly started: boolean
}

const servers = (args: ReadonlyArray<string>) =>
  spawnSync("bash", [serversScript, ...args], { encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] })

/**
 * The plain REAPI worker and nginx of scripts/remote/servers.sh: used when running, else started (and stopped at the
 * end when nothing of that instance ran before).
 */
const ensureServers = (): Servers => {
  const status = servers(["status"]).stderr
  const up = /plain worker: pid/.test(status) && /nginx: pid/.test(status)
  const started = !up && !/: pid \d+/.test(status)
  const envFile = path.join(serversDir, "env")
  if (!up || !fs.existsSync(envFile)) {
    progress("the remote-cache servers are not running: bash scripts/remote/servers.sh start")
    const start = servers(["start"])
    if (start.status !== 0) {
      throw new Error(
        "the remote-cache servers are not running and could not be started: run `bash scripts/remote/servers.sh " +
          `start\` (it said: ${start.stderr.trim().split("\n").at(-1) ?? "nothing"})`
      )
    }
  }
  const text = fs.readFileSync(envFile, "utf8")
  const [grpc, http] = ["REAPI", "HTTP"].map((k) => new RegExp(`^KILN_TEST_${k}_URL=(.+)$`, "m").exec(text)?.[1])
  if (grpc === undefined || http === undefined) throw new Error(`${serversDir}/env names no REAPI or HTTP URL`)
  return { grpc, http, started }
}

/** A port nothing listens on: one the kernel gave a moment ago, closed. */
const deadPort = () =>
  new Promise<number>((resolve, reject) => {
    const s = net.createServer().once("error", reject)
    s.listen(0, "127.0.0.1", () => {
      const { port } = s.address() as net.AddressInfo
      s.close(() => resolve(port))
    })
  })

/** A server that accepts and never answers, in a Node process of its own (this one's loop stays free). */
const SILENT_JS = "const s=require('net').createServer((c)=>c.on('error',()=>{}));" +
  "s.listen(0,'127.0.0.1',()=>process.stdout.write(s.address().port+'\\n'))"
const startSilent = () =>
  new Promise<number>((resolve, reject) => {
    const child = spawn(process.execPath, ["-e", SILENT_JS], { stdio: ["ignore", "pipe", "inherit"] })
    silentServer = child
    child.once("error", reject)
    child.once("exit", (code, signal) => reject(new Error(`the silent server exited with ${code ?? signal}`)))
    child.stdout.once("data", (b: Buffer) => resolve(Number(b.toString("utf8").trim())))
  })

// ---------------------------------------------------------------------------------------------------------------
// Runs

interface RemoteSummary extends RunSummary {
  readonly remoteCacheHits: number
  readonly uploadedBytes: number
  readonly pendingUploads: number
  readonly remoteErrors: Readonly<Record<string, number>>
}

/** A fresh copy of the template workspace (no outputs), its kiln.json in the cache namespace `ns`. */
const copyOf = (tpl: Workspace, ns: string): Workspace => {
  const dir = tmp.fresh(`ws-${tpl.shape}`)
  fs.cpSync(tpl.dir, dir, { recursive: true })
  const config = path.join(dir, "kiln.json")
  const json = JSON.parse(fs.readFileSync(config, "utf8")) as object
  fs.writeFileSync(config, JSON.stringify({ cacheNamespace: ns, ...json }, null, 1))
  return { ...tpl, dir, config, leafFile: path.join(dir, path.relative(tpl.dir, tpl.leafFile)) }
}

/** The remote errors and pending uploads that runs with a remote reported, by measurement (the last rep's). */
const remoteState = new Map<string, string>()
/** What runs with uploads sent, and how long `kiln remote flush` took for what they left pending. */
const uploads: Array<{ what: string; ms: number; bytes: number; pending: number; flushMs?: number }> = []

/**
 * `kiln run` of `ws` on `store` (with `--remote-cache url`), checked: `ran` processes ran and the rest were hits,
 * `remoteHits` of them from the remote. Recorded as `what` (and its engine time) unless `untimed`. With `uploads`,
 * what it sent is noted, and `kiln remote flush` takes up what it left pending: nothing stays pending.
 */
const run = async (what: string, ws: Workspace, store: string, o: {
  readonly url?: string
  readonly ran: number
  readonly remoteHits?: number
  readonly untimed?: boolean
  readonly uploads?: boolean
}) => {
  const args = o.url === undefined ? [] : ["--remote-cache", o.url]
  const r = await kilnRun(tmp, env, { ws, store, concurrency: CONCURRENCY, args })
  const s = r.summary as RemoteSummary
  if (o.remoteHits !== undefined && s.remoteCacheHits !== o.remoteHits) {
    throw new Error(`${what}: ${s.remoteCacheHits} remote hits, not ${o.remoteHits}; ${JSON.stringify(s.remoteErrors)}`)
  }
  expectRan(what, r, ws.nodes.length, o.ran)
  const state = [
    ...(s.pendingUploads > 0 ? [`${s.pendingUploads} uploads pending`] : []),
    ...(Object.keys(s.remoteErrors).length > 0 ? [`errors ${JSON.stringify(s.remoteErrors)}`] : [])
  ]
  if (state.length > 0) remoteState.set(what, state.join(", "))
  if (o.untimed !== true) {
    samples.record(what, r.ms)
    samples.record(`${what}: engine (--summary wallMs)`, s.wallMs)
  }
  if (o.uploads === true && o.url !== undefined) {
    let flushMs: number | undefined
    if (s.pendingUploads > 0) {
      const log = tmp.fresh("log")
      const argv = [cli, "remote", "flush", "--config", ws.config, "--store-dir", store, "--remote-cache", o.url]
      const f = await timedSpawn([process.execPath, ...argv], { env, log })
      if (f.code !== 0) throw new Error(`kiln remote flush failed: ${fs.readFileSync(log, "utf8").trim()}`)
      rm(log)
      flushMs = f.ms
    }
    uploads.push({ what, ms: r.ms, bytes: s.uploadedBytes, pending: s.pendingUploads, ...(flushMs ? { flushMs } : {}) })
  }
}

// ---------------------------------------------------------------------------------------------------------------
// One workspace

const benchCase = async (c: Case, srv: Servers, dead: string, silent: string) => {
  const l = label(c)
  const tpl = writeWorkspace(tmp.fresh(`tpl-${c.shape}`), c.shape, c.n, `${RUN_ID} ${l}`)
  const ns = `${RUN_ID}-${c.shape}-restore`
  const remotes = { REAPI: srv.grpc, nginx: srv.http } as const

  // Filled in one namespace: a local store by a cold run without a remote, each server by a cold run with uploads.
  progress(`${l}: filling a local store, the REAPI worker and nginx (namespace ${ns})`)
  const cachedWs = copyOf(tpl, ns)
  const local = tmp.fresh("store-local")
  await run(`fill local ${l}`, cachedWs, local, { ran: c.n, untimed: true })
  for (const [name, url] of Object.entries(remotes)) {
    const ws = copyOf(tpl, ns)
    const store = tmp.fresh("store")
    await run(`fill ${name} ${l}`, ws, store, { url, ran: c.n, untimed: true, uploads: true })
    rm(ws.dir)
    rm(store)
  }

  progress(`${l}: ${REPS} reps of a restore from the local store, from REAPI and from nginx`)
  for (let i = 0; i < REPS; i++) {
    for (const which of rotate(["local", "REAPI", "nginx"] as const, i)) {
      const ws = copyOf(tpl, ns)
      if (which === "local") await run(`restore local ${l}`, ws, local, { ran: 0 })
      else {
        const store = tmp.fresh("store")
        await run(`restore ${which} ${l}`, ws, store, { url: remotes[which], ran: 0, remoteHits: c.n })
        rm(store)
      }
      rm(ws.dir)
    }
  }

  progress(`${l}: ${NOOP_REPS} reps of a fully cached run without a remote, with a dead one and with a silent one`)
  const noopUrl = { none: undefined, dead, silent } as const
  await run(`warm-up no-op ${l}`, cachedWs, local, { ran: 0, untimed: true })
  for (let i = 0; i < NOOP_REPS; i++) {
    for (const which of rotate(["none", "dead", "silent"] as const, i)) {
      const url = noopUrl[which]
      await run(`no-op ${which} ${l}`, cachedWs, local, { ran: 0, ...(url ? { url } : {}) })
    }
  }
  rm(cachedWs.dir)
  rm(local)

  progress(`${l}: ${REPS} reps of a cold run without a remote, uploading to REAPI, with a dead and a silent one`)
  const coldUrl = { none: undefined, REAPI: srv.grpc, dead, silent } as const
  for (let i = 0; i < REPS; i++) {
    for (const which of rotate(["none", "REAPI", "dead", "silent"] as const, i)) {
      // A namespace never seen: the remote misses every lookup, and every result is new to it.
      const ws = copyOf(tpl, `${RUN_ID}-${c.shape}-cold-${i}-${which}`)
      const store = tmp.fresh("store")
      const url = coldUrl[which]
      await run(`cold ${which} ${l}`, ws, store, { ran: c.n, uploads: which === "REAPI", ...(url ? { url } : {}) })
      rm(ws.dir)
      rm(store)
    }
  }
  rm(tpl.dir)
}

// ---------------------------------------------------------------------------------------------------------------
// Rows and the section

const signedS = (x: number) => `${x < 0 ? "−" : "+"}${(Math.abs(x) / 1000).toFixed(2)} s`

/** What a remote adds to a run: the difference of the medians, against a target in ms. */
const added = (figure: string, a: Summary, b: Summary, baseline: string, target: number): Row => ({
  figure,
  value: `${fmtMs(a)}: ${signedS(a.median - b.median)} (mins ${signedS(a.min - b.min)})`,
  baseline: `${baseline} ${fmtMs(b)}`,
  ratio: ratioText(a, b),
  target: { op: "<=", value: target, actual: a.median - b.median, unit: "ms" }
})

const rowsOf = (c: Case): Array<Row> => {
  const l = label(c)
  const get = (name: string) => samples.summary(`${name} ${l}`)
  const [local, cold, noop, up] = [get("restore local"), get("cold none"), get("no-op none"), get("cold REAPI")]
  const restoreRow = (server: "REAPI" | "nginx", how: string): Row => {
    const r = get(`restore ${server}`)
    return {
      figure: `${server === "REAPI" ? "" : "  "}restore from ${how}, ${l} (empty store, fresh copy)`,
      value: `${fmtMs(r)}: ${(r.median / c.n).toFixed(2)} ms/process`,
      baseline: `local restore ${fmtMs(local)}`,
      ratio: ratioText(r, local),
      target: { op: "<=", value: RESTORE_TARGET, actual: r.median / local.median, unit: "×" }
    }
  }
  const sent = uploads.filter((u) => u.what === `cold REAPI ${l}`)
  const kb = sent.reduce((n, u) => n + u.bytes, 0) / sent.length / 1e3
  return [
    restoreRow("REAPI", "the REAPI worker (grpc)"),
    restoreRow("nginx", "nginx (HTTP)"),
    {
      figure: `cold with uploads to REAPI, ${l} (fresh store, fresh namespace)`,
      value: `${fmtMs(up)}; ${kb.toFixed(0)} kB up a run, ${
        sent.filter((u) => u.pending > 0).length
      } runs left some pending`,
      baseline: `cold, no remote ${fmtMs(cold)}`,
      ratio: ratioText(up, cold),
      target: { op: "<=", value: UPLOAD_TARGET, actual: up.median / cold.median, unit: "×" }
    },
    added(`dead remote, cold, ${l}`, get("cold dead"), cold, "cold, no remote", DEAD_TARGET_MS),
    added(`silent remote, cold, ${l}`, get("cold silent"), cold, "cold, no remote", SILENT_TARGET_MS),
    added(`dead remote, fully cached, ${l}`, get("no-op dead"), noop, "no-op, no remote", DEAD_TARGET_MS),
    added(`silent remote, fully cached, ${l}`, get("no-op silent"), noop, "no-op, no remote", SILENT_TARGET_MS)
  ]
}

const notes = (srv: Servers): string => {
  const fills = uploads.filter((u) => u.what.startsWith("fill ")).map((u) =>
    `${u.what.slice(5)} ${ms(u.ms)} ms, ${(u.bytes / 1e3).toFixed(0)} kB up, ${u.pending} left pending` +
    (u.flushMs !== undefined ? ` (\`kiln remote flush\` ${ms(u.flushMs)} ms)` : "")
  )
  const state = [...remoteState].map(([what, s]) => `${what}: ${s}`)
  return [
    "Notes:",
    `- Every figure is the wall time of \`node dist/cli.js run --config kiln.json --store-dir S --concurrency` +
    ` ${CONCURRENCY} --progress none --summary F [--remote-cache URL]\` from spawn to exit; the median of ${REPS}` +
    " reps (mins in brackets), the contenders interleaved in rotated order. Every run's summary is checked: what" +
    " ran, what was a hit, and for a restore that every hit came from the remote.",
    `- Servers: Bazel's REAPI worker at ${srv.grpc} and nginx (Bazel's HTTP cache) at ${srv.http}, from` +
    ` scripts/remote/servers.sh (${srv.started ? "started by this run, stopped at its end" : "already running"}).`,
    "- Restore: a fresh copy of the workspace (no outputs) on an empty store, every process a remote hit, its" +
    " outputs fetched, checked, stored and written back. Baseline: a fresh copy on a local store that holds" +
    " everything, no remote. Beforehand, in the same cache namespace, a cold run filled the local store and one" +
    ` with uploads each server: ${fills.join("; ")}.`,
    "- Cold with uploads: a fresh copy in a cache namespace of its own (kiln.json's `cacheNamespace`) on a fresh" +
    " store: every remote lookup misses and every result is uploaded (the run waits up to 10 s for its uploads;" +
    " `kiln remote flush` takes up what is left pending). Baseline: the same without a remote.",
    "- Dead remote: `grpc://127.0.0.1:<a closed port>`; silent remote: `grpc://127.0.0.1:<port>` of a Node `net`" +
    " server (in a process of its own) that accepts and never answers. Their figure is the difference of the" +
    ` medians. Fully cached: the filled workspace (outputs present) on its store, ${NOOP_REPS} reps after a` +
    " warm-up; without a remote the run memo answers it, and a `--remote-cache` flag takes it past the memo.",
    "- Workspaces: the cold benchmark's (5 input files a process; wide, chain, diamonds of 1 and 32), each" +
    ` measurement in a cache namespace of its own. Targets: restore ≤ ${RESTORE_TARGET}× the local restore; cold` +
    ` with uploads ≤ ${UPLOAD_TARGET}× cold; a dead remote adds ≤ ${DEAD_TARGET_MS} ms, a silent one ≤` +
    ` ${SILENT_TARGET_MS} ms.`,
    `- What the runs' summaries said of the remote (last rep): ${state.length === 0 ? "nothing" : state.join("; ")}.`
  ].join("\n")
}

const revision = (): string => {
  const commit = sh("git", ["-C", repo, "log", "-1", "--format=%h %s"])
  const dirty = sh("git", ["-C", repo, "status", "--porcelain", "--", "src"]) !== ""
  return `- kiln: commit ${commit}${dirty ? " **with uncommitted changes in src/**" : ""}`
}

const main = async () => {
  if (!fs.existsSync(cli)) throw new Error(`${cli} is missing: run \`npm run build\` first`)
  // --exec-only starts a worker of its own (remoteExec.ts): the shared servers are neither needed nor touched.
  const srv = execOnly ? undefined : ensureServers()
  const loadStart = os.loadavg()
  const t0 = now()
  const rows: Array<Row> = []
  let left = { processes: 0, sandboxes: 0 }
  let execNotes = ""
  try {
    const dead = `grpc://127.0.0.1:${await deadPort()}`
    const silent = `grpc://127.0.0.1:${await startSilent()}`
    if (srv !== undefined) {
      progress(`run ${RUN_ID}: REAPI ${srv.grpc}, nginx ${srv.http}, dead ${dead}, silent ${silent}`)
    }
    // --exec-only: the remote-execution figure alone (printed, not written: it would replace the whole section).
    if (srv !== undefined) {
      for (const c of CASES) {
        await benchCase(c, srv, dead, silent)
        rows.push(...rowsOf(c))
      }
    }
    // Its CPU figure is GNU time's of the kiln it starts: a standby engine that took a run on would escape it.
    const exec = await remoteExecution({ tmp, env: { ...env, KILN_STANDBY: "off" }, samples })
    rows.push(...exec.rows)
    execNotes = exec.notes
  } finally {
    stopSilent()
    left = await leftovers(tmp)
    tmp.cleanup()
    if (srv?.started === true) servers(["stop"])
  }
  const wallSeconds = (now() - t0) / 1000
  const tempDir = path.dirname(tmp.root)
  const section: Section = {
    name: "remote",
    title: "Remote cache (`npm run bench:remote`)",
    quick,
    wallSeconds,
    loadStart,
    loadEnd: os.loadavg(),
    rows,
    body: [
      ...(srv !== undefined ? [notes(srv)] : []),
      execNotes,
      `- Left behind at the end: ${left.processes} processes, ${left.sandboxes} sandboxes.`,
      "",
      "Machine (this benchmark runs alone, not in `npm run bench`):",
      "",
      revision(),
      machineNotes({ loadStart, loadEnd: os.loadavg(), tempDir, wallSeconds }),
      "",
      "Raw measurements:",
      "",
      rawTable(samples)
    ].join("\n")
  }
  emit(section, tempDir)
  if (argValue("section-json") === undefined && !execOnly) {
    writeOwnSection(reportFile, "remote", renderSection(section, "##"))
    progress(`wrote its section into ${path.relative(process.cwd(), reportFile)}`)
  }
}

await main().catch((e: unknown) => {
  process.stderr.write(`bench:remote: ${e instanceof Error ? e.message : String(e)}\n`)
  process.exitCode = 1
})
