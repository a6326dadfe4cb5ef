/**
 * `kiln ls [SELECTION] [--json]`: the processes of kiln.json a selection names (default: all; see `selection.ts`),
 * those its tasks give included (see `layers/tasks/Tasks.ts`), each with its deps, where it comes from, and the dry
 * run's verdict: whether a run would take it from the cache or run it, and why (turbo's `--dry`). `--json` prints
 * `plan` (per process: `name`, `deps`, `status` "hit" or "run", `reason`, `actionDigest`), `processes`, as kiln.json
 * would hold them written out, and `origins`: for each process a task gave, its task's key, the task, the package and
 * its directory.
 */
import * as Args from "@effect/cli/Args"
import * as Command from "@effect/cli/Command"
import * as Console from "effect/Console"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Option from "effect/Option"
import * as path from "node:path"
import { decode, InvalidConfig } from "../../../domain/config/Config.js"
import * as ProcessName from "../../../domain/config/ProcessName.js"
import * as Engine from "../../../layers/engine/Engine.js"
import * as TaskExpansion from "../../../layers/tasks/TaskExpansion.js"
import type * as Tasks from "../../../layers/tasks/Tasks.js"
import { cliOptions, storeOptions } from "../../common/cliOptions.js"
import { toStoreOptions } from "../../common/storeSettings.js"
import { LS_OPTIONS } from "../commandTable.js"
import * as ConfigFile from "../configFile.js"
import { COMMANDS } from "../help.js"
import { configFileOf } from "../run/runDirect.js"
import * as Selection from "../selection.js"
import { engineStack, exitOnInvalidConfig } from "../stack.js"

/** kiln.json's processes, its tasks expanded. */
export const listed = (file: string) =>
  Effect.gen(function*() {
    const name = path.basename(file)
    const read = ConfigFile.readText(file)
    if ("problem" in read) return yield* new InvalidConfig({ file, path: "", detail: read.problem })
    const text = read.text
    const config = yield* Either.match(decode(name, text), { onLeft: Effect.fail, onRight: Effect.succeed })
    return yield* TaskExpansion.expand(path.dirname(file), name, config, process.env, text)
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
    return ProcessName.printable(`${name.padEnd(width)}  ${what}${deps}`)
  })
}

/** A dry run's verdict on one process, as `kiln ls` prints it after the process's line. */
const verdict = (p: Engine.Planned): string => p.status === "hit" ? "[hit]" : `[run: ${p.reason}]`

/**
 * The selected processes, and the dry run of each (see `Engine.plan`), the store opened as `kiln explain` opens it:
 * locally only.
 */
const listSelected = (o: {
  readonly config: Option.Option<string>
  readonly names: ReadonlyArray<string>
  readonly affected: Option.Option<string>
  readonly json: boolean
}) =>
  Effect.gen(function*() {
    const file = yield* configFileOf(o.config)
    const expanded = yield* listed(file)
    const names = yield* Selection.select(file, expanded.config, o.names, o.affected)
    const engine = yield* Engine.Engine
    const planned = yield* engine.plan({
      workspace: path.dirname(file),
      config: expanded.config,
      names,
      configName: path.basename(file)
    })
    const pick = <A>(record: Readonly<Record<string, A>>) =>
      Object.fromEntries(names.flatMap((n) => Object.hasOwn(record, n) ? [[n, record[n]!]] : []))
    if (o.json) {
      const plan = planned.map((p) => ({
        name: p.name,
        deps: p.deps,
        status: p.status,
        reason: p.reason,
        actionDigest: p.actionDigest
      }))
      yield* Console.log(ProcessName.printableJson(
        { plan, processes: pick(expanded.config.processes), origins: pick(expanded.origins) },
        2
      ))
    } else if (names.length > 0) {
      const text = lines({
        config: { ...expanded.config, processes: pick(expanded.config.processes) },
        origins: expanded.origins
      })
      yield* Console.log(text.map((line, i) => `${line}  ${verdict(planned[i]!)}`).join("\n"))
    }
  })

export const ls = Command.make(
  "ls",
  {
    names: Args.text({ name: "name" }).pipe(Args.repeated),
    ...cliOptions(LS_OPTIONS),
    ...storeOptions
  },
  (o) =>
    Selection.exitOnAffectedUnavailable(exitOnInvalidConfig(
      listSelected(o).pipe(
        Effect.provide(engineStack({
          store: toStoreOptions(o),
          sandboxRoot: Option.none(),
          namedCachesDir: Option.none(),
          sweepOnStart: false
        }))
      )
    ))
).pipe(Command.withDescription(COMMANDS.ls))
