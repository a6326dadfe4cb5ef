/**
 * The no-op check: before `dist/cli.js` loads the engine (Effect, LMDB, the CLI parser: more than Node's own start-up
 * again), a `kiln run` looks at the workspace's run memo (see `engine/RunMemo.ts`). When every process it
 * would run is remembered and its evidence holds, the run is answered from the memo (the same lines, `--summary`
 * and exit code a run that found every process cached would give) and nothing else is loaded. Anything it does not
 * fully understand (an option it does not know, a memo that is missing, stale or from another build, a config that
 * changed, a store that changed) falls through to the full run, which decides.
 *
 * `KILN_NOOP_DEBUG=1` says on stderr why the check fell through (or that it answered).
 *
 * Plain code without Effect, by design: loading Effect is what it saves.
 */
import * as fs from "node:fs"
import * as path from "node:path"
import * as ConfigText from "../../domain/config/ConfigText.js"
import * as ProcessName from "../../domain/config/ProcessName.js"
import * as ResolvedConfig from "../../domain/config/ResolvedConfig.js"
import * as Selection from "../../domain/config/Selection.js"
import * as GraphOrder from "../../domain/GraphOrder.js"
import * as RunMemo from "../../layers/engine/RunMemo.js"
import * as Endpoint from "../../layers/remote/Endpoint.js"
import * as Layout from "../../layers/store/Layout.js"
import * as Tasks from "../../layers/tasks/Tasks.js"
import { cacheDir } from "../../os/CacheDir.js"
import * as PrivateDir from "../../os/PrivateDir.js"
import { writeReportFile } from "../../os/TextFile.js"
import { type OptionSpec } from "../common/optionSpec.js"
import * as ConfigFile from "./configFile.js"
import { RUN_OPTIONS } from "./optionTable.js"

const CONFIG_HANDOVER = Symbol.for("kiln.configHandover")

/** The fields that make a config's processes other than its text says (`ResolvedConfig.ts`). */
const PASSING = ["\"defaults\"", "\"passEnv\"", "\"passThroughEnv\""]

/**
 * The config file as the check read it, when its bytes are those a run of this build validated (the memo's hash):
 * the engine takes it instead of reading, hashing and checking it again.
 */
export interface ValidatedConfig {
  readonly file: string
  readonly hash: string
  /** The file's text, which the engine records in the run memo it writes. */
  readonly text: string
  /** The file's JSON, as parsed: the engine takes it as the config only if it is valid as it stands (no decoding). */
  readonly json: unknown
}

/** The config the check handed over for `file`, once (see {@link ValidatedConfig}). */
export const takeValidatedConfig = (file: string): ValidatedConfig | undefined => {
  const g = globalThis as { [CONFIG_HANDOVER]?: ValidatedConfig }
  const handed = g[CONFIG_HANDOVER]
  delete g[CONFIG_HANDOVER]
  return handed?.file === file ? handed : undefined
}

/** Drops what a check left for the engine (the config and the memo), when no engine follows it in this process. */
export const forgetHandovers = (): void => {
  delete (globalThis as { [CONFIG_HANDOVER]?: ValidatedConfig })[CONFIG_HANDOVER]
  RunMemo.forgetHandover()
}

export interface Parsed {
  readonly names: Array<string>
  readonly options: Map<string, string>
}

/**
 * Options of `kiln run` the check reads (the rest fall through): those that take a value, with the values it accepts
 * ("int": a positive integer; undefined: any), and those that take none.
 */
const VALUED = new Map<string, ReadonlyArray<string> | "int" | undefined>()
const FLAGS = new Set<string>()
for (const spec of Object.values(RUN_OPTIONS) as ReadonlyArray<OptionSpec>) {
  if (spec.kind === "choice") {
    if (spec.fast.length > 0) VALUED.set(spec.flag, spec.fast)
  } else if (spec.fast) {
    if (spec.kind === "boolean") FLAGS.add(spec.flag)
    else VALUED.set(spec.flag, spec.kind === "integer" ? "int" : undefined)
  }
}

const BOOLEAN_WORDS = /^(true|false|yes|no|on|off|y|n|1|0)$/i

/**
 * `run [NAME…] [--option value | --option=value]… [--keep-going] [-- NAME…]`, or why not (anything else). The CLI
 * also runs a `kiln run` that parses here without @effect/cli (`runCommand.ts`, `directRunArgs`).
 */
