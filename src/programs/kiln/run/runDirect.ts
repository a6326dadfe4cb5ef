/**
 * A plain `kiln run`: its arguments read without @effect/cli (`directRunArgs`), and the run itself (`runParsed`),
 * which `runCommand.ts` also hands @effect/cli. Nothing here loads @effect/cli: the CLI loads it only for other
 * commands, and for arguments the direct reader leaves to it (evaluating @effect/cli and the platform modules it
 * brings is a measurable share of an edit run: docs/bench-log.md).
 */
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Option from "effect/Option"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import {
  InvalidConfig,
  isPlainConfig,
  parse as parseConfig,
  salvaged as configSalvaged
} from "../../../domain/config/Config.js"
import type { Config } from "../../../domain/config/Config.js"
import * as ProcessName from "../../../domain/config/ProcessName.js"
import * as ResolvedConfig from "../../../domain/config/ResolvedConfig.js"
import * as GraphOrder from "../../../domain/GraphOrder.js"
import * as Engine from "../../../layers/engine/Engine.js"
import * as RunMemo from "../../../layers/engine/RunMemo.js"
import * as RemoteCache from "../../../layers/remote/RemoteCache.js"
import * as ProcessRunner from "../../../layers/runner/ProcessRunner.js"
import * as Sandboxes from "../../../layers/sandbox/Sandboxes.js"
import * as Store from "../../../layers/store/Store.js"
import * as TaskExpansion from "../../../layers/tasks/TaskExpansion.js"
import * as Tasks from "../../../layers/tasks/Tasks.js"
import { cacheDir } from "../../../os/CacheDir.js"
import * as PrivateDir from "../../../os/PrivateDir.js"
import * as PrivateRoot from "../../../os/PrivateRoot.js"
import { writeReportFile } from "../../../os/TextFile.js"
import { type OptionSpec, type ValuesOf } from "../../common/optionSpec.js"
import { toStoreOptions } from "../../common/storeSettings.js"
import * as AutoGc from "../autoGc.js"
import * as ConfigFile from "../configFile.js"
import * as Noop from "../noop.js"
import { RUN_OPTIONS } from "../optionTable.js"
import * as Selection from "../selection.js"
import { exitOnInvalidRemote, remoteSettings } from "../settings.js"
import { engineStack, exitOnInvalidConfig } from "../stack.js"
import { releaseEarly } from "./earlyRelease.js"
import * as Output from "./output.js"
import * as Progress from "./progress.js"
import { reproduceArgs } from "./reproduce.js"
import * as SandboxNotice from "./sandboxNotice.js"
import { traceEvents } from "./trace.js"

/**
 * The config file a command reads (`configFile.ts`): the one `--config` names, else the nearest kiln.json from here up;
 * none is a config error (exit 2) that says where kiln looked.
 */
export const configFileOf = (given: Option.Option<string>) =>
  Effect.suspend(() => {
    const found = ConfigFile.find(Option.getOrUndefined(given))
    return found !== undefined
      ? Effect.succeed(found)
      : Effect.fail(new InvalidConfig({ file: "", path: "", detail: ConfigFile.notFound(process.cwd()) }))
  })

export const loadConfig = (file: string) =>
  Effect.suspend(() => {
    // Bytes a run of this build has validated (the memo says so) need no second look, only the fast shape check
    // that tells a config valid as it stands from one the schema transforms.
    const handed = Noop.takeValidatedConfig(file)
    if (handed !== undefined && isPlainConfig(handed.json)) {
      return Effect.succeed({ config: handed.json, hash: handed.hash, text: handed.text })
    }
    const read = ConfigFile.readText(file)
    if ("problem" in read) return Effect.fail(new InvalidConfig({ file, path: "", detail: read.problem }))
    const text = read.text
    return Either.match(parseConfig(path.basename(file), text), {
      onLeft: (error) => withTheTasksErrors(file, text, error),
      onRight: (config) =>
        config.tasks === undefined && !ResolvedConfig.needsResolving(config)
          ? Effect.map(
            TaskExpansion.hostPathsOutside(path.dirname(file), path.basename(file), config, text),
            (checked) => ({ config: checked, hash: RunMemo.hashOf(text), text })
          )
          : Effect.map(
            TaskExpansion.expand(path.dirname(file), path.basename(file), config, process.env, text),
            (expanded) => {
              // The memo remembers the processes the tasks gave and the values passed, not kiln.json's text: a new
              // script, package or dependency changes them without changing kiln.json, and so does a passEnv value.
              const canonical = Tasks.canonicalText(expanded.config)
              return { config: expanded.config, hash: RunMemo.hashOf(canonical), text: canonical }
            }
          )
    })
  })

