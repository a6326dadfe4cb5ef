/**
 * One gRPC channel to a REAPI server and what every call over it needs: the settings, the call log, the tool's
 * identity for `RequestMetadata` (Bazel's worker refuses calls without it), and what kiln learns of the server as the
 * run goes (its batch limit, whether it reads batches). The call kinds (`capabilities.ts`, `actionCache.ts`,
 * `cas.ts`, `byteStream.ts`, `execute.ts`) are functions over this record.
 *
 * @internal
 */
import * as grpc from "@grpc/grpc-js"
import * as Effect from "effect/Effect"
import type * as Digest from "../../../../domain/Digest.js"
import * as Permits from "../../../../domain/Permits.js"
import { RemoteError } from "../../RemoteErrors.js"
import type { Settings } from "../../RemoteSettings.js"
import type { Calls, Described, Kind } from "../calls.js"
import * as Proto from "../proto.js"
import { MAX_ACTION_RESULT_BYTES } from "../transport.js"

export const V2 = "/build.bazel.remote.execution.v2."
/** gRPC's default message limit, which servers apply to what they receive whatever they advertise. */
export const GRPC_MESSAGE_LIMIT = 4 * 1024 * 1024
/** Room for a batch request's framing (digests, tags) within the limit. */
export const BATCH_FRAMING = 64 * 1024
/**
 * The largest message kiln receives: an `ActionResult` at its bound, with room for its framing. Batches stay under
 * gRPC's 4 MiB and ByteStream chunks are the server's choice of a few KiB or MiB, so only a hostile answer is refused.
 */
const MAX_RECEIVE = MAX_ACTION_RESULT_BYTES + BATCH_FRAMING

export interface ToolInfo {
  readonly version: string
  readonly invocationId: string
  readonly correlatedId?: string
}

/** What the server's answers taught kiln, for the rest of the run. */
export interface Learned {
  /** The most a batch request may carry: the server's advertised limit or gRPC's, less the framing. */
  batchLimit: number
  /**
   * Whether the server has BatchReadBlobs: `unknown` until a call says, true once one answered, false once one was
   * UNIMPLEMENTED (every download goes by ByteStream from then on).
   */
  batchRead: boolean | "unknown"
  /**
   * Held by the one download that asks while `batchRead` is unknown: the others wait for its answer rather than each
   * learn the same UNIMPLEMENTED (a remote-execution run's first 20 downloads did).
   */
  readonly batchReadProbe: Permits.Permits
}

export interface Connection {
  readonly client: grpc.Client
  readonly settings: Settings
  readonly calls: Calls
  readonly tool: ToolInfo
  readonly learned: Learned
}

/** The channel to `settings`' endpoint (grpc-js connects on the first call). */
export const connect = (settings: Settings, calls: Calls, tool: ToolInfo): Connection => {
  const { endpoint } = settings
  const credentials = endpoint.scheme === "grpcs"
    ? grpc.credentials.createSsl(settings.ca ?? null, settings.clientKey ?? null, settings.clientCert ?? null)
    : grpc.credentials.createInsecure()
  const client = new grpc.Client(
    `${endpoint.host.includes(":") ? `[${endpoint.host}]` : endpoint.host}:${endpoint.port}`,
    credentials,
    {
      "grpc.max_receive_message_length": MAX_RECEIVE,
      "grpc.keepalive_time_ms": 30_000,
      "grpc.keepalive_timeout_ms": 20_000,
      "grpc.keepalive_permit_without_calls": 0,
      "grpc.primary_user_agent": `kiln/${tool.version}`,
      // Reconnect quickly after the server comes back: the breaker, not gRPC's backoff, decides when to try.
      "grpc.initial_reconnect_backoff_ms": 200,
      "grpc.max_reconnect_backoff_ms": 2_000
    }
  )
  return {
    client,
    settings,
    calls,
    tool,
    learned: {
      batchLimit: GRPC_MESSAGE_LIMIT - BATCH_FRAMING,
      batchRead: "unknown",
      batchReadProbe: Permits.unsafeMake(1)
    }
  }
}

export const codeName = (code: number | undefined): string =>
  code === undefined ? "UNKNOWN" : (grpc.status[code] as string | undefined) ?? `CODE_${code}`

/** The server's `RetryInfo`, if its error carries one in `grpc-status-details-bin`. */
const retryDelayOf = (err: grpc.ServiceError): number | undefined => {
  try {
    const raw = err.metadata?.get("grpc-status-details-bin")[0]
    if (!(raw instanceof Buffer)) return undefined
    const status = Proto.decode<{ details?: Array<{ type_url?: string; value?: Uint8Array }> }>(
      "google.rpc.Status",
      raw
    )
    for (const any of status.details ?? []) {
      if (any.type_url?.endsWith("google.rpc.RetryInfo") !== true || any.value === undefined) continue
      const info = Proto.decode<{ retry_delay?: { seconds?: number; nanos?: number } }>(
        "google.rpc.RetryInfo",
        any.value
      )
      return (info.retry_delay?.seconds ?? 0) * 1000 + Math.floor((info.retry_delay?.nanos ?? 0) / 1e6)
    }
  } catch {
    // A status detail kiln cannot read is no reason to fail the call's error: the retry falls back to backoff.
  }
  return undefined
}

