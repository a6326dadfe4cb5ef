/**
 * Where the remote cache is and how to talk to it, from the command line, the environment (`KILN_REMOTE_CACHE`) and
 * kiln.json's `"remote"` object, the command line winning. Header values written `$VAR` are read from the
 * environment, so tokens stay out of files; they are never logged or printed. Only the user's own headers may be
 * `$VAR` (the command line): kiln.json's are refused before they get here (`cli/settings.ts`).
 *
 * @since 0.1.0
 */
import * as Effect from "effect/Effect"
import { createPrivateKey, X509Certificate } from "node:crypto"
import * as fs from "node:fs"
import * as path from "node:path"
import * as tls from "node:tls"
import { openAppend, readSmallFile } from "../../os/TextFile.js"
import * as EndpointUrl from "./Endpoint.js"
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
export type Endpoint = EndpointUrl.Endpoint

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
  /** Sent with every REAPI call as `RequestMetadata.correlated_invocations_id` (a CI job's id). */
  readonly correlationId?: string
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
  /** The user's headers, `NAME=VALUE` (`--remote-header`): a value `$VAR` is read from the environment. */
  readonly headers?: ReadonlyArray<string>
  /** kiln.json's headers, literal (a `$VAR` there is refused before it gets here). */
  readonly checkedInHeaders?: ReadonlyArray<readonly [string, string]>
  readonly ca?: FileGiven
  readonly clientCert?: FileGiven
  readonly clientKey?: FileGiven
  readonly mode?: Mode
  readonly required?: boolean
  readonly timeoutMs?: number
  readonly correlationId?: string
  readonly logFile?: string
  readonly executorUrl?: string
  readonly remoteJobs?: number
  readonly fallback?: boolean
}

/**
 * A TLS file: the user's (any path: a string), or kiln.json's, which must stay inside its workspace: a repository
 * that names the server must not also choose which of the user's certificates and keys kiln presents to it.
 *
 * @since 0.1.0
 * @category models
 */
export type FileGiven = string | { readonly path: string; readonly workspace: string }

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
  const checkedInHeaders: Array<readonly [string, string]> = []
  for (const layer of layers) {
    for (const [k, v] of Object.entries(layer)) {
      if (v === undefined) continue
      if (k === "headers") headers.push(...(v as ReadonlyArray<string>))
      else if (k === "checkedInHeaders") checkedInHeaders.push(...(v as ReadonlyArray<readonly [string, string]>))
      else out[k] = v
    }
  }
  return {
    ...out,
    ...(headers.length > 0 ? { headers } : {}),
    ...(checkedInHeaders.length > 0 ? { checkedInHeaders } : {})
  } as Given
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
    const parsed = EndpointUrl.parse(url)
    return EndpointUrl.isProblem(parsed)
      ? Effect.fail(new InvalidRemoteSettings({ source, detail: parsed.problem }))
      : Effect.succeed(parsed)
  })

type TlsFile = "ca" | "clientCert" | "clientKey"

const OPTION: Record<TlsFile, string> = {
  ca: "--remote-ca",
  clientCert: "--remote-client-cert",
  clientKey: "--remote-client-key"
}

/** Where a setting came from, for its error: the user's option, or kiln.json's field. */
const sourceOf = (field: TlsFile, given: FileGiven) =>
  typeof given === "string" ? OPTION[field] : `kiln.json: remote.${field}`

/** Whether `rel` (relative to some directory) stays inside it. */
const inside = (rel: string) => !path.isAbsolute(rel) && rel !== ".." && !rel.startsWith(`..${path.sep}`)

/**
 * The file's path: the user's as given; kiln.json's inside its workspace, symlinks resolved, or an error saying to
 * give it on the command line.
 */
const locate = (field: TlsFile, given: FileGiven): Effect.Effect<string, InvalidRemoteSettings> =>
  Effect.suspend(() => {
    if (typeof given === "string") return Effect.succeed(given)
    const bad = (detail: string) => Effect.fail(new InvalidRemoteSettings({ source: sourceOf(field, given), detail }))
    const outside = (how: string) =>
      bad(
        `\`${given.path}\` ${how}: a repository may not choose which of your certificates and keys kiln presents; ` +
          `pass ${OPTION[field]} on the command line instead`
      )
    if (path.isAbsolute(given.path) || !inside(path.normalize(given.path))) return outside("is outside the workspace")
    let real: string
    let workspace: string
    try {
      workspace = fs.realpathSync(given.workspace)
      real = fs.realpathSync(path.resolve(given.workspace, given.path))
    } catch (e) {
      return bad(`cannot read \`${given.path}\`: ${(e as NodeJS.ErrnoException).code ?? String(e)}`)
    }
    return inside(path.relative(workspace, real)) ? Effect.succeed(real) : outside("leads outside the workspace")
  })

