/**
 * Where the remote cache is and how to talk to it, from the command line, the environment (`KILN_REMOTE_CACHE`) and
 * kiln.json's `"remote"` object, the command line winning. Header values written `$VAR` are read from the
 * environment, so tokens stay out of files; they are never logged or printed. Only the user's own headers may be
 * `$VAR` (the command line): kiln.json's are refused before they get here (`cli/settings.ts`).
 *
 * @since 0.1.0
 */
import * as Effect from "effect/Effect"
import * as fs from "node:fs"
import { InvalidRemoteSettings } from "./RemoteErrors.js"

/**
 * @since 0.1.0
 * @category models
 */
export type Mode = "read-write" | "read" | "write"

/**
 * `grpc`/`grpcs`: a REAPI v2 server; `http`/`https`: Bazel's HTTP cache (`/ac/`, `/cas/` under `prefix`).
 *
 * @since 0.1.0
 * @category models
 */
export interface Endpoint {
  readonly scheme: "grpc" | "grpcs" | "http" | "https"
  readonly host: string
  readonly port: number
  /** HTTP only: the path the cache lives under, without a trailing `/` (`""` at the root). */
  readonly prefix: string
  /** How the endpoint is named in messages and logs: scheme, host, port and prefix, never credentials. */
  readonly display: string
}

/**
 * @since 0.1.0
 * @category models
 */
export interface Settings {
  readonly endpoint: Endpoint
  readonly instanceName: string
  /** Resolved header values: secret. */
  readonly headers: ReadonlyArray<readonly [string, string]>
  readonly ca?: Buffer
  readonly clientCert?: Buffer
  readonly clientKey?: Buffer
  readonly mode: Mode
  readonly required: boolean
  /** The bound on a transfer that makes no progress, and on a unary call; lookups and the probe get less. */
  readonly timeoutMs: number
  readonly logFile?: string
  /** Processes may run on an executor (REAPI `Execution`): `executorEndpoint`, else `endpoint` itself. */
  readonly executor: boolean
  /** An executor apart from the cache (`--remote-cache` named another endpoint): it has its own connection. */
  readonly executorEndpoint?: Endpoint
  /** Processes in flight on the executor at once. */
  readonly remoteJobs: number
  /** A process the executor cannot take runs locally (true), or fails (false). */
  readonly fallback: boolean
}

/**
 * The settings as written, before they are resolved: every field optional, each layer (kiln.json, environment,
 * command line) overriding the one before.
 *
 * @since 0.1.0
 * @category models
 */
export interface Given {
  readonly url?: string
  readonly instanceName?: string
  readonly headers?: ReadonlyArray<string>
  readonly ca?: string
  readonly clientCert?: string
  readonly clientKey?: string
  readonly mode?: Mode
  readonly required?: boolean
  readonly timeoutMs?: number
  readonly logFile?: string
  readonly executorUrl?: string
  readonly remoteJobs?: number
  readonly fallback?: boolean
}

/** Processes in flight on an executor by default: it is a cluster, not this machine's cores. */
export const DEFAULT_REMOTE_JOBS = 50

/**
 * Lays the layers over each other, later ones winning field by field; headers add up.
 *
 * @since 0.1.0
 * @category constructors
 */
export const merge = (...layers: ReadonlyArray<Given>): Given => {
  const out: Record<string, unknown> = {}
  const headers: Array<string> = []
  for (const layer of layers) {
    for (const [k, v] of Object.entries(layer)) {
      if (v === undefined) continue
      if (k === "headers") headers.push(...(v as ReadonlyArray<string>))
      else out[k] = v
    }
  }
  return { ...out, ...(headers.length > 0 ? { headers } : {}) } as Given
}

/** The default bound on a stalled transfer or a unary call. */
export const DEFAULT_TIMEOUT_MS = 60_000

/**
 * Parses an endpoint URL: `grpc://host:port`, `grpcs://host:port`, `http(s)://host:port[/prefix]`.
 *
 * @since 0.1.0
 * @category parsing
 */
export const parseEndpoint = (url: string, source: string): Effect.Effect<Endpoint, InvalidRemoteSettings> =>
  Effect.suspend(() => {
    const bad = (detail: string) => Effect.fail(new InvalidRemoteSettings({ source, detail }))
    let u: URL
    try {
      u = new URL(url)
    } catch {
      return bad(
        `\`${url}\` is not a URL: expected grpc://host:port, grpcs://host:port or http(s)://host:port[/prefix]`
      )
    }
    const scheme = u.protocol.replace(/:$/, "")
    if (scheme !== "grpc" && scheme !== "grpcs" && scheme !== "http" && scheme !== "https") {
      return bad(`unsupported scheme \`${scheme}:\` in \`${url}\`: use grpc, grpcs, http or https`)
    }
    if (u.username !== "" || u.password !== "") {
      return bad("credentials in the URL would be logged: pass them with --remote-header NAME=$VAR")
    }
    if (u.hostname === "") return bad(`\`${url}\` names no host`)
    const port = u.port !== "" ? Number(u.port) : scheme === "https" || scheme === "grpcs" ? 443 : 80
    const isGrpc = scheme === "grpc" || scheme === "grpcs"
    if (isGrpc && u.pathname !== "/" && u.pathname !== "") {
      return bad(`a gRPC endpoint has no path (\`${u.pathname}\`): name the instance with --remote-instance-name`)
    }
    if (u.search !== "" || u.hash !== "") return bad(`\`${url}\` must not have a query or fragment`)
    const prefix = isGrpc ? "" : u.pathname.replace(/\/+$/, "")
    const host = u.hostname.replace(/^\[|\]$/g, "")
    const display = `${scheme}://${u.host}${prefix}`
    return Effect.succeed({ scheme, host, port, prefix, display })
  })