/**
 * A schema error of a config with tasks or values to pass, with the errors their expansion finds in what the schema
 * did not refuse (`Config.salvaged`): every error of the file in one run.
 */
const withTheTasksErrors = (file: string, text: string, error: InvalidConfig) => {
  const salvaged = configSalvaged(text)
  if (
    salvaged === undefined || (salvaged.config.tasks === undefined && !ResolvedConfig.needsResolving(salvaged.config))
  ) {
    return Effect.fail(error)
  }
  return TaskExpansion.expand(path.dirname(file), path.basename(file), salvaged.config, process.env, text).pipe(
    Effect.matchEffect({
      onFailure: (more) =>
        Effect.fail(
          more instanceof InvalidConfig ? salvaged.merged(error, more) : error
        ),
      onSuccess: () => Effect.fail(error)
    })
  )
}

/** `kiln run`'s arguments, parsed: its names, and a value for every option of its table. */
export type RunArgs = { readonly names: Array<string> } & ValuesOf<typeof RUN_OPTIONS>

/** What an option gives when a plain `kiln run` was read directly (see {@link directRunArgs}). */
const directValue = (spec: OptionSpec, given: string | undefined): unknown => {
  switch (spec.kind) {
    case "boolean":
      return given !== undefined
    case "choice":
      return spec.default === undefined ? Option.fromNullable(given) : given ?? spec.default
    case "integer":
      if (given !== undefined) return spec.default === undefined ? Option.some(Number(given)) : Number(given)
      return spec.default === undefined
        ? Option.none()
        : spec.default === "cpus"
        ? os.availableParallelism()
        : spec.default
    case "size":
    case "duration":
      return Option.none()
    case "list":
      return []
    default:
      return spec.default !== undefined ? given ?? spec.default : Option.fromNullable(given)
  }
}

/**
 * `kiln run`'s arguments read without @effect/cli, when they are of the plain kind the run memo's check reads
 * (`noop.ts`: names, and options it knows with values it accepts); undefined for anything else (`--help`, another
 * option, a bad value), which goes through @effect/cli, which also reports errors (its parsing and help machinery
 * are not worth loading for a plain run). Both read the same table (`optionTable.ts`), and a property test holds the two to the
 * same results.
 */
export const directRunArgs = (args: ReadonlyArray<string>): RunArgs | undefined => {
  const parsed = Noop.parse(args)
  if (typeof parsed === "string") return undefined
  const values: Record<string, unknown> = { names: parsed.names }
  for (const [key, spec] of Object.entries(RUN_OPTIONS) as ReadonlyArray<[string, OptionSpec]>) {
    values[key] = directValue(spec, parsed.options.get(spec.flag))
  }
  return values as RunArgs
}

/** The options @effect/cli gives every command, read only before the command's name. */
const GLOBAL_OPTIONS: ReadonlyArray<string> = ["--log-level", "--completions", "--wizard", "--version"]

/**
 * How long a run waits for its uploads before it ends, leaving the rest in the journal for the next run or
 * `kiln remote flush`.
 */
export const UPLOAD_WAIT_MS = 10_000

/** `kiln run` with its arguments parsed (by @effect/cli, or by {@link directRunArgs}). */
export const runParsed = (o: RunArgs) =>
  Effect.gen(function*() {
    const configFile = yield* configFileOf(o.config)
    const loaded = yield* loadConfig(configFile)
    const namespace = Option.getOrUndefined(o.cacheNamespace)
    const config = namespace !== undefined ? { ...loaded.config, cacheNamespace: namespace } : loaded.config
    // The flag wins over kiln.json's setting.
    const flag = Option.getOrUndefined(o.sandbox)
    const sandbox = flag ?? config.sandbox ?? "auto"
    const probe = SandboxNotice.strictProbe()
    if (!SandboxNotice.say(SandboxNotice.noticeOf(sandbox, SandboxNotice.fromOf(flag), probe))) return
    const remote = yield* remoteSettings(o, config, path.dirname(configFile))
    yield* Effect.zipRight(
      Effect.scoped(runLoaded(o, configFile, config, loaded)),
      // Said and written: a standby's client can end now, while the stack closes (see `earlyRelease.ts`).
      releaseEarly(o)
    ).pipe(
      Effect.provide(engineStack({
        store: toStoreOptions(o),
        sandboxRoot: o.sandboxRoot,
        namedCachesDir: o.namedCachesDir,
        keepSandboxes: o.keepSandboxes,
        reuseSandboxes: o.reuseSandboxes === "on",
        runner: { concurrency: o.concurrency, cacheContent: o.cacheContent },
        sandbox,
        ...(remote !== undefined ? { remote } : {})
      }))
    )
    // The store is closed (what this run added is recorded): now it can be told whether to collect.
    yield* AutoGc.startIfDue(o)
  }).pipe(exitOnInvalidConfig, exitOnInvalidRemote, Selection.exitOnAffectedUnavailable)

