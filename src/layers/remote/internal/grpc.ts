/**
 * REAPI v2 over gRPC (`@grpc/grpc-js`): Capabilities, the action cache, the CAS's FindMissing and batches, and
 * ByteStream for large blobs. Quirks of real servers it allows for: a batch over the server's limit (or gRPC's 4 MiB
 * message limit) goes by ByteStream instead; BatchRead UNIMPLEMENTED falls back to ByteStream for good; batch
 * responses without digests are matched by position; a ReadResponse without `data` is empty; the empty blob is
 * never sent or fetched. Every call carries `RequestMetadata` (Bazel's worker refuses calls without it).
 *
 * @internal
 */
import * as grpc from "@grpc/grpc-js"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import { randomUUID } from "node:crypto"
import * as Digest from "../../../domain/Digest.js"
import { RemoteError } from "../RemoteErrors.js"
import type { Settings } from "../RemoteSettings.js"
import type { Calls, Described, Kind } from "./calls.js"
import * as GrpcExecute from "./grpcExecute.js"
import * as Proto from "./proto.js"
import {
  type Blob,
  type Capabilities,
  checkSizes,
  distinct,
  intoFile,
  MAX_ACTION_RESULT_BYTES,
  type Sink,
  type Transport,
  verified,
  withProgress
} from "./transport.js"

const V2 = "/build.bazel.remote.execution.v2."
/** gRPC's default message limit, which servers apply to what they receive whatever they advertise. */
const GRPC_MESSAGE_LIMIT = 4 * 1024 * 1024
/** Room for a batch request's framing (digests, tags) within the limit. */
const BATCH_FRAMING = 64 * 1024
/** ByteStream chunks: Pants' 1 MiB (Bazel's 16 KiB cost a round of framing per 16 KiB). */
const CHUNK = 1024 * 1024
const FIND_MISSING_CHUNK = 10_000
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

const codeName = (code: number | undefined): string =>
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

/** grpc-js's connection errors, down to their cause: "connect ECONNREFUSED 127.0.0.1:50081". */
const tidy = (detail: string): string => {
  const cause = /Last error: (?:Error: )?(.*?)(?:\. Resolution note:.*)?$/.exec(detail)
  return (cause?.[1] ?? detail).trim()
}