export const parse = (args: ReadonlyArray<string>): Parsed | string => {
  if (args[0] !== "run") return "not `kiln run`"
  const names: Array<string> = []
  const options = new Map<string, string>()
  for (let i = 1; i < args.length; i++) {
    const arg = args[i]!
    if (arg === "--") {
      const rest = args.slice(i + 1)
      // @effect/cli still reads `--help` there; a process named like an option is rare enough to leave to it.
      if (rest.some((name) => name.startsWith("-"))) return "a name like an option after --"
      names.push(...rest)
      break
    }
    if (!arg.startsWith("-")) {
      names.push(arg)
      continue
    }
    const eq = arg.indexOf("=")
    const name = arg.slice(2, eq === -1 ? undefined : eq)
    if (!arg.startsWith("--") || options.has(name)) return `option ${arg}`
    if (FLAGS.has(name)) {
      if (eq !== -1 || BOOLEAN_WORDS.test(args[i + 1] ?? "")) return `option ${arg}`
      options.set(name, "true")
      continue
    }
    if (!VALUED.has(name)) return `option ${arg}`
    const value = eq === -1 ? args[++i] : arg.slice(eq + 1)
    if (value === undefined || value === "") return `option ${arg}`
    const allowed = VALUED.get(name)
    if (allowed === "int" ? !/^[1-9][0-9]{0,8}$/.test(value) : allowed !== undefined && !allowed.includes(value)) {
      return `option --${name} ${value}`
    }
    options.set(name, value)
  }
  return { names, options }
}

/** "1 process", "5 processes": how a run's last line counts (the full run's report says it the same way). */
export const countOf = (n: number): string => `${n} process${n === 1 ? "" : "es"}`

interface ProcessJson {
  readonly deps?: ReadonlyArray<string>
  readonly cache?: string
}

/** Why the memo cannot answer, and whether that means a process will run (so the sandboxer is worth starting). */
class Falls {
  constructor(readonly reason: string, readonly runs: boolean) {}
}

/** kiln.json's top-level `"sandbox"`, parsed only when its text names one; `auto` without. */
const sandboxIn = (text: string): string => {
  if (!text.includes("\"sandbox\"")) return "auto"
  const setting = (JSON.parse(text) as { sandbox?: unknown }).sandbox
  return typeof setting === "string" ? setting : "auto"
}

/**
 * Where a remote's endpoint is a bad URL (an option or a variable), if one is: the full run's to report (exit 2), never
 * a no-op's to pass over.
 */
const badEndpointIn = (o: ReadonlyMap<string, string>, env: NodeJS.ProcessEnv): string | undefined => {
  const given: ReadonlyArray<[string, string | undefined]> = [
    ["--remote-cache", o.get("remote-cache")],
    ["--remote-executor", o.get("remote-executor")],
    ["KILN_REMOTE_CACHE", env.KILN_REMOTE_CACHE],
    ["KILN_REMOTE_EXECUTOR", env.KILN_REMOTE_EXECUTOR]
  ]
  return given.find(([, url]) => url !== undefined && url !== "" && Endpoint.isProblem(Endpoint.parse(url)))?.[0]
}