/**
 * Fails when a process's `hostPaths` reach one of kiln's own directories (`guarded`: what it is, and where), as
 * given or through a symlink: shown to the process, its store would give it every cached blob, its sandbox root other
 * processes' inputs, its runtime directory the sandboxer's socket (which writes a tree wherever it is asked).
 */
const hostPathsClear = (
  file: string,
  config: Config,
  guarded: ReadonlyArray<readonly [string, string]>
) =>
  Effect.suspend(() => {
    const real = (p: string) => {
      try {
        return fs.realpathSync(p)
      } catch {
        return p
      }
    }
    const within = (inner: string, outer: string) => inner === outer || inner.startsWith(`${outer}/`)
    const dirs = guarded.flatMap(([what, dir]) => [...new Set([dir, real(dir)])].map((d) => [what, d] as const))
    for (const [name, pc] of Object.entries(config.processes)) {
      for (const [i, hostPath] of (pc.hostPaths ?? []).entries()) {
        for (const seen of new Set([hostPath, real(hostPath)])) {
          const hit = dirs.find(([, d]) => within(seen, d) || within(d, seen))
          if (hit === undefined) continue
          return Effect.fail(
            new InvalidConfig({
              file: path.basename(file),
              path: `processes.${name}.hostPaths[${i}]`,
              detail: `${JSON.stringify(hostPath)} ${within(seen, hit[1]) ? "is inside" : "holds"} ${hit[0]} (${
                hit[1]
              }): a process must not reach kiln's own files`
            })
          )
        }
      }
    }
    return Effect.void
  })

/**
 * Writes a report the user asked for (`--summary`, `--trace`), or says in one line why it could not, exit 2: the run's
 * own outcome is said as it was.
 */
const reportFile = (flag: string, file: string, text: string): void => {
  const problem = writeReportFile(file, text)
  if (problem === undefined) return
  process.stderr.write(`kiln: ${flag} ${file}: ${problem}\n`)
  process.exitCode = 2
}

/** "1 upload", "3 uploads". */
export const uploadsCount = (n: number) => `${n} upload${n === 1 ? "" : "s"}`

/** The remote's totals for the summary: zeros without a remote, so scripts read one shape. */
const remoteTotals = (stats: RemoteCache.Stats | undefined) => ({
  remoteCacheHits: stats?.remoteCacheHits ?? 0,
  remoteExecuted: stats?.remoteExecuted ?? 0,
  remoteFallbacks: stats?.remoteFallbacks ?? 0,
  uploadedBytes: stats?.uploadedBytes ?? 0,
  downloadedBytes: stats?.downloadedBytes ?? 0,
  pendingUploads: stats?.pendingUploads ?? 0,
  remoteErrors: stats?.remoteErrors ?? {}
})

/** With `--remote-required`, a remote that cannot be used ends the run before anything runs. */
const requireRemote = Effect.gen(function*() {
  const remote = yield* Effect.serviceOption(RemoteCache.RemoteCache)
  if (Option.isNone(remote) || !remote.value.settings.required) return true
  const caps = yield* Effect.either(remote.value.capabilities)
  const endpoint = remote.value.settings.endpoint.display
  const why = Either.isLeft(caps)
    ? RemoteCache.probeFailure(caps.left)
    : caps.right.withoutSha256 !== undefined
    ? RemoteCache.withoutSha256(caps.right.withoutSha256)
    : caps.right.actionCache === "none"
    ? "has no action cache (a CAS-only server)"
    : undefined
  if (why === undefined) return true
  process.stderr.write(`kiln: remote cache ${endpoint} ${why} (--remote-required)\n`)
  process.exitCode = 1
  return false
})

