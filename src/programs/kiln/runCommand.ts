/**
 * `kiln run [NAME…]` and `kiln schema`.
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
import { ConfigFile, InvalidConfig } from "../../domain/Config.js"
import { didYouMean } from "../../domain/DidYouMean.js"
import * as Engine from "../../layers/engine/Engine.js"
import { cliOptions, storeOptions } from "../common/cliOptions.js"
import { toStoreOptions } from "../common/storeSettings.js"
import { COMMANDS } from "./help.js"
import { REMOTE_OPTIONS, RUN_OPTIONS } from "./optionTable.js"
import { configFileOf, loadConfig, runParsed } from "./runDirect.js"
import { exitOnInvalidRemote, remoteSettings } from "./settings.js"
import { engineStack, exitOnInvalidConfig } from "./stack.js"

export const runConfig = {
  names: Args.text({ name: "name" }).pipe(Args.repeated),
  ...cliOptions(RUN_OPTIONS)
}
export { directRunArgs, type RunArgs } from "./runDirect.js"

export const run = Command.make("run", runConfig, runParsed).pipe(
  Command.withDescription(COMMANDS.run)
)

/**
 * `kiln explain NAME`, given its engine. A config that cannot be read, or names no process NAME, is a usage error
 * (exit 2). An input glob that matches nothing is the workspace's state, not a bad config: it fails, exit 1 as
 * `run` does, with the typed error that names the process and the glob.
 */
export const explainProcess = (o: { readonly name: string; readonly config: string }) =>
  Effect.gen(function*() {
    const configFile = path.resolve(o.config)
    const loaded = yield* exitOnInvalidConfig(Effect.gen(function*() {
      const { config } = yield* loadConfig(configFile)
      if (!Object.hasOwn(config.processes, o.name)) {
        return yield* new InvalidConfig({
          file: path.basename(configFile),
          path: "",
          detail: `unknown process "${o.name}"${didYouMean(o.name, Object.keys(config.processes))}`
        })
      }
      return config
    }))
    if (loaded === undefined) return
    const engine = yield* Engine.Engine
    const lines = yield* engine.explain({
      workspace: path.dirname(configFile),
      config: loaded,
      name: o.name,
      configName: path.basename(configFile)
    })
    yield* Console.log(lines.join("\n"))
  })

export const explain = Command.make(
  "explain",
  {
    name: Args.text({ name: "name" }),
    ...cliOptions({ config: RUN_OPTIONS.config, ...REMOTE_OPTIONS }),
    ...storeOptions
  },
  (o) =>
    Effect.gen(function*() {
      const file = yield* exitOnInvalidConfig(configFileOf(o.config))
      if (file === undefined) return
      // kiln.json's remote settings count here too; a config that cannot be read is explainProcess's to report.
      const config = Either.getOrUndefined(yield* Effect.either(loadConfig(file)))?.config
      const remote = yield* remoteSettings(o, config, path.dirname(file))
      yield* explainProcess({ name: o.name, config: file }).pipe(
        Effect.provide(engineStack({
          store: toStoreOptions(o),
          sandboxRoot: Option.none(),
          namedCachesDir: Option.none(),
          sweepOnStart: false,
          // As explain has always looked a process up remotely: a hit's bytes downloaded before it counts as one.
          runner: { cacheContent: "fetch" },
          ...(remote !== undefined ? { remote } : {})
        }))
      )
    }).pipe(exitOnInvalidRemote)
).pipe(Command.withDescription(COMMANDS.explain))

export const schema = Command.make(
  "schema",
  {},
  () => Console.log(JSON.stringify(JSONSchema.make(ConfigFile), null, 2))
)
  .pipe(
    Command.withDescription(COMMANDS.schema)
  )
