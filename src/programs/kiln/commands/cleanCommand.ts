/**
 * `kiln clean`: removes sandboxes left behind by engines that died (and, with `--kept`, kept ones), the same sweep
 * every engine runs when it starts.
 */
import * as Command from "@effect/cli/Command"
import * as Console from "effect/Console"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Sandboxes from "../../../layers/sandbox/Sandboxes.js"
import { cliOptions } from "../../common/cliOptions.js"
import { CLEAN_OPTIONS } from "../commandTable.js"
import { COMMANDS } from "../help.js"

export const clean = Command.make(
  "clean",
  cliOptions(CLEAN_OPTIONS),
  ({ kept, sandboxRoot }) =>
    Effect.gen(function*() {
      const sandboxes = yield* Sandboxes.make({
        ...Option.match(sandboxRoot, { onNone: () => ({}), onSome: (root) => ({ root }) }),
        sweepOnStart: false
      })
      const report = yield* sandboxes.sweep({ kept })
      for (const p of report.removed) yield* Console.log(`removed ${p}`)
      for (const f of report.failed) yield* Console.error(`could not remove ${f.path}: ${f.detail}`)
      yield* Console.log(
        `removed ${report.removed.length} sandbox(es) under ${sandboxes.root}` +
          (report.kept > 0 ? `; ${report.kept} kept (remove them with --kept)` : "")
      )
      if (report.failed.length > 0) process.exitCode = 1
    }).pipe(Effect.scoped)
).pipe(Command.withDescription(COMMANDS.clean))