/** Whether `bytes` are what `field` needs, in PEM: TLS would otherwise fail later, deep in a connection, with a stack. */
const isPem = (field: TlsFile, bytes: Buffer): boolean => {
  if (!bytes.toString("latin1").includes("-----BEGIN ")) return false
  try {
    if (field === "clientKey") createPrivateKey(bytes)
    else new X509Certificate(bytes)
    return true
  } catch {
    return false
  }
}

/** Whether the key belongs to the certificate: TLS checks it when it first connects, and throws. */
const pairs = (cert: Buffer, key: Buffer): boolean => {
  try {
    tls.createSecureContext({ cert, key })
    return true
  } catch {
    return false
  }
}

const shownPath = (given: FileGiven) => (typeof given === "string" ? given : given.path)

/** A TLS file's bytes, checked to be PEM of its kind; every failure one line naming the option (or field) and path. */
/** A PEM file larger than this is refused: a system's whole CA bundle is a few hundred kilobytes. */
const LARGEST_PEM = 16 * 1024 * 1024

const readPem = (
  field: TlsFile,
  given: FileGiven | undefined
): Effect.Effect<Buffer | undefined, InvalidRemoteSettings> =>
  given === undefined ?
    Effect.succeed(undefined) :
    Effect.flatMap(locate(field, given), (file) =>
      Effect.suspend(() => {
        const shown = shownPath(given)
        const bad = (detail: string) =>
          Effect.fail(new InvalidRemoteSettings({ source: sourceOf(field, given), detail }))
        // Bounded, and only a regular file: a FIFO there hung kiln in `open` (deaf to signals), a sparse file of 2 GB
        // took 4 GB of memory. (`locate` has kept a repository's paths inside the workspace.)
        const read = readSmallFile(file, LARGEST_PEM, true)
        if (read._tag !== "Read") {
          return bad(`cannot read \`${shown}\`: ${read._tag === "Absent" ? "ENOENT" : read.detail}`)
        }
        const bytes = Buffer.from(read.text)
        return isPem(field, bytes)
          ? Effect.succeed(bytes)
          : bad(`\`${shown}\` is not a PEM ${field === "clientKey" ? "private key (unencrypted)" : "certificate"}`)
      }))

/**
 * Whether a header value is `$VAR`, read from the environment.
 *
 * @since 0.1.0
 * @category parsing
 */
export const isVariable = (value: string): boolean => /^\$[A-Za-z_][A-Za-z0-9_]*$/.test(value)

/** A header as given, with where it came from (for its error): the user's option or kiln.json's field. */
interface HeaderGiven {
  readonly name: string
  readonly value: string
  readonly source: string
  /** The `$VAR` its value was read from. */
  readonly variable?: string
}

/** A header name or value as it may be shown in a one-line error: control and non-ASCII characters escaped. */
const printable = (text: string) => /^[\x20-\x7e]*$/.test(text) ? text : JSON.stringify(text).slice(1, -1)

/**
 * A header `NAME=VALUE` of the user's; a value `$VAR` is the environment variable's value (an unset one is an error,
 * so a token that did not reach CI fails loudly instead of sending an empty credential).
 *
 * @since 0.1.0
 * @category parsing
 */
export const parseHeader = (text: string, env: NodeJS.ProcessEnv): Effect.Effect<HeaderGiven, InvalidRemoteSettings> =>
  Effect.suspend(() => {
    const eq = text.indexOf("=")
    const name = eq > 0 ? text.slice(0, eq).trim().toLowerCase() : ""
    if (name === "") {
      return Effect.fail(
        new InvalidRemoteSettings({
          source: "--remote-header",
          detail: `expected NAME=VALUE, got \`${printable(text)}\``
        })
      )
    }
    const source = `--remote-header ${printable(name)}`
    const raw = text.slice(eq + 1)
    if (!isVariable(raw)) return Effect.succeed({ name, value: raw, source })
    const value = env[raw.slice(1)]
    return value === undefined
      ? Effect.fail(
        new InvalidRemoteSettings({ source: "--remote-header", detail: `header ${name}: ${raw} is not set` })
      )
      : Effect.succeed({ name, value, source, variable: raw })
  })

