/**
 * The `kiln` executable. Errors are printed as one line naming what failed; exit codes: 0 success, 1 failure,
 * 2 usage error, 130 interrupted.
 */
import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import * as Cause from "effect/Cause"
import * as Console from "effect/Console"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as Logger from "effect/Logger"
import * as LogLevel from "effect/LogLevel"
import * as ConfigText from "../../domain/config/ConfigText.js"
import * as OpenAhead from "../../layers/store/OpenAhead.js"
import * as RestoreWarmUp from "../../layers/workspace/RestoreWarmUp.js"
import { onInterrupt } from "../common/exitCode.js"
import { cliLogger } from "../common/logging.js"
import * as ConfigFile from "./configFile.js"
import { affectedArgs } from "./optionTable.js"
import { directRunArgs, runParsed } from "./run/runDirect.js"
import { DEFERRED_MAIN, type DeferredMain } from "./standby/protocol.js"
import { cliProblem, commandOf, readArgs } from "./usage.js"
import { VERSION } from "./version.js"

const describe = (error: unknown): string =>
  typeof error === "object" && error !== null && "message" in error && typeof error.message === "string"
    ? error.message
    : String(error)

const isUnsafeDirectory = (error: unknown): boolean =>
  typeof error === "object" && error !== null && "_tag" in error && error._tag === "UnsafeDirectory"

const loadCli = Effect.promise(() =>
  Promise.all([
    import("./commands/commands.js"),
    import("@effect/platform-node/NodeContext"),
    import("@effect/cli/ValidationError"),
    import("@effect/cli/HelpDoc")
  ])
)

// The code cache is written by a `kiln run` (scripts/bundle.mjs), which would leave the other commands' modules out
// of it: that run loads them too, so that `kiln sandboxer` and the rest start from compiled code as well.
const trainsCodeCache = (globalThis as Record<symbol, unknown>)[Symbol.for("kiln.writeCodeCache")] === true

const STYLES = new RegExp(`${String.fromCharCode(27)}\\[[0-9;]*m`, "g")

/**
 * @effect/cli renders what it prints with terminal styles wherever it goes: they stay only on a terminal, and not under
 * NO_COLOR (`kiln --completions bash > file` otherwise got escape codes). What it prints on stderr before a command's
 * handler starts is a usage error that `usage.ts` left to the parser (a path that must exist, a digest): said in one
 * line, as kiln's others are (`cliProblem`).
 */
const inKilnsWords = <A, E, R>(
  effect: Effect.Effect<A, E, R>,
  handlerStarted: () => boolean,
  words: string | undefined
) => {
  const plain = (stream: NodeJS.WriteStream) => !stream.isTTY || (process.env.NO_COLOR ?? "") !== ""
  const strip = (args: ReadonlyArray<unknown>) => args.map((a) => typeof a === "string" ? a.replace(STYLES, "") : a)
  const usage = (args: ReadonlyArray<unknown>) => [`kiln: ${cliProblem(strip(args).join(" "), words)}`]
  return Console.consoleWith((console) =>
    Console.withConsole(effect, {
      ...console,
      log: (...args) => console.log(...(plain(process.stdout) ? strip(args) : args)),
      error: (...args) =>
        console.error(...(!handlerStarted() ? usage(args) : plain(process.stderr) ? strip(args) : args))
    })
  )
}

const viaCli = (words: string | undefined) =>
  Effect.flatMap(
    loadCli,
    ([{ runWith }, NodeContext, ValidationError, HelpDoc]) => {
      let handlerStarted = false
      const run = runWith(Effect.sync(() => {
        handlerStarted = true
      }))
      return Effect.provide(
        inKilnsWords(run(affectedArgs(process.argv)), () => handlerStarted, words),
        NodeContext.layer
      )
        .pipe(
          Effect.catchIf(ValidationError.isValidationError, (error) =>
            Effect.sync(() => {
              // The parser's own were said as they were found; a handler's (`--input and --input-dir are exclusive`)
              // are said here.
              if (handlerStarted) {
                process.stderr.write(
                  `kiln: ${cliProblem(HelpDoc.toAnsiText(error.error).replace(STYLES, ""), words)}\n`
                )
              }
              process.exitCode = 2
            }))
        )
    }
  )

/** kiln.json's process names, when there is one to read here or above: what `kiln build` may have meant. */
const processNames = (): ReadonlyArray<string> => {
  try {
    const file = ConfigFile.find(undefined)
    const text = file === undefined ? undefined : ConfigFile.readText(file)
    const read = text === undefined || "problem" in text ? undefined : ConfigText.parse(text.text)
    const processes = read !== undefined && "json" in read
      ? (read.json as { processes?: unknown } | null)?.processes
      : undefined
    return typeof processes === "object" && processes !== null ? Object.keys(processes) : []
  } catch {
    return []
  }
}

