/**
 * `kiln remote status` (what the endpoint supports, probed) and `kiln remote flush` (uploads earlier runs left in
 * the journal). Both read the remote settings as `kiln run` does: the command line, `KILN_REMOTE_CACHE`, then the
 * workspace's kiln.json.
 */
import * as Command from "@effect/cli/Command"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Option from "effect/Option"
import * as path from "node:path"
import { type Config, parse as parseConfig } from "../../../domain/config/Config.js"
import * as RemoteCache from "../../../layers/remote/RemoteCache.js"
import { InvalidRemoteSettings } from "../../../layers/remote/RemoteErrors.js"
import * as Store from "../../../layers/store/Store.js"
import { cliOptions, storeOptions } from "../../common/cliOptions.js"
import { toStoreOptions } from "../../common/storeSettings.js"
import { REMOTE_COMMAND_OPTIONS } from "../commandTable.js"
import * as ConfigFile from "../configFile.js"
import { COMMANDS, REMOTE_COMMANDS } from "../help.js"
import { uploadsCount } from "../run/runDirect.js"
import { exitOnInvalidRemote, type RemoteArgs, remoteSettings } from "../settings.js"
import { remoteLayer } from "../stack.js"

/** How long `kiln remote flush` gives the journal: it is what the command is for, so longer than a run's wait. */
const FLUSH_WAIT_MS = 10 * 60_000

const options = { ...cliOptions(REMOTE_COMMAND_OPTIONS), ...storeOptions }

/** kiln.json's remote settings, when the workspace has one (a remote command works without it). */
const configOf = (file: string): Config | undefined => {
  const read = ConfigFile.readText(file)
  if ("problem" in read) return undefined
  const text = read.text
  return Either.getOrUndefined(parseConfig(path.basename(file), text))
}

const withRemote = <A, E>(
  o: RemoteArgs & { readonly config: Option.Option<string> },
  use: (remote: RemoteCache.Service) => Effect.Effect<A, E, RemoteCache.RemoteCache>,
  store: Parameters<typeof toStoreOptions>[0],
  drain: boolean
) =>
  Effect.gen(function*() {
    // No kiln.json is no remote of its own: the flags and KILN_REMOTE_CACHE may still give one.
    const file = ConfigFile.find(Option.getOrUndefined(o.config)) ?? path.resolve(ConfigFile.CONFIG_NAME)
    const settings = yield* remoteSettings(o, configOf(file), path.dirname(file))
    if (settings === undefined) {
      return yield* new InvalidRemoteSettings({
        source: "--remote-cache",
        detail:
          "no remote cache: pass --remote-cache URL, set KILN_REMOTE_CACHE, or name one in kiln.json's remote.cache"
      })
    }
    return yield* Effect.flatMap(RemoteCache.RemoteCache, use).pipe(
      Effect.provide(remoteLayer(settings, { drain })),
      Effect.provide(Store.layer(toStoreOptions(store)))
    )
  }).pipe(exitOnInvalidRemote)

export const status = Command.make("status", options, (o) =>
  withRemote(
    o,
    (remote) =>
      Effect.gen(function*() {
        const started = Date.now()
        const caps = yield* Effect.either(remote.capabilities)
        const endpoint = remote.settings.endpoint.display
        if (Either.isLeft(caps)) {
          process.stderr.write(
            `kiln: remote cache ${endpoint} ${RemoteCache.probeFailure(caps.left)}\n`
          )
          process.exitCode = 1
          return
        }
        const stats = yield* remote.stats
        const lines = [
          `${endpoint}${remote.settings.instanceName !== "" ? ` (instance ${remote.settings.instanceName})` : ""}: ` +
          `reachable in ${Date.now() - started} ms`,
          ...caps.right.lines.map((l) => `  ${l}`),
          `  pending uploads in this store: ${stats.pendingUploads}`
        ]
        process.stdout.write(`${lines.join("\n")}\n`)
      }),
    o,
    false
  )).pipe(Command.withDescription(REMOTE_COMMANDS.status))

export const flush = Command.make("flush", options, (o) =>
  withRemote(
    o,
    (remote) =>
      Effect.gen(function*() {
        const left = yield* remote.flush(FLUSH_WAIT_MS)
        const stats = yield* remote.stats
        const endpoint = remote.settings.endpoint.display
        if (left === 0) {
          process.stderr.write(`kiln: ${stats.uploadedActions} results uploaded to ${endpoint}; nothing is pending\n`)
          return
        }
        const why = stats.unusable !== undefined
          ? `the remote ${stats.unusable}`
          : Object.entries(stats.remoteErrors).map(([c, n]) => `${c} ×${n}`).join(", ")
        process.stderr.write(
          `kiln: ${uploadsCount(left)} to ${endpoint} ${left === 1 ? "is" : "are"} still pending${
            why ? ` (${why})` : ""
          }\n`
        )
        process.exitCode = 1
      }),
    o,
    true
  )).pipe(Command.withDescription(REMOTE_COMMANDS.flush))

export const remote = Command.make("remote").pipe(
  Command.withDescription(COMMANDS.remote),
  Command.withSubcommands([status, flush])
)