/** Why the memo cannot answer this run, or the answer. */
const check = (
  args: ReadonlyArray<string>,
  env: NodeJS.ProcessEnv,
  started: number
): Falls | { readonly lines: Array<string>; readonly summary?: string; readonly summaryText: string } => {
  const parsed = parse(args)
  if (typeof parsed === "string") return new Falls(parsed, false)
  const o = parsed.options
  const badEndpoint = badEndpointIn(o, env)
  if (badEndpoint !== undefined) return new Falls(`${badEndpoint}: a bad URL`, false)
  const storeRoot = o.has("store-dir") ? path.resolve(o.get("store-dir")!) : cacheDir("store", "KILN_STORE_DIR", env)
  const configFile = ConfigFile.find(o.get("config"))
  if (configFile === undefined) return new Falls("no kiln.json here or above", false)
  const workspace = path.dirname(configFile)
  // A store another user can write could hold any memo: the full run refuses it, with the reason.
  if (PrivateDir.inspect(storeRoot, "group") !== undefined) return new Falls("the store root is not safe", false)
  const configText = ConfigFile.readText(configFile)
  if ("problem" in configText) return new Falls(`${configFile}: ${configText.problem}`, false)
  let text = configText.text
  // The memo is kept per sandbox mode (see `RunMemo.buildId`): the flag's, else kiln.json's, else auto.
  const sandbox = o.get("sandbox") ?? sandboxIn(text)
  // Handed over: when the check falls through, the engine takes what it found instead of looking again.
  const memo = RunMemo.read(storeRoot, workspace, true, sandbox)
  if (memo === undefined) {
    return new Falls(`no run memo of this workspace (from this build of kiln, under --sandbox ${sandbox})`, true)
  }
  // A config with tasks is remembered by the processes they gave (see `runDirect.loadConfig`): they are given again
  // from the workspace as it is now, and compared.
  // So is one with defaults or variables to pass: resolved here as a run resolves it, a passEnv value that changed is
  // a config that changed (a pass-through one is not: only its name is in the config).
  let expanded: Tasks.Expanded["config"] | undefined
  // JSON with comments and trailing commas, as the full run reads it; one it cannot read is the full run's to report.
  const read = ConfigText.parse(text)
  if ("errors" in read) return new Falls(`${path.basename(configFile)} is not valid JSON`, false)
  if (text.includes("\"tasks\"") || PASSING.some((field) => text.includes(field))) {
    const raw = read.json as Tasks.ConfigInput
    const declares = Tasks.declares(raw)
    if (declares || ResolvedConfig.needsResolving(raw)) {
      const found: Tasks.Expanded | Tasks.Problem = declares
        ? Tasks.expandAt(workspace, path.basename(configFile), raw)
        : { config: raw as Tasks.Expanded["config"], origins: {} }
      if (Tasks.isProblem(found)) return new Falls(`${found.file}: ${found.path}: ${found.detail}`, false)
      const declaredAt = (name: string): ReadonlyArray<PropertyKey> => {
        const origin = found.origins[name]
        return origin === undefined ? ["processes", name] : ["tasks", origin.key]
      }
      const resolved = ResolvedConfig.resolve(path.basename(configFile), found.config, env, declaredAt)
      if (ResolvedConfig.isProblem(resolved)) return new Falls(`${resolved.path}: ${resolved.detail}`, false)
      expanded = resolved as Tasks.Expanded["config"]
      text = Tasks.canonicalText(expanded)
    }
  }
  if (!RunMemo.configHolds(memo, text)) {
    return new Falls(`${path.basename(configFile)}${expanded !== undefined ? "'s processes" : ""} changed`, true)
  }
  const json = (expanded ?? read.json) as {
    processes: Record<string, ProcessJson>
    remote?: { cache?: unknown; executor?: unknown }
  }
  ;(globalThis as { [CONFIG_HANDOVER]?: ValidatedConfig })[CONFIG_HANDOVER] = {
    file: configFile,
    hash: memo.config,
    text,
    json
  }
  const processes = json.processes
  const depsOf = (n: string) => processes[n]!.deps ?? []
  // The words select as the full run's do (`domain/config/Selection.ts`); one that names nothing is the full run's to report.
  const selected = parsed.names.length === 0
    ? { _tag: "Selected" as const, names: Object.keys(processes) }
    : Selection.select({ names: Object.keys(processes), depsOf }, parsed.names)
  if (selected._tag === "Unknown") return new Falls(selected.message, false)
  const targets = selected.names
  const listed = GraphOrder.closure(depsOf, targets)
  const depsFirst = GraphOrder.depsFirst(depsOf, listed)
  const never = depsFirst.find((n) => processes[n]!.cache === "never")
  if (never !== undefined) return new Falls(`${never} is never cached`, true)
  const store = RunMemo.storeHolds(storeRoot, memo)
  if (store !== undefined) return new Falls(store, true)
  // Uploads an earlier run left are taken up by the next run that has a remote: this one, then.
  const remote = o.has("remote-cache") || o.has("remote-executor") || (env.KILN_REMOTE_CACHE ?? "") !== "" ||
    (env.KILN_REMOTE_EXECUTOR ?? "") !== "" || json.remote?.cache !== undefined || json.remote?.executor !== undefined
  if (remote) {
    if (uploadsPending(storeRoot)) return new Falls("uploads to the remote cache are pending", false)
  }
  // Every process, not only up to the first that does not hold: the engine would look at the rest anyway.
  const { restorable, valid, why } = RunMemo.holding(
    memo,
    workspace,
    depsFirst,
    (n) => JSON.stringify(processes[n]),
    depsOf,
    { config: json }
  )
  if (valid.size !== depsFirst.length) {
    const [name, reason] = [...why][0]!
    // Only outputs to write back again (a restore): nothing will run, so no spawner is started for it.
    return new Falls(`${name}: ${reason}`, valid.size + restorable.size !== depsFirst.length)
  }
  const progress = o.get("progress") ?? "auto"
  const mode = progress === "auto" ? (process.stderr.isTTY ? "tty" : "plain") : progress
  const wallMs = Date.now() - started
  const lines = mode === "none" ? [] : [
    // `--output-logs none` shows no process's line, only a failure's (there is none).
    ...(o.get("output-logs") === "none" ? [] : depsFirst.map((n) => `✓ ${n} (cached)`)),
    `kiln: ${countOf(depsFirst.length)}: 0 ran, ${depsFirst.length} cached, 0 failed in ${(wallMs / 1000).toFixed(2)}s`
  ]
  const summary = {
    processes: listed.map((name) => ({
      name,
      actionDigest: valid.get(name)!.action,
      source: "cache-hit",
      exitCode: 0,
      durationMs: 0,
      backtracks: 0,
      stdoutDigest: valid.get(name)!.stdout,
      stderrDigest: valid.get(name)!.stderr,
      sandbox: null,
      undeclaredWrites: null
    })),
    ran: 0,
    cacheHits: listed.length,
    failed: 0,
    backtracks: 0,
    wallMs,
    remoteCacheHits: 0,
    remoteExecuted: 0,
    remoteFallbacks: 0,
    uploadedBytes: 0,
    downloadedBytes: 0,
    pendingUploads: 0,
    remoteErrors: {}
  }
  return {
    lines,
    ...(o.has("summary") ? { summary: o.get("summary") === "-" ? "-" : path.resolve(o.get("summary")!) } : {}),
    summaryText: ProcessName.printableJson(summary, 2) + "\n"
  }
}

