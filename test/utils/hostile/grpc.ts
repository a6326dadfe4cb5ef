/**
 * A hostile (or merely broken) REAPI v2 server for tests, on `@grpc/grpc-js` with kiln's own protobuf schema
 * (`src/layers/remote/internal/proto.ts`), on 127.0.0.1 (port 0, the address read back), alive for the test's scope.
 *
 * By default it is an honest cache in memory: Capabilities (SHA256, action-cache updates enabled), the action cache,
 * FindMissingBlobs, BatchReadBlobs and BatchUpdateBlobs, ByteStream Read and Write over the same blobs; GetTree and
 * anything else is UNIMPLEMENTED. A test crafts answers instead: an `ActionResult` (a message or raw bytes) for one
 * action or for every action (`"*"`), blobs by hash, FindMissingBlobs saying nothing is missing, BatchReadBlobs
 * UNIMPLEMENTED (so that every read is a ByteStream), a ByteStream read that never ends, drips or hangs, and a
 * status or a hang for any unary method. Its `Execute` runs nothing: it answers from the action cache
 * (`cached_result`, unless `skip_cache_lookup`) and otherwise UNIMPLEMENTED; a client sees it as an executor once
 * `capabilities` say so. It records every call with its metadata.
 */
import * as grpc from "@grpc/grpc-js"
import { Effect } from "effect"
import * as Proto from "../../../src/layers/remote/internal/proto.js"

const V2 = "/build.bazel.remote.execution.v2."

/** What a `ByteStream.Read` of one blob answers. */
export type ReadAnswer =
  /** These bytes, in 1 MiB messages. */
  | { readonly _tag: "Bytes"; readonly bytes: Uint8Array }
  /**
   * 1 MiB messages for as long as the client takes them; after `stopAfter` bytes (if given) it goes quiet instead,
   * so that a kiln without bounds fails its test rather than taking the machine's memory.
   */
  | { readonly _tag: "Endless"; readonly stopAfter?: number }
  /** One byte every `everyMs`, forever. */
  | { readonly _tag: "Drip"; readonly everyMs: number }
  /** Nothing, never ending. */
  | { readonly _tag: "Hang" }
  /** This gRPC status. */
  | { readonly _tag: "Status"; readonly code: grpc.status }

export const ReadAnswer = {
  bytes: (bytes: Uint8Array): ReadAnswer => ({ _tag: "Bytes", bytes }),
  endless: (stopAfter?: number): ReadAnswer => ({ _tag: "Endless", ...(stopAfter ? { stopAfter } : {}) }),
  drip: (everyMs: number): ReadAnswer => ({ _tag: "Drip", everyMs }),
  hang: { _tag: "Hang" } as ReadAnswer,
  status: (code: grpc.status): ReadAnswer => ({ _tag: "Status", code })
}

/**
 * A unary method's fault: this status, no answer ever, or a status whose details carry a `RetryInfo` asking the
 * client to wait `retryDelayMs`.
 */
export type Fault =
  | grpc.status
  | "hang"
  | { readonly code: grpc.status; readonly retryDelayMs: number }
  /**
   * The call held until the test calls `release`, then answered honestly; `cancelled` says whether the client gave
   * the call up meanwhile (its deadline).
   */
  | { readonly hold: (release: () => void, cancelled: () => boolean) => void }

/** A fault for every call of a method, or one chosen by the call's index among that method's calls (from 0). */
export type Faults = Fault | ((n: number) => Fault | undefined)

/** The methods by their short names, as `received` and `faults` name them. */
export type Method =
  | "GetCapabilities"
  | "GetActionResult"
  | "UpdateActionResult"
  | "FindMissingBlobs"
  | "BatchReadBlobs"
  | "BatchUpdateBlobs"
  | "GetTree"
  | "Read"
  | "Write"
  | "Execute"

export interface Received {
  readonly method: Method
  /** The call's metadata, one value per key (binary values as Buffers). */
  readonly metadata: Record<string, grpc.MetadataValue>
  /** The request, decoded (for Write: its first message). */
  readonly request: Record<string, unknown>
}

