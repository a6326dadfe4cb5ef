/**
 * `kiln run [NAME…]` and `kiln schema`.
 * Exit codes: 0 every process succeeded; 1 a process failed; 2 a usage or config error; 130 interrupted.
 */
import * as Args from "@effect/cli/Args"
import * as Command from "@effect/cli/Command"
import * as Options from "@effect/cli/Options"
import * as Console from "effect/Console"
import * as Effect from "effect/Effect"
import * as JSONSchema from "effect/JSONSchema"
import * as Option from "effect/Option"
import * as path from "node:path"
import { Config, InvalidConfig } from "../domain/Config.js"
import * as Engine from "../engine/Engine.js"
import { cliOptions, storeOptions } from "./globalOptions.js"
import { COMMANDS } from "./help.js"
import { RUN_OPTIONS } from "./optionTable.js"
import { loadConfig, runParsed } from "./runDirect.js"
import { engineStack, exitOnInvalidConfig } from "./stack.js"
import { toStoreOptions } from "./storeSettings.js"

export const runConfig = {
  names: Args.text({ name: "name" }).pipe(Args.repeated),
  ...cliOptions(RUN_OPTIONS)
}
export { directRunArgs, type RunArgs } from "./runDirect.js"

export const run = Command.make("run", runConfig, runParsed).pipe(
  Command.withDescription(COMMANDS.run)
)

export const explain = Command.make(
  "explain",
  {
    name: Args.text({ name: "name" }),
    config: Options.file("config").pipe(Options.withDefault("kiln.json")),
    ...storeOptions
  },
  (o) =>
    Effect.gen(function*() {
      const configFile = path.resolve(o.config)
      const { config } = yield* loadConfig(configFile)
      if (!(o.name in config.processes)) {
        return yield* new InvalidConfig({
          file: path.basename(configFile),
          path: "",
          detail: `unknown process "${o.name}"`
        })
      }
      const engine = yield* Engine.Engine
      const lines = yield* engine.explain({
        workspace: path.dirname(configFile),
        config,
        name: o.name,
        configName: path.basename(configFile)
      }).pipe(
        // An input glob that matches nothing is the workspace's state, not an invalid config: exit 1, as `run` does.
        Effect.catchTag("InvalidConfig", (e) => Effect.fail(new Error(e.message)))
      )
      yield* Console.log(lines.join("\n"))
    }).pipe(
      exitOnInvalidConfig,
      Effect.provide(engineStack({
        store: toStoreOptions(o),
        sandboxRoot: Option.none(),
        namedCachesDir: Option.none(),
        sweepOnStart: false
      }))
    )
).pipe(Command.withDescription(COMMANDS.explain))

export const schema = Command.make("schema", {}, () => Console.log(JSON.stringify(JSONSchema.make(Config), null, 2)))
  .pipe(
    Command.withDescription(COMMANDS.schema)
  )
