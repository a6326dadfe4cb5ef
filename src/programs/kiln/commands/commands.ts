/**
 * The `kiln` command tree.
 */
import * as Command from "@effect/cli/Command"
import * as Effect from "effect/Effect"
import { sandboxer } from "../../sandboxer.js"
import { VERSION } from "../version.js"
import { clean } from "./cleanCommand.js"
import { exec } from "./execCommand.js"
import { graph } from "./graphCommand.js"
import { ls } from "./lsCommand.js"
import { remote } from "./remoteCommands.js"
import { explain, logs, run as runCommand, schema } from "./runCommand.js"
import { store } from "./storeCommands.js"
import { verify } from "./verifyCommand.js"

const kiln = Command.make("kiln").pipe(
  Command.withDescription("a hermetic process-execution engine for build tools"),
  Command.withSubcommands([runCommand, ls, graph, explain, logs, verify, exec, store, remote, schema, clean, sandboxer])
)

/**
 * `kiln`, with `whenParsed` run before any command's handler starts: what @effect/cli prints before it is about the
 * command line (`main.ts` says that in kiln's words).
 */
export const runWith = (whenParsed: Effect.Effect<void>) =>
  Command.run(Command.transformHandler(kiln, (handler) => Effect.zipRight(whenParsed, handler)), {
    name: "kiln",
    version: VERSION
  })
