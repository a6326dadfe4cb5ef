/**
 * Parsed flags turned into the remote cache's settings (the store's are `../common/storeSettings.ts`): flags,
 * `KILN_REMOTE_CACHE`/`KILN_REMOTE_EXECUTOR` and kiln.json's `"remote"` object, each winning over the one after it;
 * paths in kiln.json are relative to its workspace. Apart from the flags' own definitions (`../common/cliOptions.ts`),
 * so that a plain `kiln run`, which parses its arguments without @effect/cli, does not load @effect/cli at all.
 */
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Option from "effect/Option"
import * as path from "node:path"
import type { RemoteConfig } from "../../domain/config/Config.js"
import * as DurationText from "../../domain/DurationText.js"
import { InvalidRemoteSettings } from "../../layers/remote/RemoteErrors.js"
import * as RemoteSettings from "../../layers/remote/RemoteSettings.js"
import type { ValuesOf } from "../common/optionSpec.js"
import type { REMOTE_OPTIONS } from "./optionTable.js"

export type RemoteArgs = ValuesOf<typeof REMOTE_OPTIONS>

const MODES = new Set(["read-write", "read", "write"])

/**
 * kiln.json's headers, which are the repository's: a value `$VAR` there would let whoever wrote the file send the
 * user's environment (a token) to a server the same file names, so it is refused with where to put it instead.
 */
const checkedInHeaders = (
  headers: Readonly<Record<string, string>>
): Effect.Effect<ReadonlyArray<readonly [string, string]>, InvalidRemoteSettings> => {
  const variable = Object.entries(headers).find(([, v]) => RemoteSettings.isVariable(v))
  if (variable === undefined) return Effect.succeed(Object.entries(headers))
  const [name, value] = variable
  return Effect.fail(
    new InvalidRemoteSettings({
      source: `kiln.json: remote.headers.${name}`,
      detail: `${value} is read from your environment only for headers you give yourself: ` +
        `pass --remote-header '${name}=${value}' on the command line instead`
    })
  )
}

const fromConfig = (
  remote: typeof RemoteConfig.Type | undefined,
  workspace: string
): Effect.Effect<RemoteSettings.Given, InvalidRemoteSettings> =>
  remote?.headers === undefined
    ? Effect.succeed(fromConfigFields(remote, workspace))
    : Effect.map(checkedInHeaders(remote.headers), (headers) => ({
      ...fromConfigFields(remote, workspace),
      checkedInHeaders: headers
    }))

const fromConfigFields = (remote: typeof RemoteConfig.Type | undefined, workspace: string): RemoteSettings.Given => {
  if (remote === undefined) return {}
  // Kept relative: they must stay inside the workspace, which `RemoteSettings.resolve` checks.
  const at = (p: string) => ({ path: p, workspace })
  const timeout = remote.timeout !== undefined ? DurationText.parse(remote.timeout) : undefined
  return {
    ...(remote.cache !== undefined ? { url: remote.cache } : {}),
    ...(remote.executor !== undefined ? { executorUrl: remote.executor } : {}),
    ...(remote.instanceName !== undefined ? { instanceName: remote.instanceName } : {}),
    ...(remote.ca !== undefined ? { ca: at(remote.ca) } : {}),
    ...(remote.clientCert !== undefined ? { clientCert: at(remote.clientCert) } : {}),
    ...(remote.clientKey !== undefined ? { clientKey: at(remote.clientKey) } : {}),
    ...(remote.mode !== undefined ? { mode: remote.mode } : {}),
    ...(remote.required !== undefined ? { required: remote.required } : {}),
    ...(timeout !== undefined && Either.isRight(timeout) ? { timeoutMs: Duration.toMillis(timeout.right) } : {})
  }
}