/** An HTTP header name (RFC 9110's token). */
const HTTP_NAME = /^[a-z0-9!#$%&'*+.^_`|~-]+$/
/** A gRPC metadata key as grpc-js takes it: lowercase, and no punctuation but `-`, `_` and `.`. */
const GRPC_NAME = /^[0-9a-z_.-]+$/
/** A header value: printable ASCII, spaces and (over HTTP) tabs; never CR, LF or NUL, which would forge headers. */
const HTTP_VALUE = /^[\t\x20-\x7e]*$/
const GRPC_VALUE = /^[\x20-\x7e]*$/

/**
 * The header, or the one-line error that names where it came from: a name or value the transport would refuse would
 * otherwise end the run with its stack, and a line break in a value would forge another header.
 */
const checkHeader = (
  h: HeaderGiven,
  grpc: boolean
): Effect.Effect<readonly [string, string], InvalidRemoteSettings> => {
  const bad = (detail: string) => Effect.fail(new InvalidRemoteSettings({ source: h.source, detail }))
  if (!HTTP_NAME.test(h.name)) {
    return bad(`\`${printable(h.name)}\` is not a header name: use letters, digits and - _ .`)
  }
  if (grpc && !GRPC_NAME.test(h.name)) {
    return bad(`\`${h.name}\` is not a gRPC metadata key: use letters, digits and - _ .`)
  }
  if (grpc && h.name.endsWith("-bin")) {
    return bad(`\`${h.name}\` names binary gRPC metadata, which kiln does not send: use another name`)
  }
  const of = h.variable !== undefined ? `${h.variable}'s value` : "its value"
  const wrong = [...h.value].find((c) => !(grpc ? GRPC_VALUE : HTTP_VALUE).test(c))
  if (wrong === undefined) return Effect.succeed([h.name, h.value] as const)
  const code = `U+${wrong.codePointAt(0)!.toString(16).toUpperCase().padStart(4, "0")}`
  return bad(
    wrong === "\r" || wrong === "\n"
      ? `${of} holds a line break (${code}), which would end the header: a value is one line`
      : `${of} holds ${code}, which a header cannot carry: use printable ASCII${grpc ? "" : " and tabs"}`
  )
}

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
    const grpc = [endpoint, executor].some((e) => e?.scheme === "grpc" || e?.scheme === "grpcs")
    const headers = yield* Effect.forEach([
      ...(given.checkedInHeaders ?? []).map(([name, value]): HeaderGiven => ({
        name: name.toLowerCase(),
        value,
        source: `kiln.json: remote.headers.${printable(name)}`
      })),
      ...(yield* Effect.forEach(given.headers ?? [], (h) => parseHeader(h, env)))
    ], (h) => checkHeader(h, grpc))
    const ca = yield* readPem("ca", given.ca)
    const clientCert = yield* readPem("clientCert", given.clientCert)
    const clientKey = yield* readPem("clientKey", given.clientKey)
    if ((clientCert === undefined) !== (clientKey === undefined)) {
      return yield* new InvalidRemoteSettings({
        source: clientCert === undefined ? "--remote-client-key" : "--remote-client-cert",
        detail: "a client certificate needs its key, and a key its certificate"
      })
    }
    if (clientCert !== undefined && clientKey !== undefined && !pairs(clientCert, clientKey)) {
      return yield* new InvalidRemoteSettings({
        source: sourceOf("clientKey", given.clientKey!),
        detail: `\`${shownPath(given.clientKey!)}\` is not the key of the client certificate`
      })
    }
    if (given.logFile !== undefined) {
      const opened = openAppend(given.logFile)
      if (typeof opened === "string") {
        return yield* new InvalidRemoteSettings({ source: "--remote-log", detail: `\`${given.logFile}\` ${opened}` })
      }
      fs.closeSync(opened)
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
      ...(given.correlationId !== undefined ? { correlationId: given.correlationId } : {}),
      executor: false,
      remoteJobs: given.remoteJobs ?? DEFAULT_REMOTE_JOBS,
      fallback: given.fallback ?? true
    }
  })
