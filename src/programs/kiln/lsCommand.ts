/**
 * `kiln ls [--json]`: the processes of kiln.json, those its tasks give included (see `layers/tasks/Tasks.ts`), each
 * with its deps and where it comes from. `--json` prints `processes`, as kiln.json would hold them written out, and
 * `origins`: for each process a task gave, its task's key, the task, the package and its directory.
 */
import * as Command from "@effect/cli/Command"
import * as Options from "@effect/cli/Options"
import * as Console from "effect/Console"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as fs from "node:fs"
import * as path from "node:path"
import { decode, InvalidConfig } from "../../domain/Config.js"
import * as TaskExpansion from "../../layers/tasks/TaskExpansion.js"
import type * as Tasks from "../../layers/tasks/Tasks.js"
import { cliOptions } from "../common/cliOptions.js"
import { COMMANDS } from "./help.js"
import { RUN_OPTIONS } from "./optionTable.js"
import { configFileOf } from "./runDirect.js"
import { exitOnInvalidConfig } from "./stack.js"

/** kiln.json's processes, its tasks expanded. */
export const listed = (file: string) =>
  Effect.gen(function*() {
    const name = path.basename(file)
    const text = yield* Effect.try({
      try: () => fs.readFileSync(file, "utf8"),
      catch: (e) =>
        new InvalidConfig({ file, path: "", detail: `cannot read: ${(e as NodeJS.ErrnoException).code ?? String(e)}` })
    })
    const config = yield* Either.match(decode(name, text), { onLeft: Effect.fail, onRight: Effect.succeed })
    return yield* TaskExpansion.expand(path.dirname(file), name, config)
  })

/** One line a process: its name, where it comes from, what it runs, and its deps. */
export const lines = (expanded: Tasks.Expanded): Array<string> => {
  const names = Object.keys(expanded.config.processes)
  const width = Math.min(40, Math.max(...names.map((n) => n.length)))
  return names.map((name) => {
    const pc = expanded.config.processes[name]!
    const origin = expanded.origins[name]
    const what = origin !== undefined
      ? `${origin.directory === "" ? "." : origin.directory}: ${pc.argv.at(-1)!.replace(/\s*\n\s*/g, " ")}`
      : pc.argv.join(" ")
    const deps = (pc.deps ?? []).length > 0 ? `  <- ${pc.deps!.join(", ")}` : ""
    return `${name.padEnd(width)}  ${what}${deps}`
  })
}

export const ls = Command.make(
  "ls",
  {
    ...cliOptions({ config: RUN_OPTIONS.config }),
    json: Options.boolean("json").pipe(
      Options.withDescription("print the processes as kiln.json would hold them written out, with their origins")
    )
  },
  (o) =>
    exitOnInvalidConfig(Effect.gen(function*() {
      const expanded = yield* listed(yield* configFileOf(o.config))
      if (o.json) {
        yield* Console.log(
          JSON.stringify({ processes: expanded.config.processes, origins: expanded.origins }, null, 2)
        )
      } else if (Object.keys(expanded.config.processes).length > 0) {
        yield* Console.log(lines(expanded).join("\n"))
      }
    }))
).pipe(Command.withDescription(COMMANDS.ls))