const fromArgs = (o: RemoteArgs): Effect.Effect<RemoteSettings.Given, InvalidRemoteSettings> =>
  Effect.gen(function*() {
    const some = <A>(x: Option.Option<A>) => Option.getOrUndefined(x)
    const mode = some(o.remoteCacheMode)
    if (mode !== undefined && !MODES.has(mode)) {
      return yield* new InvalidRemoteSettings({
        source: "--remote-cache-mode",
        detail: `\`${mode}\` is not one of read-write, read, write`
      })
    }
    const timeout = some(o.remoteTimeout)
    const fallback = some(o.remoteFallback)
    if (fallback !== undefined && fallback !== "on" && fallback !== "off") {
      return yield* new InvalidRemoteSettings({
        source: "--remote-fallback",
        detail: `\`${fallback}\` is not one of on, off`
      })
    }
    return {
      ...(some(o.remoteExecutor) !== undefined ? { executorUrl: some(o.remoteExecutor)! } : {}),
      ...(some(o.remoteJobs) !== undefined ? { remoteJobs: some(o.remoteJobs)! } : {}),
      ...(fallback !== undefined ? { fallback: fallback === "on" } : {}),
      ...(some(o.remoteCache) !== undefined ? { url: some(o.remoteCache)! } : {}),
      ...(some(o.remoteInstanceName) !== undefined ? { instanceName: some(o.remoteInstanceName)! } : {}),
      ...(o.remoteHeader.length > 0 ? { headers: o.remoteHeader } : {}),
      ...(some(o.remoteCa) !== undefined ? { ca: some(o.remoteCa)! } : {}),
      ...(some(o.remoteClientCert) !== undefined ? { clientCert: some(o.remoteClientCert)! } : {}),
      ...(some(o.remoteClientKey) !== undefined ? { clientKey: some(o.remoteClientKey)! } : {}),
      ...(mode !== undefined ? { mode: mode as RemoteSettings.Mode } : {}),
      ...(o.remoteRequired ? { required: true } : {}),
      ...(timeout !== undefined ? { timeoutMs: Duration.toMillis(timeout) } : {}),
      ...(some(o.remoteLog) !== undefined ? { logFile: path.resolve(some(o.remoteLog)!) } : {}),
      ...(some(o.remoteCorrelationId) !== undefined ? { correlationId: some(o.remoteCorrelationId)! } : {})
    }
  })

let warnedLiteral = false
let warnedPlaintext = false

/** A host on this machine: what is sent to it in plain text stays here. */
const isLoopback = (host: string): boolean =>
  host === "localhost" || host === "::1" || /^127\.\d+\.\d+\.\d+$/.test(host)

/**
 * Once per process each: a literal `--remote-header` value (any local user sees it in `ps`), and headers sent in
 * plain text to another machine.
 */
const warnExposure = (args: RemoteSettings.Given, settings: RemoteSettings.Settings | undefined) => {
  const literal = (args.headers ?? []).find((h) => !RemoteSettings.isVariable(h.slice(h.indexOf("=") + 1)))
  if (literal !== undefined && !warnedLiteral) {
    warnedLiteral = true
    const name = literal.slice(0, Math.max(literal.indexOf("="), 0))
    process.stderr.write(
      `kiln: warning: --remote-header ${name}: a value on the command line is visible to every local user (ps): ` +
        `pass --remote-header '${name}=$VAR' with the value in the environment variable VAR instead\n`
    )
  }
  if (settings === undefined || settings.headers.length === 0 || warnedPlaintext) return
  const plain = [settings.endpoint, settings.executorEndpoint].find((e) =>
    e !== undefined && (e.scheme === "http" || e.scheme === "grpc") && !isLoopback(e.host)
  )
  if (plain !== undefined) {
    warnedPlaintext = true
    process.stderr.write(
      `kiln: warning: remote headers go to ${plain.display} unencrypted: use ${
        plain.scheme === "http" ? "https" : "grpcs"
      }:// to keep them from the network\n`
    )
  }
}

/** The settings, or undefined when no remote is named anywhere. */
export const remoteSettings = (
  o: RemoteArgs,
  config?: { readonly remote?: typeof RemoteConfig.Type | undefined },
  workspace: string = process.cwd(),
  env: NodeJS.ProcessEnv = process.env
): Effect.Effect<RemoteSettings.Settings | undefined, InvalidRemoteSettings> =>
  Effect.gen(function*() {
    const args = yield* fromArgs(o)
    const checkedIn = yield* fromConfig(config?.remote, workspace)
    const settings = yield* RemoteSettings.resolve(
      RemoteSettings.merge(
        checkedIn,
        env.KILN_REMOTE_CACHE !== undefined && env.KILN_REMOTE_CACHE !== "" ? { url: env.KILN_REMOTE_CACHE } : {},
        env.KILN_REMOTE_EXECUTOR !== undefined && env.KILN_REMOTE_EXECUTOR !== ""
          ? { executorUrl: env.KILN_REMOTE_EXECUTOR }
          : {},
        env.KILN_CORRELATION_ID !== undefined && env.KILN_CORRELATION_ID !== ""
          ? { correlationId: env.KILN_CORRELATION_ID }
          : {},
        args
      ),
      env
    )
    warnExposure(args, settings)
    return settings
  })

/** Bad remote settings: one line on stderr, exit code 2. */
export const exitOnInvalidRemote = <A, E, R>(effect: Effect.Effect<A, E | InvalidRemoteSettings, R>) =>
  Effect.catchIf(
    effect,
    (e): e is InvalidRemoteSettings =>
      typeof e === "object" && e !== null && "_tag" in e && e._tag === "InvalidRemoteSettings",
    (e) =>
      Effect.sync(() => {
        process.stderr.write(`kiln: ${e.message}\n`)
        process.exitCode = 2
      })
  )