/**
 * grpc-js's connection errors, down to their cause: "connect ECONNREFUSED 127.0.0.1:50081", on one line (OpenSSL's
 * errors end in a newline before grpc-js's ". Resolution note:", and a warning must stay one line).
 */
const tidy = (detail: string): string => {
  const cause = /Last error: (?:Error: )?(.*?)\s*(?:\. Resolution note:.*)?$/s.exec(detail)
  return (cause?.[1] ?? detail).replace(/\s*\n\s*/g, " ").trim()
}

export const fail = (conn: Connection, method: string, code: string, detail: string, retryDelayMs?: number) =>
  new RemoteError({
    endpoint: conn.settings.endpoint.display,
    method,
    code,
    detail,
    ...(retryDelayMs !== undefined ? { retryDelayMs } : {})
  })

/** A failed call's error: its status, tidied, and the server's `RetryInfo`. */
export const fromGrpc = (conn: Connection, method: string, err: grpc.ServiceError) => {
  const detail = tidy(err.details ?? err.message)
  // A message over the receive bound is the server's answer being too large, not the server being overloaded.
  return err.code === grpc.status.RESOURCE_EXHAUSTED && /^Received message .*larger than/.test(detail)
    ? fail(conn, method, "TOO_LARGE", detail)
    : fail(conn, method, codeName(err.code), detail, retryDelayOf(err))
}

/** Each connection's `RequestMetadata` without an action id: the same for every call, encoded once. */
const baseMetadata = new WeakMap<Connection, Buffer>()

/** A protobuf string field (length-delimited): a message's encoding followed by it is the message with it set. */
const stringField = (field: number, value: string) => {
  const bytes = Buffer.from(value, "utf8")
  const head = [(field << 3) | 2]
  for (let n = bytes.length;; n >>>= 7) {
    if (n < 0x80) {
      head.push(n)
      break
    }
    head.push((n & 0x7f) | 0x80)
  }
  return Buffer.concat([Buffer.from(head), bytes])
}

/** A call's metadata: the settings' headers and `RequestMetadata`. */
export const metadata = (conn: Connection, actionId?: string) => {
  const { settings, tool } = conn
  const md = new grpc.Metadata()
  for (const [name, value] of settings.headers) md.add(name, value)
  let base = baseMetadata.get(conn)
  if (base === undefined) {
    base = Buffer.from(Proto.encode("RequestMetadata", {
      tool_details: { tool_name: "kiln", tool_version: tool.version },
      tool_invocation_id: tool.invocationId,
      ...(tool.correlatedId !== undefined ? { correlated_invocations_id: tool.correlatedId } : {})
    }))
    baseMetadata.set(conn, base)
  }
  md.set(
    "build.bazel.remote.execution.v2.requestmetadata-bin",
    actionId !== undefined ? Buffer.concat([base, stringField(2, actionId)]) : base
  )
  return md
}

export const ser = (name: string) => (value: Record<string, unknown>) => Buffer.from(Proto.encode(name, value))
export const de = <A>(name: string) => (bytes: Buffer): A => Proto.decode<A>(name, bytes)

/**
 * One unary call of `service`/`method`, with the kind's deadline and the call log's retries and breaker. `refusal`
 * reads an answer that is a failure in an OK call (a batch's per-blob statuses): the attempt fails with it, so that it
 * is logged, counted and retried as the call's own status would be.
 */
export const unary = <A>(
  conn: Connection,
  service: string,
  method: string,
  request: [string, Record<string, unknown>],
  response: string,
  kind: Kind,
  describe?: Described & { readonly actionId?: string },
  refusal?: (answer: A) => RemoteError | undefined
): Effect.Effect<A, RemoteError> => {
  const { calls, client } = conn
  const attempt = Effect.async<A, RemoteError>((resume) => {
    const call = client.makeUnaryRequest<Record<string, unknown>, A>(
      `${service}/${method}`,
      ser(request[0]),
      de<A>(response),
      request[1],
      metadata(conn, describe?.actionId),
      { deadline: Date.now() + calls.deadlineMs(kind) },
      (err, value) => {
        if (err) return resume(Effect.fail(fromGrpc(conn, method, err)))
        const refused = refusal?.(value as A)
        resume(refused !== undefined ? Effect.fail(refused) : Effect.succeed(value as A))
      }
    )
    return Effect.sync(() => call.cancel())
  })
  return calls.call(method, kind, attempt, describe)
}

export const digestArg = (d: Digest.Digest) => Proto.wire(d)

/** A blob's ByteStream resource name for reading. */
export const resource = (conn: Connection, d: Digest.Digest) => {
  const { instanceName } = conn.settings
  return `${instanceName !== "" ? `${instanceName}/` : ""}blobs/${d.hash}/${d.sizeBytes}`
}
