/**
 * `kiln run [NAME…]`, `kiln explain NAME…` and `kiln schema`.
 * Exit codes: 0 every process succeeded; 1 a process failed; 2 a usage or config error; 130 interrupted.
 */
import * as Args from "@effect/cli/Args"
import * as Command from "@effect/cli/Command"
import * as Console from "effect/Console"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as JSONSchema from "effect/JSONSchema"
import * as Option from "effect/Option"
import * as path from "node:path"
import { ConfigFile } from "../../../domain/config/Config.js"
import * as ProcessName from "../../../domain/config/ProcessName.js"
import * as Digest from "../../../domain/Digest.js"
import * as Engine from "../../../layers/engine/Engine.js"
import { cliOptions, storeOptions } from "../../common/cliOptions.js"
import { toStoreOptions } from "../../common/storeSettings.js"
import { EXPLAIN_OPTIONS, LOGS_OPTIONS } from "../commandTable.js"
import { COMMANDS } from "../help.js"
import { REMOTE_OPTIONS, RUN_OPTIONS } from "../optionTable.js"
import { configFileOf, loadConfig, runParsed } from "../run/runDirect.js"
import * as Selection from "../selection.js"
import { exitOnInvalidRemote, remoteSettings } from "../settings.js"
import { engineStack, exitOnInvalidConfig } from "../stack.js"

export const runConfig = {
  names: Args.text({ name: "name" }).pipe(Args.repeated),
  ...cliOptions(RUN_OPTIONS)
}
export { directRunArgs, type RunArgs } from "../run/runDirect.js"

export const run = Command.make("run", runConfig, runParsed).pipe(
  Command.withDescription(COMMANDS.run)
)

/**
 * `kiln explain NAME…`, given its engine: each process the names select (globs too: see `selection.ts`), in
 * kiln.json's order; with `json`, as a JSON array of `{ name, status, reason, actionDigest, lastActionDigest,
 * changes, notes, remote }`. A config that cannot be read, or names no process NAME, is a usage error (exit 2). An
 * input glob that matches nothing is the workspace's state, not a bad config: it fails, exit 1 as `run` does, with the
 * typed error that names the process and the glob.
 */
export const explainProcess = (
  o: { readonly names: ReadonlyArray<string>; readonly config: string; readonly json?: boolean }
) =>
  Effect.gen(function*() {
    const configFile = path.resolve(o.config)
    const loaded = yield* exitOnInvalidConfig(Effect.gen(function*() {
      const { config } = yield* loadConfig(configFile)
      return { config, names: yield* Selection.select(configFile, config, o.names, Option.none()) }
    }))
    if (loaded === undefined) return
    const engine = yield* Engine.Engine
    const explained = yield* engine.explainAll({
      workspace: path.dirname(configFile),
      config: loaded.config,
      names: loaded.names,
      configName: path.basename(configFile)
    })
    yield* Console.log(
      o.json === true
        ? ProcessName.printableJson(explained, 2)
        // Paths and values from the workspace (a file named with an escape sequence) are escaped, as `ls` escapes.
        : explained.flatMap((e) => Engine.explanationLines(e).map(ProcessName.printable)).join("\n")
    )
  })

export const explain = Command.make(
  "explain",
  {
    names: Args.text({ name: "name" }).pipe(Args.atLeast(1)),
    ...cliOptions({ ...EXPLAIN_OPTIONS, ...REMOTE_OPTIONS }),
    ...storeOptions
  },
  (o) =>
    Effect.gen(function*() {
      const file = yield* exitOnInvalidConfig(configFileOf(o.config))
      if (file === undefined) return
      // kiln.json's remote settings count here too; a config that cannot be read is explainProcess's to report.
      const config = Either.getOrUndefined(yield* Effect.either(loadConfig(file)))?.config
      const remote = yield* remoteSettings(o, config, path.dirname(file))
      yield* explainProcess({ names: o.names, config: file, json: o.json }).pipe(
        Effect.provide(engineStack({
          store: toStoreOptions(o),
          sandboxRoot: Option.none(),
          namedCachesDir: Option.none(),
          sweepOnStart: false,
          // As explain has always looked a process up remotely: a hit's bytes downloaded before it counts as one.
          runner: { cacheContent: "fetch" },
          // The mode a plain run of this kiln.json has: its run memo is the one kept under it.
          ...(config?.sandbox !== undefined ? { sandbox: config.sandbox } : {}),
          ...(remote !== undefined ? { remote } : {})
        }))
      )
    }).pipe(exitOnInvalidRemote)
).pipe(Command.withDescription(COMMANDS.explain))

const writeOut = (bytes: Uint8Array, stream: NodeJS.WriteStream) =>
  Effect.async<void>((resume) => {
    stream.write(bytes, () => resume(Effect.void))
  })

/**
 * `kiln logs NAME`, given its engine: the last run's stdout on stdout and stderr on stderr, as the process wrote them,
 * then one line on stderr saying which run that was. No recorded run, or logs gone from the store: one line, exit 1.
 */
export const printLogs = (o: { readonly name: string; readonly config: Option.Option<string> }) =>
  Effect.gen(function*() {
    const configFile = yield* exitOnInvalidConfig(configFileOf(o.config))
    if (configFile === undefined) return
    const engine = yield* Engine.Engine
    const found = yield* Effect.either(engine.logs({ workspace: path.dirname(configFile), name: o.name }))
    if (Either.isLeft(found) || found.right === "unrecorded") {
      const why = Either.isRight(found)
        ? `${o.name} has no run recorded in ${path.dirname(configFile)} on this store: \`kiln run ${o.name}\` runs it`
        : found.left._tag === "MissingDigest"
        ? `the logs of ${o.name}'s last run are gone from the store (${found.left.message}): run it again`
        : `cannot read the logs of ${o.name}: ${found.left.message}`
      process.stderr.write(`kiln: ${why}\n`)
      process.exitCode = 1
      return
    }
    const logs = found.right
    yield* writeOut(logs.stdout, process.stdout)
    yield* writeOut(logs.stderr, process.stderr)
    process.stderr.write(
      `kiln: ${o.name}'s last run${
        logs.failed !== undefined ? ` (${logs.failed})` : ""
      }, action ${logs.actionDigest}: ` +
        `stdout ${Digest.format(logs.stdoutDigest)}, stderr ${Digest.format(logs.stderrDigest)}\n`
    )
  })

export const logs = Command.make(
  "logs",
  {
    name: Args.text({ name: "name" }),
    ...cliOptions(LOGS_OPTIONS),
    ...storeOptions
  },
  (o) =>
    printLogs(o).pipe(
      Effect.provide(engineStack({
        store: toStoreOptions(o),
        sandboxRoot: Option.none(),
        namedCachesDir: Option.none(),
        sweepOnStart: false,
        runner: {}
      }))
    )
).pipe(Command.withDescription(COMMANDS.logs))

export const schema = Command.make(
  "schema",
  {},
  () => Console.log(JSON.stringify(JSONSchema.make(ConfigFile), null, 2))
)
  .pipe(
    Command.withDescription(COMMANDS.schema)
  )