const runLoaded = (
  o: RunArgs,
  configFile: string,
  config: Config,
  loaded: { readonly hash: string; readonly text: string }
) =>
  Effect.gen(function*() {
    for (const name of o.names) {
      if (!Object.hasOwn(config.processes, name) && name.startsWith("-")) {
        // @effect/cli reads the options of every command (--log-level) only before the command's name.
        const option = name.split("=")[0]!
        return yield* Effect.sync(() => {
          process.stderr.write(
            option === "--help" || option === "-h"
              ? `kiln: ${option} goes right after the command: \`kiln run --help\`\n`
              : GLOBAL_OPTIONS.includes(option)
              ? `kiln: ${option} goes before the command: \`kiln ${option} … run\`\n`
              : `kiln: unknown option ${option} of \`kiln run\` (\`kiln run --help\` lists them)\n`
          )
          process.exitCode = 2
        })
      }
    }
    // What the words and --affected select: the targets (a word that names nothing fails here, exit 2).
    const selects = o.names.length > 0 || Option.isSome(o.affected)
    const selected = selects ? yield* Selection.select(configFile, config, o.names, o.affected) : undefined
    if (!(yield* requireRemote)) return
    const store = yield* Store.Store
    const engine = yield* Engine.Engine
    // Not the store's: runs on two stores write the same workspace, and must exclude each other too. Judged as the
    // store's root is: a lock directory others can write is a lock they can forge (a run then waits on their planted
    // holder) or break (their removal lets two runs write one workspace at once).
    const lockDir = cacheDir("locks", "KILN_LOCK_DIR", process.env)
    yield* PrivateRoot.verify("workspace lock directory", lockDir, "own")
    const runtimeDir = PrivateDir.fixedSocketDirectory()
    yield* hostPathsClear(configFile, config, [
      ["kiln's store", store.options.root],
      ["kiln's sandbox root", (yield* Sandboxes.Sandboxes).root],
      [
        "kiln's named caches",
        path.resolve(Option.getOrElse(o.namedCachesDir, () => ProcessRunner.defaultNamedCachesDir()))
      ],
      ["kiln's workspace locks", lockDir],
      // The sandboxer's and the standby's sockets: a process that can reach them can ask kiln to write anywhere.
      ...(runtimeDir !== undefined ? [["kiln's runtime directory", runtimeDir] as const] : [])
    ])
    const mode: Progress.Mode = o.progress === "auto" ? (process.stderr.isTTY ? "tty" : "plain") : o.progress
    const targets = selected ?? Object.keys(config.processes)
    // Under defer, an executor that is the cache keeps the intermediate outputs only its own processes read.
    const remoteSettings = Option.map(yield* Effect.serviceOption(RemoteCache.RemoteCache), (r) => r.settings)
    const requestedOnly = o.cacheContent === "defer" &&
      Option.exists(remoteSettings, (s) => s.executor && s.executorEndpoint === undefined)
    // What the run will count: the targets and everything they depend on.
    const total = GraphOrder.closure((n) => config.processes[n]?.deps ?? [], targets).length
    // The status line has its own scope, closed (the line cleared, its redraws stopped) before the report is printed.
    const hashingNoticeMs = Progress.hashingNoticeFrom()
    const output: Output.Settings = {
      logs: o.outputLogs,
      order: o.logOrder,
      follow: Output.follows(o.outputLogs, o.logOrder),
      concurrent: o.concurrency > 1 && total > 1
    }
    const partial: Output.Partial = new Map()
    const progressMade = Progress.make(
      mode,
      total,
      hashingNoticeMs,
      Output.after(store, output, partial),
      Output.during(output, partial),
      o.outputLogs === "none" ? "failures" : "all"
    )
    const report = yield* Effect.scoped(Effect.flatMap(progressMade, (progress) =>
      engine.run({
        workspace: path.dirname(configFile),
        config,
        ...(selected !== undefined ? { targets: selected } : {}),
        ...(requestedOnly ? { writeBack: "requested" as const } : {}),
        cache: o.cache,
        keepGoing: o.keepGoing,
        maxBacktracks: o.maxBacktracks,
        onEvent: progress.onEvent,
        onHashing: progress.onHashing,
        storeDir: store.options.root,
        reproduceArgs: reproduceArgs(o, config, path.dirname(configFile)),
        failureLines: o.failureLines,
        followOutput: output.follow,
        lockDir,
        configName: path.basename(configFile),
        configHash: loaded.hash,
        configText: loaded.text
      })))
    const remote = yield* remoteEnd(report)
    if (Option.isSome(o.summary)) {
      const summary = {
        processes: report.processes.map((p) => ({
          name: p.name,
          actionDigest: p.actionDigest,
          source: p.source,
          exitCode: p.exitCode,
          durationMs: p.durationMs,
          backtracks: p.backtracks,
          ...(p.stdoutDigest !== undefined ? { stdoutDigest: p.stdoutDigest, stderrDigest: p.stderrDigest } : {}),
          // Which sandbox it had where it ran here; null for a hit or a remote execution.
          sandbox: p.sandbox ?? null,
          // What it wrote beyond its declared outputs ({ count, sample, truncated? }); null when nothing, or a hit.
          undeclaredWrites: p.undeclaredWrites ?? null
        })),
        ran: report.ran,
        cacheHits: report.cacheHits,
        failed: report.failed,
        backtracks: report.backtracks,
        wallMs: report.wallMs,
        ...remoteTotals(remote?.stats)
      }
      // `-` is stdout, as for most tools that write a file (a file named `-` is `./-`). It holds names a tool chose
      // (`undeclaredWrites`): the controls JSON.stringify leaves raw are escaped, for a terminal (a parser reads the
      // same values).
      const text = ProcessName.printableJson(summary, 2) + "\n"
      if (o.summary.value === "-") {
        process.stdout.write(text)
      } else reportFile("--summary", o.summary.value, text)
    }
    if (Option.isSome(o.trace)) reportFile("--trace", o.trace.value, JSON.stringify(traceEvents(report)) + "\n")
    // What each process wrote that no output declares is lost (neither cached nor written back): said once, here.
    const undeclared = o.quiet ? [] : report.processes.flatMap((p) => Output.undeclaredLine(p) ?? [])
    if (undeclared.length > 0) process.stderr.write(`${undeclared.join("\n")}\n`)
    if (mode !== "none") {
      process.stderr.write(
        `kiln: ${Noop.countOf(report.processes.length)}: ${report.ran} ran${
          report.remoteExecuted > 0 ? ` (${report.remoteExecuted} remotely)` : ""
        }, ${report.cacheHits} cached${
          remote !== undefined ? ` (${report.remoteCacheHits} from the remote)` : ""
        }, ${report.failed} failed` +
          `${report.backtracks > 0 ? `, ${report.backtracks} backtracks` : ""} in ${
            (report.wallMs / 1000).toFixed(2)
          }s\n`
      )
    }
    if (remote?.failure !== undefined) {
      process.stderr.write(`kiln: ${remote.failure.message} (--remote-required)\n`)
      process.exitCode = 1
    }
    if (report.failed > 0 || report.processes.some((p) => p.source === "skipped")) process.exitCode = 1
  })