/** Whether any remote's upload journal in the store holds an entry (see `remote/internal/journal.ts`). */
const uploadsPending = (storeRoot: string): boolean => {
  const root = Layout.ownedDirectory(storeRoot, "remote")
  let endpoints: Array<string>
  try {
    endpoints = fs.readdirSync(root)
  } catch {
    return false
  }
  return endpoints.some((e) => {
    try {
      return fs.readdirSync(path.join(root, e, "pending")).some((n) => n.endsWith(".json"))
    } catch {
      return false
    }
  })
}

/**
 * The check of `args` and nothing else: no output, no summary, and what it found is left for the caller to drop
 * ({@link forgetHandovers}). A standby runs it once before it waits, so that the next run's check meets warm code.
 */
export const rehearse = (args: ReadonlyArray<string>, env: NodeJS.ProcessEnv = process.env): void => {
  // Nobody waits for this check: it watches the trees it finds as recorded, so that the next ones need not stat them.
  RunMemo.groupWatches.arming(true)
  try {
    check(args, env, Date.now())
  } finally {
    RunMemo.groupWatches.arming(false)
  }
}

/** Whether a watch a rehearsal made has reported a change since this was last asked (see `RunMemo.groupWatches`). */
export const watchLost = (): boolean => RunMemo.groupWatches.lost()

/**
 * Answers `kiln run` from the run memo when nothing changed: "answered" when it did (the exit code is 0); else the
 * full CLI must run, and "runs" says that it will most likely run a process.
 */
export const answer = (
  args: ReadonlyArray<string>,
  env: NodeJS.ProcessEnv = process.env
): "answered" | "runs" | "other" => {
  const started = Date.now()
  let result: ReturnType<typeof check>
  try {
    result = check(args, env, started)
  } catch (e) {
    result = new Falls(`the check failed: ${e instanceof Error ? e.message : String(e)}`, false)
  }
  const debug = env.KILN_NOOP_DEBUG === "1"
  const watched = RunMemo.groupWatches.heldByWatch()
  if (debug && watched > 0) {
    process.stderr.write(`kiln: no-op check: ${watched} whole tree${watched === 1 ? "" : "s"} held by their watch\n`)
  }
  if (result instanceof Falls) {
    if (debug) process.stderr.write(`kiln: no-op check: ${result.reason}\n`)
    return result.runs ? "runs" : "other"
  }
  if (result.summary !== undefined) {
    // `-` is stdout, as the full run has it; a file that cannot be written is the full run's to say.
    if (result.summary === "-") process.stdout.write(result.summaryText)
    else if (writeReportFile(result.summary, result.summaryText) !== undefined) return "other"
  }
  if (debug) process.stderr.write("kiln: no-op check: nothing changed\n")
  if (result.lines.length > 0) process.stderr.write(result.lines.join("\n") + "\n")
  return "answered"
}