const readPem = (file: string | undefined, what: string) => {
  if (file === undefined) return Effect.succeed(undefined)
  return Effect.try({
    try: () => fs.readFileSync(file),
    catch: (e) =>
      new InvalidRemoteSettings({
        source: what,
        detail: `cannot read \`${file}\`: ${(e as NodeJS.ErrnoException).code ?? String(e)}`
      })
  })
}

/**
 * Whether a header value is `$VAR`, read from the environment.
 *
 * @since 0.1.0
 * @category parsing
 */
export const isVariable = (value: string): boolean => /^\$[A-Za-z_][A-Za-z0-9_]*$/.test(value)

/**
 * A header `NAME=VALUE`; a value `$VAR` is the environment variable's value (an unset one is an error, so a token
 * that did not reach CI fails loudly instead of sending an empty credential).
 *
 * @since 0.1.0
 * @category parsing
 */
export const parseHeader = (
  text: string,
  env: NodeJS.ProcessEnv
): Effect.Effect<readonly [string, string], InvalidRemoteSettings> =>
  Effect.suspend(() => {
    const eq = text.indexOf("=")
    const name = eq > 0 ? text.slice(0, eq).trim().toLowerCase() : ""
    if (name === "" || !/^[a-z0-9!#$%&'*+.^_`|~-]+$/.test(name)) {
      return Effect.fail(
        new InvalidRemoteSettings({ source: "--remote-header", detail: `expected NAME=VALUE, got \`${name || text}\`` })
      )
    }
    const raw = text.slice(eq + 1)
    if (isVariable(raw)) {
      const value = env[raw.slice(1)]
      if (value === undefined) {
        return Effect.fail(
          new InvalidRemoteSettings({ source: "--remote-header", detail: `header ${name}: ${raw} is not set` })
        )
      }
      return Effect.succeed([name, value] as const)
    }
    return Effect.succeed([name, raw] as const)
  })

/**
 * Resolves what was given into settings; none when no endpoint was given at all.
 *
 * @since 0.1.0
 * @category constructors
 */
export const resolve = (
  given: Given,
  env: NodeJS.ProcessEnv = process.env,
  executor?: Endpoint
): Effect.Effect<Settings | undefined, InvalidRemoteSettings> =>
  Effect.gen(function*() {
    if (given.executorUrl !== undefined && given.executorUrl !== "") {
      const executor = yield* parseEndpoint(given.executorUrl, "--remote-executor")
      if (executor.scheme !== "grpc" && executor.scheme !== "grpcs") {
        return yield* new InvalidRemoteSettings({
          source: "--remote-executor",
          detail: `an executor speaks REAPI over gRPC: use grpc:// or grpcs://, not ${executor.scheme}://`
        })
      }
      const { executorUrl, ...cacheGiven } = given
      // Another cache: results are looked up and kept there, and the executor is sent inputs and asked for outputs.
      const apart = given.url !== undefined && given.url !== "" &&
        (yield* parseEndpoint(given.url, "--remote-cache")).display !== executor.display
      return yield* resolve(apart ? cacheGiven : { ...cacheGiven, url: executorUrl }, env, executor).pipe(
        Effect.map((
          s
        ) => (s === undefined ? s : { ...s, executor: true, ...(apart ? { executorEndpoint: executor } : {}) }))
      )
    }
    if (given.url === undefined || given.url === "") {
      const orphan = (["ca", "clientCert", "clientKey", "instanceName"] as const).find((k) => given[k] !== undefined)
      if (given.required === true || orphan !== undefined) {
        return yield* new InvalidRemoteSettings({
          source: "--remote-cache",
          detail: "remote options were given but no endpoint: pass --remote-cache URL (or set KILN_REMOTE_CACHE)"
        })
      }
      return undefined
    }
    const endpoint = yield* parseEndpoint(given.url, "--remote-cache")
    const headers = yield* Effect.forEach(given.headers ?? [], (h) => parseHeader(h, env))
    const ca = yield* readPem(given.ca, "--remote-ca")
    const clientCert = yield* readPem(given.clientCert, "--remote-client-cert")
    const clientKey = yield* readPem(given.clientKey, "--remote-client-key")
    if ((clientCert === undefined) !== (clientKey === undefined)) {
      return yield* new InvalidRemoteSettings({
        source: clientCert === undefined ? "--remote-client-key" : "--remote-client-cert",
        detail: "a client certificate needs its key, and a key its certificate"
      })
    }
    const tls = [endpoint, executor].some((e) => e?.scheme === "grpcs" || e?.scheme === "https")
    if (!tls && (ca !== undefined || clientCert !== undefined)) {
      return yield* new InvalidRemoteSettings({
        source: "--remote-ca",
        detail: `TLS files were given for a plaintext endpoint (${endpoint.display}): use grpcs:// or https://`
      })
    }
    return {
      endpoint,
      instanceName: given.instanceName ?? "",
      headers,
      ...(ca !== undefined ? { ca } : {}),
      ...(clientCert !== undefined ? { clientCert } : {}),
      ...(clientKey !== undefined ? { clientKey } : {}),
      mode: given.mode ?? "read-write",
      required: given.required ?? false,
      timeoutMs: given.timeoutMs ?? DEFAULT_TIMEOUT_MS,
      ...(given.logFile !== undefined ? { logFile: given.logFile } : {}),
      executor: false,
      remoteJobs: given.remoteJobs ?? DEFAULT_REMOTE_JOBS,
      fallback: given.fallback ?? true
    }
  })
