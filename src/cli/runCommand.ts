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
import * as os from "node:os"
import * as path from "node:path"
import { Config, InvalidConfig } from "../domain/Config.js"
import * as Engine from "../engine/Engine.js"
import { sandboxRootOption } from "./cleanCommand.js"
import { keepSandboxesOption, namedCachesDirOption } from "./execCommand.js"
import { storeOptions } from "./globalOptions.js"
import { loadConfig, runParsed } from "./runDirect.js"
import { engineStack, exitOnInvalidConfig } from "./stack.js"
import { toStoreOptions } from "./storeSettings.js"

export const runConfig = {
  names: Args.text({ name: "name" }).pipe(Args.repeated),
  config: Options.file("config").pipe(
    Options.withDescription("the workspace's kiln.json (default: ./kiln.json); the workspace is its directory"),
    Options.withDefault("kiln.json")
  ),
  concurrency: Options.integer("concurrency").pipe(
    Options.withDescription("processes at once (default: the CPU count)"),
    Options.withDefault(os.availableParallelism())
  ),
  cache: Options.choice("cache", ["read-write", "read", "write", "off"] as const).pipe(
    Options.withDefault("read-write" as const)
  ),
  cacheContent: Options.choice("cache-content", ["fetch", "validate", "defer"] as const).pipe(
    Options.withDescription("how a cache hit's bytes are checked (defer leaves missing bytes to backtracking)"),
    Options.withDefault("validate" as const)
  ),
  keepGoing: Options.boolean("keep-going").pipe(
    Options.withDescription("after a failure, go on with everything that does not depend on it")
  ),
  maxBacktracks: Options.integer("max-backtracks").pipe(Options.withDefault(3)),
  trace: Options.file("trace").pipe(Options.withDescription("write a Chrome trace-event JSON"), Options.optional),
  summary: Options.file("summary").pipe(Options.withDescription("write a JSON summary of the run"), Options.optional),
  progress: Options.choice("progress", ["auto", "tty", "plain", "none"] as const).pipe(
    Options.withDefault("auto" as const)
  ),
  keepSandboxes: keepSandboxesOption,
  reuseSandboxes: Options.choice("reuse-sandboxes", ["on", "off"] as const).pipe(
    Options.withDescription(
      "on: a finished sandbox is refilled for the next process, made to hold exactly its inputs; off: every " +
        "process gets an empty one"
    ),
    Options.withDefault("on" as const)
  ),
  sandboxRoot: sandboxRootOption,
  namedCachesDir: namedCachesDirOption,
  ...storeOptions
}
export { directRunArgs, type RunArgs } from "./runDirect.js"

export const run = Command.make("run", runConfig, runParsed).pipe(
  Command.withDescription("run processes of kiln.json (default: all) and their deps")
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
).pipe(Command.withDescription("say why a process would run or hit the cache, and what changed since its last run"))

export const schema = Command.make("schema", {}, () => Console.log(JSON.stringify(JSONSchema.make(Config), null, 2)))
  .pipe(
    Command.withDescription("print the JSON Schema of kiln.json (reference it with \"$schema\" for editor completion)")
  )
