/**
 * `kiln graph [SELECTION] [--format dot|mermaid|json]`: the selected processes (default: all; see `selection.ts`) and
 * their deps, as a graph (see `graphText.ts`). Reads kiln.json only: nothing is looked up or run.
 */
import * as Args from "@effect/cli/Args"
import * as Command from "@effect/cli/Command"
import * as Console from "effect/Console"
import * as Effect from "effect/Effect"
import { cliOptions } from "../../common/cliOptions.js"
import { GRAPH_OPTIONS } from "../commandTable.js"
import { COMMANDS } from "../help.js"
import { configFileOf } from "../run/runDirect.js"
import * as Selection from "../selection.js"
import { exitOnInvalidConfig } from "../stack.js"
import * as GraphText from "./graphText.js"
import { listed } from "./lsCommand.js"

export const graph = Command.make(
  "graph",
  {
    names: Args.text({ name: "name" }).pipe(Args.repeated),
    ...cliOptions(GRAPH_OPTIONS)
  },
  (o) =>
    Selection.exitOnAffectedUnavailable(exitOnInvalidConfig(Effect.gen(function*() {
      const file = yield* configFileOf(o.config)
      const expanded = yield* listed(file)
      const names = yield* Selection.select(file, expanded.config, o.names, o.affected)
      const nodes = names.map((name) => ({ name, deps: expanded.config.processes[name]!.deps ?? [] }))
      yield* Console.log(GraphText.render(o.format, nodes))
    })))
).pipe(Command.withDescription(COMMANDS.graph))