/** What the arguments ask for, read when the run starts (a standby loads this module before it has them). */
const invocation = () => {
  const args = process.argv.slice(2)
  // A plain `kiln run` skips @effect/cli's parser (see directRunArgs) and the platform services only the parser uses;
  // anything else goes through both, loaded only then: evaluating their modules is a visible part of every run's
  // start.
  const direct = directRunArgs(args)
  // `kiln --version` needs no parser either (@effect/cli printed it as a paragraph, with a blank line after it).
  const versionOnly = process.argv.length === 3 && process.argv[2] === "--version"
  return {
    direct,
    versionOnly,
    /** The command the arguments name (`store gc`), for the usage errors only @effect/cli's parser finds. */
    words: commandOf(args)?.words,
    // Help, and usage errors, in kiln's words (`usage.ts`), before @effect/cli would say them in its own: its help
    // listed every option of every command.
    reading: direct !== undefined || versionOnly
      ? undefined
      : readArgs(
        affectedArgs(args),
        process.stdout.isTTY === true && (process.env.NO_COLOR ?? "") === "",
        processNames
      )
  }
}

const main = ({ direct, reading, versionOnly, words }: ReturnType<typeof invocation>) =>
  (direct !== undefined
    ? Effect.zipLeft(runParsed(direct), trainsCodeCache ? loadCli : Effect.void)
    : versionOnly
    ? Console.log(VERSION)
    : reading?._tag === "Help"
    ? Effect.sync(() => {
      process.stdout.write(reading.text)
      process.exitCode = reading.code
    })
    : reading?._tag === "Problem"
    ? Effect.sync(() => {
      process.stderr.write(`kiln: ${reading.message}\n`)
      process.exitCode = 2
    })
    : viaCli(words)).pipe(
      Effect.catchAllCause((cause) =>
        Cause.isInterruptedOnly(cause) ? Effect.failCause(cause) : Effect.sync(() => {
          const failure = Cause.failureOption(cause)
          const message = failure._tag === "Some" ? describe(failure.value) : Cause.pretty(cause)
          process.stderr.write(`kiln: ${message}\n`)
          // A root another user owns or can write is a setting to change, as a bad kiln.json is.
          process.exitCode = failure._tag === "Some" && isUnsafeDirectory(failure.value) ? 2 : 1
        })
      ),
      Effect.provide(Logger.replace(Logger.defaultLogger, cliLogger)),
      Logger.withMinimumLogLevel(LogLevel.Info)
    )

/**
 * Whether this process can end now without losing output: on Linux, writes to files, pipes and terminals are
 * synchronous, so these are empty unless stdout or stderr is something slower (a socket).
 */
const nothingQueued = () => process.stdout.writableLength === 0 && process.stderr.writableLength === 0

const runCli = () =>
  NodeRuntime.runMain(main(invocation()), {
    disableErrorReporting: true,
    disablePrettyLogger: true,
    teardown: (exit, onExit) => {
      const code = Exit.isInterrupted(exit)
        ? onInterrupt.code
        : Exit.isFailure(exit)
        ? 1
        : Number(process.exitCode ?? 0)
      // Everything kiln started has been ended and waited for by now (the store closed and flushed, the sandboxer
      // drained, the spawner disarmed). Leaving the event loop to drain would add Node's teardown of the whole heap,
      // page by page, which on a VM (every unmapping a TLB shootdown) is a large share of an edit run.
      if (code === 0 && nothingQueued()) process.exit(0)
      onExit(code)
    }
  })

/** A fiber that calls `then` after `ms`; the function returned interrupts it. */
const idleWait = (ms: number, then: () => void): () => void => {
  const fiber = Effect.runFork(Effect.andThen(Effect.sleep(Duration.millis(ms)), Effect.sync(then)))
  return () => Effect.runFork(Fiber.interrupt(fiber))
}

// A standby (`standby/serve.ts`) loads all this ahead of a run, and starts it once a run is handed over; until then it
// waits on the bundle's clock, the loader's code having none of its own.
const deferred = (globalThis as Record<symbol, DeferredMain | undefined>)[DEFERRED_MAIN]
if (deferred !== undefined) {
  deferred.start = runCli
  deferred.idle = idleWait
  deferred.openAhead = (envs) => {
    Effect.runFork(OpenAhead.open(envs))
  }
  deferred.closeAhead = OpenAhead.closeUntaken
  deferred.warmUp = (parent, then) => {
    const warming = Effect.runFork(
      RestoreWarmUp.run(parent).pipe(
        // Bounded: the standby holds its key's lock until it listens, and no other can start for the key meanwhile.
        Effect.timeout(Duration.seconds(5)),
        // It only saves the next run time: a run does all it would without it.
        Effect.catchAllCause(() => Effect.void)
      )
    )
    // Outside the fiber: a throw from `then` ends this process (its lock with it), as it did before there was one.
    warming.addObserver(then)
  }
} else runCli()