export const make = (settings: Settings, calls: Calls, tool: ToolInfo): Transport => {
  const { endpoint, instanceName } = settings
  const tls = endpoint.scheme === "grpcs"
  const credentials = tls
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
  const fail = (method: string, code: string, detail: string, retryDelayMs?: number) =>
    new RemoteError({
      endpoint: endpoint.display,
      method,
      code,
      detail,
      ...(retryDelayMs !== undefined ? { retryDelayMs } : {})
    })
  const fromGrpc = (method: string, err: grpc.ServiceError) => {
    const detail = tidy(err.details ?? err.message)
    // A message over the receive bound is the server's answer being too large, not the server being overloaded.
    return err.code === grpc.status.RESOURCE_EXHAUSTED && /^Received message .*larger than/.test(detail)
      ? fail(method, "TOO_LARGE", detail)
      : fail(method, codeName(err.code), detail, retryDelayOf(err))
  }

  const metadata = (actionId?: string) => {
    const md = new grpc.Metadata()
    for (const [name, value] of settings.headers) md.add(name, value)
    md.set(
      "build.bazel.remote.execution.v2.requestmetadata-bin",
      Buffer.from(Proto.encode("RequestMetadata", {
        tool_details: { tool_name: "kiln", tool_version: tool.version },
        ...(actionId !== undefined ? { action_id: actionId } : {}),
        tool_invocation_id: tool.invocationId,
        ...(tool.correlatedId !== undefined ? { correlated_invocations_id: tool.correlatedId } : {})
      }))
    )
    return md
  }

  const ser = (name: string) => (value: Record<string, unknown>) => Buffer.from(Proto.encode(name, value))
  const de = <A>(name: string) => (bytes: Buffer): A => Proto.decode<A>(name, bytes)

  const unary = <A>(
    service: string,
    method: string,
    request: [string, Record<string, unknown>],
    response: string,
    kind: Kind,
    describe?: Described & { readonly actionId?: string }
  ): Effect.Effect<A, RemoteError> => {
    const attempt = Effect.async<A, RemoteError>((resume) => {
      const call = client.makeUnaryRequest<Record<string, unknown>, A>(
        `${service}/${method}`,
        ser(request[0]),
        de<A>(response),
        request[1],
        metadata(describe?.actionId),
        { deadline: Date.now() + calls.deadlineMs(kind) },
        (err, value) => resume(err ? Effect.fail(fromGrpc(method, err)) : Effect.succeed(value as A))
      )
      return Effect.sync(() => call.cancel())
    })
    return calls.call(method, kind, attempt, describe)
  }

  let batchLimit = GRPC_MESSAGE_LIMIT - BATCH_FRAMING
  let batchRead = true
  const digestArg = (d: Digest.Digest) => Proto.wire(d)
  const resource = (d: Digest.Digest) =>
    `${instanceName !== "" ? `${instanceName}/` : ""}blobs/${d.hash}/${d.sizeBytes}`

  /**
   * A server that disables action-cache updates may have no action cache at all (bst-artifact-server registers none):
   * one lookup of a digest nobody has tells them apart (NOT_FOUND: a read-only cache; UNIMPLEMENTED: none).
   */
  const hasActionCache = unary(
    `${V2}ActionCache`,
    "GetActionResult",
    ["GetActionResultRequest", {
      instance_name: instanceName,
      action_digest: digestArg(Digest.empty)
    }],
    "ActionResult",
    "probe"
  ).pipe(
    Effect.as(true),
    Effect.catchIf((e) => e.code === "NOT_FOUND", () => Effect.succeed(true)),
    Effect.catchIf((e) => e.code === "UNIMPLEMENTED", () => Effect.succeed(false))
  )

  const capabilities: Transport["capabilities"] = Effect.map(
    unary<any>(
      `${V2}Capabilities`,
      "GetCapabilities",
      ["GetCapabilitiesRequest", { instance_name: instanceName }],
      "ServerCapabilities",
      "probe"
    ),
    (caps): Capabilities => {
      const cache = caps.cache_capabilities
      const max = Number(cache?.max_batch_total_size_bytes ?? 0)
      batchLimit = Math.min(max > 0 ? max : GRPC_MESSAGE_LIMIT, GRPC_MESSAGE_LIMIT) - BATCH_FRAMING
      const sha256 = (cache?.digest_function ?? []).includes(1) || (cache?.digest_function ?? []).length === 0
      const actionCache: Capabilities["actionCache"] = cache === undefined
        ? "none"
        : cache.action_cache_update_capabilities?.update_enabled === true
        ? "read-write"
        : "read"
      const v = (s: any) => (s === undefined ? "?" : `${s.major ?? 0}.${s.minor ?? 0}`)
      return {
        maxBatchBytes: max,
        actionCache,
        execution: caps.execution_capabilities?.exec_enabled === true,
        lines: [
          `REAPI ${v(caps.low_api_version)}–${v(caps.high_api_version)}, digest functions: ${
            sha256 ? "SHA256" : "no SHA256 (kiln needs it)"
          }`,
          `action cache: ${
            actionCache === "read-write"
              ? "read and write"
              : actionCache === "read"
              ? "read only (updates disabled)"
              : "none"
          }`,
          `batches up to ${max > 0 ? max : "4194304 (default)"} bytes`,
          `remote execution: ${caps.execution_capabilities?.exec_enabled === true ? "enabled" : "not offered"}`
        ]
      }
    }
  ).pipe(
    Effect.flatMap((caps) =>
      caps.actionCache !== "read"
        ? Effect.succeed(caps)
        : Effect.map(hasActionCache, (has): Capabilities =>
          has ? caps : {
            ...caps,
            actionCache: "none",
            lines: caps.lines.map((l) => l.startsWith("action cache:") ? "action cache: none (a CAS-only server)" : l)
          })
    )
  )

  const getActionResult: Transport["getActionResult"] = (action) =>
    Effect.map(
      unary<Record<string, unknown>>(
        `${V2}ActionCache`,
        "GetActionResult",
        ["GetActionResultRequest", {
          instance_name: instanceName,
          action_digest: digestArg(action)
        }],
        "ActionResult",
        "entry",
        { digest: Digest.format(action), actionId: action.hash }
      ),
      (result) => Option.some(Proto.encode("ActionResult", result))
    ).pipe(Effect.catchIf((e) => e.code === "NOT_FOUND", () => Effect.succeedNone))

  const updateActionResult: Transport["updateActionResult"] = (action, result) =>
    Effect.asVoid(unary(
      `${V2}ActionCache`,
      "UpdateActionResult",
      ["UpdateActionResultRequest", {
        instance_name: instanceName,
        action_digest: digestArg(action),
        action_result: Proto.decode("ActionResult", result)
      }],
      "ActionResult",
      "unary",
      { digest: Digest.format(action), actionId: action.hash }
    ))

  const findMissing: Transport["findMissing"] = (digests) =>
    Effect.gen(function*() {
      const wanted = distinct(digests)
      const missing: Array<Digest.Digest> = []
      for (let i = 0; i < wanted.length; i += FIND_MISSING_CHUNK) {
        const chunk = wanted.slice(i, i + FIND_MISSING_CHUNK)
        const res = yield* unary<{ missing_blob_digests?: Array<Proto.WireDigest> }>(
          `${V2}ContentAddressableStorage`,
          "FindMissingBlobs",
          ["FindMissingBlobsRequest", { instance_name: instanceName, blob_digests: chunk.map(digestArg) }],
          "FindMissingBlobsResponse",
          "lookup",
          { count: chunk.length }
        )
        for (const d of res.missing_blob_digests ?? []) {
          const digest = Proto.fromWire(d)
          if (digest !== undefined && digest.sizeBytes > 0) missing.push(digest)
        }
      }
      return missing
    })

  /** Splits blobs into batches under the limit; blobs too large for any batch go by ByteStream. */
  const plan = <B extends { readonly digest: Digest.Digest }>(items: ReadonlyArray<B>) => {
    const batches: Array<Array<B>> = []
    const streams: Array<B> = []
    let current: Array<B> = []
    let size = 0
    for (const item of items) {
      const cost = item.digest.sizeBytes + 128
      if (cost > batchLimit) {
        streams.push(item)
        continue
      }
      if (size + cost > batchLimit && current.length > 0) {
        batches.push(current)
        current = []
        size = 0
      }
      current.push(item)
      size += cost
    }
    if (current.length > 0) batches.push(current)
    return { batches, streams }
  }

  /**
   * Where a retried upload of `name` may go on from: what the server says it has committed, or 0 where it cannot
   * say (QueryWriteStatus is UNIMPLEMENTED on Bazel's worker, and an upload it never saw is NOT_FOUND).
   */
  const committedOf = (name: string, size: number): Effect.Effect<number> =>
    unary<{ committed_size?: number; complete?: boolean }>(
      "/google.bytestream.ByteStream",
      "QueryWriteStatus",
      ["google.bytestream.QueryWriteStatusRequest", { resource_name: name }],
      "google.bytestream.QueryWriteStatusResponse",
      "probe"
    ).pipe(
      Effect.map((s) => (s.complete === true ? size : Math.min(Number(s.committed_size ?? 0), size))),
      Effect.orElseSucceed(() => 0)
    )

  const write = (blob: Blob): Effect.Effect<void, RemoteError> => {
    const method = "ByteStream.Write"
    // One upload name across attempts, so that a retry can resume where the server says the last one got to.
    const name = `${
      instanceName !== "" ? `${instanceName}/` : ""
    }uploads/${randomUUID()}/blobs/${blob.digest.hash}/${blob.digest.sizeBytes}`
    let attempts = 0
    const attempt = Effect.flatMap(
      Effect.suspend(() => (attempts++ === 0 ? Effect.succeed(0) : committedOf(name, blob.digest.sizeBytes))),
      (from) => (from >= blob.digest.sizeBytes ? Effect.void : writeFrom(blob, name, from))
    )
    return calls.call(method, "transfer", attempt, { digest: Digest.format(blob.digest), bytes: blob.digest.sizeBytes })
  }

  const writeFrom = (blob: Blob, name: string, from: number): Effect.Effect<void, RemoteError> => {
    const method = "ByteStream.Write"
    return withProgress(
      calls.deadlineMs("transfer"),
      calls.totalMs("transfer", blob.digest.sizeBytes - from),
      (why) => fail(method, "DEADLINE_EXCEEDED", why),
      (progress) =>
        Effect.async<void, RemoteError>((resume) => {
          const stream = client.makeClientStreamRequest<Record<string, unknown>, { committed_size?: number }>(
            "/google.bytestream.ByteStream/Write",
            ser("google.bytestream.WriteRequest"),
            de("google.bytestream.WriteResponse"),
            metadata(),
            {},
            (err, res) => {
              if (err) return resume(Effect.fail(fromGrpc(method, err)))
              const committed = Number(res?.committed_size ?? 0)
              // A server that has the blob already may end the write early, committing the whole size.
              resume(
                committed === blob.digest.sizeBytes
                  ? Effect.void
                  : Effect.fail(fail(method, "DATA_LOSS", `committed ${committed} of ${blob.digest.sizeBytes} bytes`))
              )
            }
          )
          let offset = from
          const pump = () => {
            while (offset < blob.bytes.length) {
              const end = Math.min(offset + CHUNK, blob.bytes.length)
              const ok = stream.write({
                ...(offset === from ? { resource_name: name } : {}),
                write_offset: offset,
                data: blob.bytes.subarray(offset, end),
                ...(end === blob.bytes.length ? { finish_write: true } : {})
              })
              offset = end
              progress()
              if (!ok) return void stream.once("drain", pump)
            }
            stream.end()
          }
          pump()
          return Effect.sync(() => stream.cancel())
        })
    )
  }

  /** One attempt at a blob's bytes, into `sink`, no more of them than its digest's size. */
  const readInto = (digest: Digest.Digest, sink: Sink): Effect.Effect<void, RemoteError> => {
    const method = "ByteStream.Read"
    return withProgress(
      calls.deadlineMs("transfer"),
      calls.totalMs("transfer", digest.sizeBytes),
      (why) => fail(method, "DEADLINE_EXCEEDED", why),
      (progress) =>
        Effect.async<void, RemoteError>((resume) => {
          const stream = client.makeServerStreamRequest<Record<string, unknown>, { data?: Uint8Array }>(
            "/google.bytestream.ByteStream/Read",
            ser("google.bytestream.ReadRequest"),
            de("google.bytestream.ReadResponse"),
            { resource_name: resource(digest) },
            metadata()
          )
          let size = 0
          stream.on("data", (res: { data?: Uint8Array }) => {
            progress()
            if (res.data === undefined) return
            size += res.data.length
            if (size > digest.sizeBytes) {
              stream.cancel()
              return resume(
                Effect.fail(fail(method, "DIGEST_MISMATCH", `${Digest.format(digest)}: the server sent more bytes`))
              )
            }
            if (!sink(res.data)) {
              stream.cancel()
              resume(
                Effect.fail(fail(method, "CANCELLED", `${Digest.format(digest)}: the download could not be written`))
              )
            }
          })
          stream.on("error", (err: grpc.ServiceError) => {
            const e = fromGrpc(method, err)
            // Bazel's worker checks what it reads: INTERNAL naming the digest means its copy is bad.
            resume(Effect.fail(
              e.code === "INTERNAL" && /digest/i.test(e.detail)
                ? new RemoteError({ ...e, corruptBlob: digest.hash })
                : e
            ))
          })
          stream.on("end", () => resume(Effect.void))
          return Effect.sync(() => stream.cancel())
        })
    )
  }

  const read = (digest: Digest.Digest): Effect.Effect<Blob, RemoteError> => {
    const method = "ByteStream.Read"
    const attempt = Effect.suspend(() => {
      const chunks: Array<Uint8Array> = []
      return readInto(digest, (chunk) => chunks.push(chunk) > 0).pipe(
        Effect.flatMap(() => verified(endpoint.display, method, digest, Buffer.concat(chunks)))
      )
    })
    return calls.call(method, "transfer", attempt, { digest: Digest.format(digest), bytes: digest.sizeBytes })
  }

  const downloadFile: Transport["downloadFile"] = (digest, file) => {
    const method = "ByteStream.Read"
    return Effect.zipRight(
      checkSizes(calls, method, [digest]),
      calls.call(
        method,
        "transfer",
        intoFile(endpoint.display, method, digest, file, (sink) => readInto(digest, sink)),
        { digest: Digest.format(digest), bytes: digest.sizeBytes }
      )
    )
  }

  const upload: Transport["upload"] = (blobs) =>
    Effect.gen(function*() {
      const { batches, streams } = plan(blobs.filter((b) => b.digest.sizeBytes > 0))
      yield* Effect.forEach(batches, (batch) => uploadBatch(batch), { concurrency: 4, discard: true })
      yield* Effect.forEach(streams, write, { concurrency: 4, discard: true })
    })

  const uploadBatch = (batch: ReadonlyArray<Blob>): Effect.Effect<void, RemoteError> =>
    Effect.gen(function*() {
      const bytes = batch.reduce((n, b) => n + b.digest.sizeBytes, 0)
      const res = yield* unary<
        { responses?: Array<{ digest?: Proto.WireDigest; status?: { code?: number; message?: string } }> }
      >(
        `${V2}ContentAddressableStorage`,
        "BatchUpdateBlobs",
        ["BatchUpdateBlobsRequest", {
          instance_name: instanceName,
          requests: batch.map((b) => ({ digest: digestArg(b.digest), data: b.bytes }))
        }],
        "BatchUpdateBlobsResponse",
        "transfer",
        { bytes }
      ).pipe(
        // A batch the server's message limit refused (Bazel's worker cancels it) goes blob by blob.
        Effect.catchIf((e) => e.code === "CANCELLED" || e.code === "RESOURCE_EXHAUSTED", () =>
          Effect.as(Effect.forEach(batch, write, { concurrency: 4, discard: true }), { responses: [] }))
      )
      const responses = res.responses ?? []
      for (let i = 0; i < responses.length; i++) {
        const r = responses[i]!
        if ((r.status?.code ?? 0) === 0) {
          continue
        }
        // Bazel's worker leaves the digest out of its responses: they are matched by position then.
        const digest = Proto.fromWire(r.digest) ?? batch[i]?.digest
        return yield* fail(
          "BatchUpdateBlobs",
          codeName(r.status?.code),
          `${digest ? Digest.format(digest) : "a blob"}: ${r.status?.message ?? ""}`
        )
      }
    })

  const downloadBatch = (batch: ReadonlyArray<Digest.Digest>): Effect.Effect<Array<Blob>, RemoteError> =>
    Effect.gen(function*() {
      const res = yield* unary<
        {
          responses?: Array<
            { digest?: Proto.WireDigest; data?: Uint8Array; status?: { code?: number; message?: string } }
          >
        }
      >(
        `${V2}ContentAddressableStorage`,
        "BatchReadBlobs",
        ["BatchReadBlobsRequest", { instance_name: instanceName, digests: batch.map(digestArg) }],
        "BatchReadBlobsResponse",
        "transfer",
        { bytes: batch.reduce((n, d) => n + d.sizeBytes, 0) }
      )
      const out: Array<Blob> = []
      const responses = res.responses ?? []
      for (let i = 0; i < batch.length; i++) {
        const r = responses[i]
        const digest = Proto.fromWire(r?.digest) ?? batch[i]!
        if (r === undefined || (r.status?.code ?? 0) !== 0) {
          return yield* fail(
            "BatchReadBlobs",
            r === undefined ? "NOT_FOUND" : codeName(r.status?.code),
            Digest.format(digest)
          )
        }
        out.push(yield* verified(endpoint.display, "BatchReadBlobs", digest, r.data ?? new Uint8Array()))
      }
      return out
    })

  const download: Transport["download"] = (digests) =>
    Effect.gen(function*() {
      yield* checkSizes(calls, "ByteStream.Read", digests)
      const wanted = distinct(digests)
      if (!batchRead) return yield* Effect.forEach(wanted, read, { concurrency: 4 })
      const { batches, streams } = plan(wanted.map((digest) => ({ digest })))
      const batched = yield* Effect.forEach(batches, (b) => downloadBatch(b.map((x) => x.digest)), { concurrency: 4 })
        .pipe(
          Effect.catchIf((e) => e.code === "UNIMPLEMENTED", () => {
            batchRead = false
            return Effect.forEach(batches.flat(), (x) => Effect.map(read(x.digest), (b) => [b]), { concurrency: 4 })
          })
        )
      const streamed = yield* Effect.forEach(streams, (x) => read(x.digest), { concurrency: 4 })
      return [...batched.flat(), ...streamed]
    })

  const { execute } = GrpcExecute.make({
    client,
    calls,
    instanceName,
    endpoint: endpoint.display,
    metadata,
    fromGrpc,
    codeName,
    getActionResult
  })

  return {
    calls,
    downloadFile,
    execute,
    capabilities,
    getActionResult,
    updateActionResult,
    findMissing,
    upload,
    download,
    close: Effect.sync(() => client.close())
  }
}
