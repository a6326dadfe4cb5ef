/**
 * `kiln exec`: runs one process through the whole stack (cache, sandboxer, sandbox, process group), as Pants's
 * `process_executor` does, and exits with its exit code.
 */
import * as Args from "@effect/cli/Args"
import * as Command from "@effect/cli/Command"
import * as HelpDoc from "@effect/cli/HelpDoc"
import * as Options from "@effect/cli/Options"
import * as ValidationError from "@effect/cli/ValidationError"
import * as Console from "effect/Console"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Option from "effect/Option"
import * as Digest from "../../../domain/Digest.js"
import { Process } from "../../../domain/Process.js"
import * as RemoteCache from "../../../layers/remote/RemoteCache.js"
import * as ProcessRunner from "../../../layers/runner/ProcessRunner.js"
import * as Store from "../../../layers/store/Store.js"
import { cliOptions, storeOptions } from "../../common/cliOptions.js"
import { toStoreOptions } from "../../common/storeSettings.js"
import * as AutoGc from "../autoGc.js"
import { EXEC_OPTIONS } from "../commandTable.js"
import { sandboxOptions } from "../globalOptions.js"
import { COMMANDS } from "../help.js"
import { REMOTE_OPTIONS, SANDBOX_MODE_OPTION } from "../optionTable.js"
import { UPLOAD_WAIT_MS, uploadsCount } from "../run/runDirect.js"
import * as SandboxNotice from "../run/sandboxNotice.js"
import { exitOnInvalidRemote, remoteSettings } from "../settings.js"
import { runnerStack } from "../stack.js"

const invalid = (message: string) => ValidationError.invalidValue(HelpDoc.p(message))

const writeOut = (bytes: Uint8Array, stream: NodeJS.WriteStream) =>
  Effect.async<void>((resume) => {
    stream.write(bytes, () => resume(Effect.void))
  })

const own = cliOptions(EXEC_OPTIONS)

export const exec = Command.make(
  "exec",
  {
    ...own,
    // Parsed further than the table says: a digest, a directory that exists, NAME=VALUE pairs.
    input: own.input.pipe(
      Options.mapEffect(Option.match({
        onNone: () => Either.right(Option.none()),
        onSome: (s) =>
          Either.mapBoth(Digest.parse(s), { onLeft: (e) => invalid(`--input: ${e.message}`), onRight: Option.some })
      }))
    ),
    inputDir: Options.directory(EXEC_OPTIONS.inputDir.flag, { exists: "yes" }).pipe(
      Options.withDescription(EXEC_OPTIONS.inputDir.description),
      Options.optional
    ),
    env: Options.keyValueMap(EXEC_OPTIONS.env.flag).pipe(
      Options.withDescription(EXEC_OPTIONS.env.description),
      Options.optional
    ),
    ...sandboxOptions,
    ...cliOptions(SANDBOX_MODE_OPTION),
    argv: Args.text({ name: "argv" }).pipe(Args.atLeast(1)),
    ...cliOptions(REMOTE_OPTIONS),
    ...storeOptions
  },
  (o) =>
    // Said (or refused) before the stack is built: a refused run opens nothing.
    Effect.suspend(() =>
      SandboxNotice.say(
          SandboxNotice.noticeOf(
            Option.getOrElse(o.sandbox, () => "auto" as const),
            SandboxNotice.fromOf(Option.getOrUndefined(o.sandbox)),
            SandboxNotice.strictProbe()
          )
        ) ?
        Effect.flatMap(remoteSettings(o), (remote) =>
          Effect.gen(function*() {
            if (Option.isSome(o.input) && Option.isSome(o.inputDir)) {
              return yield* Effect.fail(invalid("--input and --input-dir are exclusive"))
            }
            const store = yield* Store.Store
            const inputDigest = Option.isSome(o.input)
              ? o.input.value
              : Option.isSome(o.inputDir)
              ? yield* store.snapshot(o.inputDir.value)
              : Digest.empty
            const pinnedAt = ProcessRunner.execRoot()
            const process_ = new Process({
              argv: o.argv as [string, ...Array<string>],
              env: Option.match(o.env, { onNone: () => ({}), onSome: (m) => Object.fromEntries(m) }),
              inputDigest,
              workingDirectory: o.workingDirectory,
              outputFiles: o.output.filter((p) => !p.endsWith("/")),
              outputDirectories: o.output.filter((p) => p.endsWith("/")).map((p) => p.replace(/\/+$/, "")),
              ...(Option.isSome(o.timeout) ? { timeoutMs: Duration.toMillis(o.timeout.value) } : {}),
              description: o.argv.join(" "),
              cache: o.cache,
              ...(Option.isSome(o.cacheNamespace) ? { cacheNamespace: o.cacheNamespace.value } : {}),
              ...(pinnedAt !== undefined ? { execRoot: pinnedAt } : {})
            })
            const result = yield* Effect.flatMap(ProcessRunner.ProcessRunner, (r) => r.run(process_))
            if (o.json) {
              yield* Console.log(JSON.stringify({
                exitCode: result.exitCode,
                signal: result.signal,
                timedOut: result.timedOut,
                source: result.source,
                outputDigest: Digest.format(result.outputDigest),
                stdoutDigest: Digest.format(result.stdoutDigest),
                stderrDigest: Digest.format(result.stderrDigest),
                actionDigest: Digest.format(result.actionDigest),
                durationMs: result.durationMs
              }))
            } else {
              yield* writeOut(yield* store.getFile(result.stdoutDigest), process.stdout)
              yield* writeOut(yield* store.getFile(result.stderrDigest), process.stderr)
              const how = result.timedOut
                ? "timed out"
                : result.exitCode === null
                ? `killed by ${result.signal}`
                : `exit ${result.exitCode}`
              yield* Effect.sync(() =>
                process.stderr.write(
                  `kiln: ${how} (${result.source}, ${result.durationMs} ms); outputs ${
                    Digest.format(result.outputDigest)
                  }\n`
                )
              )
            }
            process.exitCode = result.timedOut ? 124 : result.exitCode ?? 128
            const cache = yield* Effect.serviceOption(RemoteCache.RemoteCache)
            if (Option.isSome(cache)) {
              const left = yield* cache.value.flush(UPLOAD_WAIT_MS)
              if (left > 0) {
                process.stderr.write(
                  `kiln: ${uploadsCount(left)} ${left === 1 ? "is" : "are"} pending: \`kiln remote flush\` takes ${
                    left === 1 ? "it" : "them"
                  } up\n`
                )
              }
            }
          }).pipe(
            Effect.provide(runnerStack({
              store: toStoreOptions(o),
              sandboxRoot: o.sandboxRoot,
              namedCachesDir: o.namedCachesDir,
              keepSandboxes: o.keepSandboxes,
              // A remote hit's bytes come with it: exec prints the process's stdout and stderr from the store.
              runner: { cacheContent: "fetch" },
              ...(Option.isSome(o.sandbox) ? { sandbox: o.sandbox.value } : {}),
              ...(remote !== undefined ? { remote } : {})
            }))
          ).pipe(Effect.zipRight(AutoGc.startIfDue(o)))).pipe(exitOnInvalidRemote) :
        Effect.void
    )
).pipe(Command.withDescription(COMMANDS.exec))