/**
 * The remote's end of a run: its uploads waited for (at most {@link UPLOAD_WAIT_MS}), and what it cost when it could
 * not be used, or left uploads behind, said in a line each.
 */
const remoteEnd = (report: Engine.RunReport) =>
  Effect.gen(function*() {
    const found = yield* Effect.serviceOption(RemoteCache.RemoteCache)
    if (Option.isNone(found)) return undefined
    const remote = found.value
    const endpoint = remote.settings.endpoint.display
    yield* remote.flush(UPLOAD_WAIT_MS)
    const stats = yield* remote.stats
    // What it cost, when it cost anything (the warning at the start said why).
    if (stats.unusable !== undefined && report.ran > 0) {
      process.stderr.write(
        `kiln: remote cache ${endpoint} ${stats.unusable}: ${Noop.countOf(report.ran)} ran locally, ` +
          `${stats.uploadedActions} uploaded\n`
      )
    }
    for (const [cls, b] of Object.entries(stats.breakers ?? {})) {
      process.stderr.write(
        `kiln: remote cache ${endpoint}: ${b.why}; its ${cls} breaker opened ${b.opened}× and turned ${b.refused} ` +
          `${cls === "lookup" ? "lookups" : "calls"} away; ${Noop.countOf(report.ran)} ran locally, ` +
          `${stats.uploadedActions} uploaded\n`
      )
    }
    if (stats.remoteFallbacks > 0) {
      process.stderr.write(
        `kiln: ${Noop.countOf(stats.remoteFallbacks)} the executor ${endpoint} could not take ran locally\n`
      )
    }
    if (stats.pendingUploads > 0) {
      // Why they are, when the server said: its refusals and outages by code, as `--summary` counts them.
      const errors = Object.entries(stats.remoteErrors).map(([code, n]) => `${code} ×${n}`).join(", ")
      process.stderr.write(
        `kiln: ${uploadsCount(stats.pendingUploads)} to ${endpoint} ${
          stats.pendingUploads === 1 ? "is" : "are"
        } pending${errors ? ` (${errors})` : ""}: the next run, or \`kiln remote flush\`, ` +
          `takes ${stats.pendingUploads === 1 ? "it" : "them"} up\n`
      )
    }
    return { stats, failure: Option.getOrUndefined(yield* remote.failure) }
  })