export interface HostileGrpc {
  /** `grpc://127.0.0.1:PORT`, for `--remote-cache`. */
  readonly url: string
  /** `ActionResult`s by action hash, or for every action (`"*"`): a message in protobufjs's shape, or raw bytes. */
  readonly actionResults: Map<string, Record<string, unknown> | Uint8Array>
  /** Blobs by hash: what BatchRead and Read serve, and where BatchUpdate and Write put what they get. */
  readonly blobs: Map<string, Uint8Array>
  /** ByteStream reads by hash, or for every blob (`"*"`), instead of `blobs`. */
  readonly reads: Map<string, ReadAnswer>
  /** Faults of unary methods. */
  readonly faults: Map<Method, Faults>
  /** The `ServerCapabilities` answered (protobufjs's shape); the default allows updates with SHA256. */
  capabilities: Record<string, unknown>
  /** FindMissingBlobs: `honest` (what `blobs` lacks) or `none` (whatever is asked). */
  findMissing: "honest" | "none"
  /** BatchReadBlobs answers UNIMPLEMENTED (every read goes by ByteStream). */
  batchRead: boolean
  /**
   * BatchUpdateBlobs answers OK but refuses every blob with this status (keeping none), as a server that cannot
   * take a digest or is over its quota does; undefined (the default) takes them.
   */
  batchUpdateRefusal: grpc.status | undefined
  /** Every call, in order of arrival. */
  readonly received: ReadonlyArray<Received>
  /** Data bytes ByteStream.Read has sent so far, over all calls. */
  readonly readBytes: () => number
}

const CHUNK = 1024 * 1024

type Handler = grpc.UntypedHandleCall

/** A method's definition: requests decoded with kiln's schema; responses encoded, raw bytes passed through. */
const method = (
  path: string,
  request: string,
  response: string,
  responseStream = false,
  requestStream = false
): grpc.MethodDefinition<any, any> => ({
  path,
  requestStream,
  responseStream,
  requestSerialize: (v: Record<string, unknown>) => Buffer.from(Proto.encode(request, v)),
  requestDeserialize: (b: Buffer) => Proto.decode(request, b),
  responseSerialize: (v: Record<string, unknown> | Uint8Array) =>
    Buffer.from(v instanceof Uint8Array ? v : Proto.encode(response, v)),
  responseDeserialize: (b: Buffer) => Proto.decode(response, b)
})

const definitions = {
  GetCapabilities: method(`${V2}Capabilities/GetCapabilities`, "GetCapabilitiesRequest", "ServerCapabilities"),
  GetActionResult: method(`${V2}ActionCache/GetActionResult`, "GetActionResultRequest", "ActionResult"),
  UpdateActionResult: method(`${V2}ActionCache/UpdateActionResult`, "UpdateActionResultRequest", "ActionResult"),
  FindMissingBlobs: method(
    `${V2}ContentAddressableStorage/FindMissingBlobs`,
    "FindMissingBlobsRequest",
    "FindMissingBlobsResponse"
  ),
  BatchReadBlobs: method(
    `${V2}ContentAddressableStorage/BatchReadBlobs`,
    "BatchReadBlobsRequest",
    "BatchReadBlobsResponse"
  ),
  BatchUpdateBlobs: method(
    `${V2}ContentAddressableStorage/BatchUpdateBlobs`,
    "BatchUpdateBlobsRequest",
    "BatchUpdateBlobsResponse"
  ),
  Read: method(
    "/google.bytestream.ByteStream/Read",
    "google.bytestream.ReadRequest",
    "google.bytestream.ReadResponse",
    true
  ),
  Write: method(
    "/google.bytestream.ByteStream/Write",
    "google.bytestream.WriteRequest",
    "google.bytestream.WriteResponse",
    false,
    true
  ),
  Execute: method(`${V2}Execution/Execute`, "ExecuteRequest", "google.longrunning.Operation", true)
} satisfies Partial<Record<Method, grpc.MethodDefinition<any, any>>>

const defaultCapabilities = {
  cache_capabilities: {
    digest_function: [1],
    action_cache_update_capabilities: { update_enabled: true },
    max_batch_total_size_bytes: 4 * 1024 * 1024
  },
  low_api_version: { major: 2 },
  high_api_version: { major: 2, minor: 3 }
}

const statusError = (code: grpc.status, details: string, retryDelayMs?: number): grpc.ServiceError => {
  const metadata = new grpc.Metadata()
  if (retryDelayMs !== undefined) {
    const retryInfo = Proto.encode("google.rpc.RetryInfo", {
      retry_delay: { seconds: Math.floor(retryDelayMs / 1000), nanos: (retryDelayMs % 1000) * 1e6 }
    })
    metadata.set(
      "grpc-status-details-bin",
      Buffer.from(Proto.encode("google.rpc.Status", {
        code,
        message: details,
        details: [{ type_url: "type.googleapis.com/google.rpc.RetryInfo", value: retryInfo }]
      }))
    )
  }
  return Object.assign(new Error(details), { code, details, metadata })
}

/** A resource name's digest: `[instance/]blobs/<hash>/<size>`. */
const blobOf = (resource: string): { hash: string; size: number } | undefined => {
  const m = /(?:^|\/)blobs\/([0-9a-f]{64})\/(\d+)/.exec(resource)
  return m ? { hash: m[1]!, size: Number(m[2]) } : undefined
}

/** The server, shut down (every call and timer with it) when the scope closes. */
export const hostileGrpc = Effect.acquireRelease(
  Effect.async<{ server: grpc.Server; handle: HostileGrpc; timers: Set<NodeJS.Timeout> }, Error>((resume) => {
    const received: Array<Received> = []
    const timers = new Set<NodeJS.Timeout>()
    let readBytes = 0
    const handle: { -readonly [K in keyof HostileGrpc]: HostileGrpc[K] } = {
      url: "",
      actionResults: new Map(),
      blobs: new Map(),
      reads: new Map(),
      faults: new Map(),
      capabilities: defaultCapabilities,
      findMissing: "honest",
      batchRead: true,
      batchUpdateRefusal: undefined,
      received,
      readBytes: () => readBytes
    }
    const note = (m: Method, call: { metadata: grpc.Metadata }, request: Record<string, unknown>) =>
      received.push({ method: m, metadata: call.metadata.getMap(), request })
    const calls = new Map<Method, number>()
    /** The fault set for this call of `m`, if any. */
    const faultOf = (m: Method): Fault | undefined => {
      const n = calls.get(m) ?? 0
      calls.set(m, n + 1)
      const set = handle.faults.get(m)
      return typeof set === "function" ? set(n) : set
    }

    /** A unary handler, unless the test set a fault for it. */
    const unary = (
      m: Method,
      answer: (request: any) => Record<string, unknown> | Uint8Array | grpc.ServiceError
    ): Handler =>
    (call: grpc.ServerUnaryCall<any, any>, callback: grpc.sendUnaryData<any>) => {
      note(m, call, call.request)
      const fault = faultOf(m)
      if (fault === "hang") return
      const respond = () => {
        const out = answer(call.request)
        if (out instanceof Error) callback(out)
        else callback(null, out)
      }
      if (typeof fault === "object" && "hold" in fault) return fault.hold(respond, () => call.cancelled)
      if (typeof fault === "object") {
        return callback(statusError(fault.code, `${m}: a fault the test set`, fault.retryDelayMs))
      }
      if (fault !== undefined) return callback(statusError(fault, `${m}: a fault the test set`))
      respond()
    }

    const implementation: Record<Exclude<keyof typeof definitions, "Execute">, Handler> & { Execute?: Handler } = {
      GetCapabilities: unary("GetCapabilities", () => handle.capabilities),
      GetActionResult: unary("GetActionResult", (req: { action_digest?: Proto.WireDigest }) => {
        const hash = req.action_digest?.hash ?? ""
        return handle.actionResults.get(hash) ?? handle.actionResults.get("*") ??
          statusError(grpc.status.NOT_FOUND, `no result for ${hash}`)
      }),
      UpdateActionResult: unary(
        "UpdateActionResult",
        (req: { action_digest?: Proto.WireDigest; action_result?: Record<string, unknown> }) => {
          const result = req.action_result ?? {}
          handle.actionResults.set(req.action_digest?.hash ?? "", result)
          return result
        }
      ),
      FindMissingBlobs: unary("FindMissingBlobs", (req: { blob_digests?: Array<Proto.WireDigest> }) => ({
        missing_blob_digests: handle.findMissing === "none"
          ? []
          : (req.blob_digests ?? []).filter((d) => !handle.blobs.has(d.hash ?? ""))
      })),
      BatchReadBlobs: unary("BatchReadBlobs", (req: { digests?: Array<Proto.WireDigest> }) => {
        if (!handle.batchRead) return statusError(grpc.status.UNIMPLEMENTED, "BatchReadBlobs")
        return {
          responses: (req.digests ?? []).map((d) => {
            const bytes = handle.blobs.get(d.hash ?? "")
            return bytes !== undefined
              ? { digest: d, data: bytes, status: { code: 0 } }
              : { digest: d, status: { code: grpc.status.NOT_FOUND } }
          })
        }
      }),
      BatchUpdateBlobs: unary(
        "BatchUpdateBlobs",
        (req: { requests?: Array<{ digest?: Proto.WireDigest; data?: Uint8Array }> }) => ({
          responses: (req.requests ?? []).map((r) => {
            const refused = handle.batchUpdateRefusal
            if (refused !== undefined) return { digest: r.digest, status: { code: refused, message: "refused" } }
            handle.blobs.set(r.digest?.hash ?? "", r.data ?? new Uint8Array())
            return { digest: r.digest, status: { code: 0 } }
          })
        })
      ),
      Read: (call: grpc.ServerWritableStream<any, any>) => {
        note("Read", call, call.request)
        const blob = blobOf(String(call.request.resource_name ?? ""))
        const stored = blob !== undefined ? handle.blobs.get(blob.hash) : undefined
        const answer = (blob !== undefined ? handle.reads.get(blob.hash) : undefined) ?? handle.reads.get("*") ??
          (stored !== undefined ? ReadAnswer.bytes(stored) : ReadAnswer.status(grpc.status.NOT_FOUND))
        const send = (data: Uint8Array) => {
          readBytes += data.length
          return call.write(Proto.encode("google.bytestream.ReadResponse", { data }))
        }
        switch (answer._tag) {
          case "Status":
            return call.emit("error", statusError(answer.code, "Read: the answer the test set"))
          case "Hang":
            return
          case "Bytes":
            for (let o = 0; o < answer.bytes.length; o += CHUNK) send(answer.bytes.subarray(o, o + CHUNK))
            return call.end()
          case "Endless": {
            const chunk = Buffer.alloc(CHUNK, 0x41)
            let written = 0
            const pump = () => {
              while (!call.cancelled && !call.destroyed && written < (answer.stopAfter ?? Infinity)) {
                written += chunk.length
                if (!send(chunk)) return
              }
            }
            call.on("drain", pump)
            return pump()
          }
          case "Drip": {
            const timer = setInterval(() => send(Buffer.from("x")), answer.everyMs)
            timers.add(timer)
            const stop = () => {
              clearInterval(timer)
              timers.delete(timer)
            }
            call.on("cancelled", stop)
            call.on("close", stop)
          }
        }
      },
      Write: (call: grpc.ServerReadableStream<any, any>, callback: grpc.sendUnaryData<any>) => {
        const chunks: Array<Uint8Array> = []
        let name = ""
        let first = true
        call.on("data", (req: { resource_name?: string; data?: Uint8Array }) => {
          if (first) note("Write", call, { ...req, data: undefined })
          first = false
          if (req.resource_name !== undefined) name = req.resource_name
          if (req.data !== undefined) chunks.push(req.data)
        })
        call.on("end", () => {
          const blob = blobOf(name)
          const bytes = Buffer.concat(chunks)
          if (blob !== undefined) handle.blobs.set(blob.hash, bytes)
          callback(null, { committed_size: bytes.length })
        })
      }
    }

    const execute: Handler = (call: grpc.ServerWritableStream<any, any>) => {
      const request = call.request as { action_digest?: Proto.WireDigest; skip_cache_lookup?: boolean }
      note("Execute", call, call.request)
      const hash = request.action_digest?.hash ?? ""
      const found = request.skip_cache_lookup === true ? undefined : handle.actionResults.get(hash)
      if (found === undefined) return call.emit("error", statusError(grpc.status.UNIMPLEMENTED, "Execute runs nothing"))
      const result = found instanceof Uint8Array ? Proto.decode("ActionResult", found) : found
      const response = Proto.encode("ExecuteResponse", { result, cached_result: true, status: { code: 0 } })
      call.write({
        name: `operations/${hash}`,
        done: true,
        response: { type_url: "type.googleapis.com/build.bazel.remote.execution.v2.ExecuteResponse", value: response }
      })
      call.end()
    }
    implementation.Execute = execute

    const server = new grpc.Server()
    server.addService(definitions as grpc.ServiceDefinition, implementation)
    server.bindAsync("127.0.0.1:0", grpc.ServerCredentials.createInsecure(), (err, port) => {
      if (err) return resume(Effect.fail(err))
      handle.url = `grpc://127.0.0.1:${port}`
      resume(Effect.succeed({ server, timers, handle: handle as HostileGrpc }))
    })
  }).pipe(Effect.orDie),
  ({ server, timers }) =>
    Effect.sync(() => {
      for (const t of timers) clearInterval(t)
      server.forceShutdown()
    })
).pipe(Effect.map(({ handle }) => handle))
