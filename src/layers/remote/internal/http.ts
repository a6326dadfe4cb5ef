/**
 * Bazel's HTTP cache protocol (`GET`/`HEAD`/`PUT` of `/ac/<hash>` and `/cas/<hash>` under a prefix), as nginx with
 * WebDAV, bazel-remote and others serve it. `/ac/` holds serialized `ActionResult`s, as Bazel writes them, so Bazel
 * and kiln can share one cache. Such a server checks nothing: every download is verified against its digest. The
 * same TLS settings as gRPC apply (a CA, and a client certificate for mTLS).
 *
 * @internal
 */
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as http from "node:http"
import * as https from "node:https"
import * as Digest from "../../../domain/Digest.js"
import type { StoreError } from "../../../domain/StoreErrors.js"
import { RemoteError } from "../RemoteErrors.js"
import type { Settings } from "../RemoteSettings.js"
import type { Calls, Kind } from "./calls.js"
import {
  type Blob,
  type Capabilities,
  checkSizes,
  distinct,
  intoFile,
  MAX_ACTION_RESULT_BYTES,
  type Sink,
  tooLarge,
  type Transport,
  verified,
  withProgress
} from "./transport.js"

const CONCURRENCY = 8
/**
 * The largest body of an error status (a 404's page) drained to keep its connection, a larger one dropping it; and of
 * a PUT's answer, an acknowledgement kiln does not read.
 */
const ERROR_BODY_BYTES = 64 * 1024

/** HTTP answers as the gRPC codes the rest of kiln reasons with. */
const codeOf = (status: number): string =>
  status === 404
    ? "NOT_FOUND"
    : status === 401
    ? "UNAUTHENTICATED"
    : status === 403
    ? "PERMISSION_DENIED"
    : status === 400 || status === 405 || status === 411 || status === 413
    ? "INVALID_ARGUMENT"
    : status === 409
    ? "FAILED_PRECONDITION"
    : status === 429
    ? "RESOURCE_EXHAUSTED"
    : status === 408 || status === 504
    ? "DEADLINE_EXCEEDED"
    : status >= 500
    ? "UNAVAILABLE"
    : "UNKNOWN"

/**
 * What a status says, for its error: a 409 is the server's configuration, not an outage (Apache's WebDAV answers it
 * when a directory of the prefix is missing), and retrying it helps nothing.
 */
const detailOf = (status: number): string =>
  status === 409
    ? "HTTP 409: the server cannot store under this path (Apache answers so when a directory of the prefix is missing)"
    : `HTTP ${status}`

/** One endpoint's connections (a keep-alive agent) and what every request to it carries. */
export interface Connection {
  readonly settings: Settings
  readonly calls: Calls
  readonly secure: boolean
  readonly agent: http.Agent
  readonly headers: Readonly<Record<string, string>>
}

export const connect = (settings: Settings, calls: Calls, version: string): Connection => {
  const secure = settings.endpoint.scheme === "https"
  const agent = secure
    ? new https.Agent({
      keepAlive: true,
      maxSockets: CONCURRENCY * 2,
      ...(settings.ca !== undefined ? { ca: settings.ca } : {}),
      ...(settings.clientCert !== undefined ? { cert: settings.clientCert } : {}),
      ...(settings.clientKey !== undefined ? { key: settings.clientKey } : {})
    })
    : new http.Agent({ keepAlive: true, maxSockets: CONCURRENCY * 2 })
  const headers: Record<string, string> = { "user-agent": `kiln/${version}` }
  for (const [name, value] of settings.headers) headers[name] = value
  return { settings, calls, secure, agent, headers }
}

/**
 * One request: its status and body. A 2xx body over `limit` bytes fails the call the moment it passes it (TOO_LARGE);
 * other statuses are the answer, their bodies unread. A connection that makes no progress for the kind's deadline,
 * or that has not finished within its total one (for `bytes` moved), fails.
 */
const request = (
  conn: Connection,
  method: "GET" | "HEAD" | "PUT",
  path: string,
  kind: Kind,
  { body, bytes, limit, sink }: {
    /** The most a 2xx body may hold. */
    readonly limit: number
    /** What the call moves, for its total deadline. */
    readonly bytes: number
    readonly body?: Uint8Array
    /** Where a 2xx body goes instead of memory (its answer's body is then empty). */
    readonly sink?: Sink
  }
): Effect.Effect<{ status: number; body: Buffer }, RemoteError> => {
  const { agent, calls, headers, secure } = conn
  const { endpoint } = conn.settings
  const name = `${method} ${path.split("/")[0]}`
  const fail = (code: string, detail: string) =>
    new RemoteError({ endpoint: endpoint.display, method: name, code, detail })
  return withProgress(
    calls.deadlineMs(kind),
    calls.totalMs(kind, bytes),
    (why) => fail("DEADLINE_EXCEEDED", why),
    (progress) =>
      Effect.async<{ status: number; body: Buffer }, RemoteError>((resume) => {
        let settled = false
        const settle = (outcome: Effect.Effect<{ status: number; body: Buffer }, RemoteError>) => {
          if (settled) return
          settled = true
          resume(outcome)
        }
        const over = () => {
          req.destroy()
          settle(Effect.fail(tooLarge(endpoint.display, name, `${path}: the answer is over ${limit} bytes`)))
        }
        const req = (secure ? https : http).request({
          host: endpoint.host,
          port: endpoint.port,
          method,
          path: `${endpoint.prefix}/${path}`,
          agent,
          headers: body !== undefined ? { ...headers, "content-length": String(body.length) } : headers
        }, (res) => {
          progress()
          const status = res.statusCode ?? 0
          const declared = Number(res.headers["content-length"] ?? Number.NaN)
          if (status < 200 || status >= 300) {
            // The status is the answer. A small body is drained, keeping the connection; any other goes with it.
            if (declared <= ERROR_BODY_BYTES) res.resume()
            else req.destroy()
            return settle(Effect.succeed({ status, body: Buffer.alloc(0) }))
          }
          // A HEAD's length is the resource's, with no body to follow.
          if (method !== "HEAD" && declared > limit) return over()
          const chunks: Array<Buffer> = []
          let size = 0
          res.on("data", (c: Buffer) => {
            progress()
            size += c.length
            if (size > limit) return over()
            if (sink === undefined) return void chunks.push(c)
            if (!sink(c)) {
              req.destroy()
              settle(Effect.fail(fail("CANCELLED", `${path}: the download could not be written`)))
            }
          })
          res.on("error", (e) => settle(Effect.fail(fail("UNAVAILABLE", e.message))))
          res.on("end", () => settle(Effect.succeed({ status, body: Buffer.concat(chunks) })))
        })
        req.on("error", (e: NodeJS.ErrnoException) => settle(Effect.fail(fail("UNAVAILABLE", e.code ?? e.message))))
        if (body !== undefined) {
          // Written in slices, so that progress is seen while a large blob goes out.
          let offset = 0
          const pump = () => {
            while (offset < body.length) {
              const end = Math.min(offset + 1024 * 1024, body.length)
              const ok = req.write(body.subarray(offset, end))
              offset = end
              progress()
              if (!ok) return void req.once("drain", pump)
            }
            req.end()
          }
          pump()
        } else {
          req.end()
        }
        return Effect.sync(() => req.destroy())
      })
  ).pipe(
    Effect.flatMap((res) =>
      res.status >= 200 && res.status < 300
        ? Effect.succeed(res)
        : Effect.fail(fail(codeOf(res.status), detailOf(res.status)))
    )
  )
}

const described = (d: Digest.Digest) => ({ digest: Digest.format(d), bytes: d.sizeBytes })

export const capabilities = (conn: Connection): Effect.Effect<Capabilities, RemoteError> =>
  conn.calls.call(
    "HEAD ac",
    "probe",
    request(conn, "HEAD", `ac/${Digest.empty.hash}`, "probe", { limit: 0, bytes: 0 }).pipe(
      Effect.asVoid,
      Effect.catchIf((e) => e.code === "NOT_FOUND", () => Effect.void),
      Effect.as<Capabilities>({
        maxBatchBytes: 0,
        actionCache: "read-write",
        execution: false,
        lines: [
          "Bazel HTTP cache (/ac/ and /cas/)",
          `action cache: read and write (not validated by the server: kiln checks every download)`,
          "remote execution: not offered"
        ]
      })
    )
  )

export const getActionResult = (
  conn: Connection,
  action: Digest.Digest
): Effect.Effect<Option.Option<Uint8Array>, RemoteError> =>
  conn.calls.call(
    "GET ac",
    "entry",
    request(conn, "GET", `ac/${action.hash}`, "entry", { limit: MAX_ACTION_RESULT_BYTES, bytes: 0 }),
    described(action)
  ).pipe(
    Effect.map((res) => Option.some<Uint8Array>(res.body)),
    Effect.catchIf((e) => e.code === "NOT_FOUND", () => Effect.succeedNone)
  )

export const updateActionResult = (
  conn: Connection,
  action: Digest.Digest,
  result: Uint8Array
): Effect.Effect<void, RemoteError> =>
  Effect.asVoid(
    conn.calls.call(
      "PUT ac",
      "unary",
      request(conn, "PUT", `ac/${action.hash}`, "unary", {
        limit: ERROR_BODY_BYTES,
        bytes: result.length,
        body: result
      }),
      described(action)
    )
  )

const has = (conn: Connection, d: Digest.Digest, kind: "lookup" | "query"): Effect.Effect<boolean, RemoteError> =>
  conn.calls.call(
    "HEAD cas",
    kind,
    request(conn, "HEAD", `cas/${d.hash}`, kind, { limit: 0, bytes: 0 }),
    described(d)
  ).pipe(
    Effect.as(true),
    Effect.catchIf((e) => e.code === "NOT_FOUND", () => Effect.succeed(false))
  )

export const findMissing = (
  conn: Connection,
  digests: ReadonlyArray<Digest.Digest>,
  kind: "lookup" | "query" = "lookup"
): Effect.Effect<Array<Digest.Digest>, RemoteError> =>
  Effect.map(
    Effect.forEach(distinct(digests), (d) => Effect.map(has(conn, d, kind), (present) => (present ? undefined : d)), {
      concurrency: CONCURRENCY
    }),
    (found) => found.filter((d): d is Digest.Digest => d !== undefined)
  )

export const upload = (conn: Connection, blobs: ReadonlyArray<Blob>): Effect.Effect<void, RemoteError> =>
  Effect.forEach(
    blobs.filter((b) => b.digest.sizeBytes > 0),
    (b) =>
      conn.calls.call(
        "PUT cas",
        "transfer",
        request(conn, "PUT", `cas/${b.digest.hash}`, "transfer", {
          limit: ERROR_BODY_BYTES,
          bytes: b.bytes.length,
          body: b.bytes
        }),
        described(b.digest)
      ),
    { concurrency: CONCURRENCY, discard: true }
  )

export const download = (
  conn: Connection,
  digests: ReadonlyArray<Digest.Digest>
): Effect.Effect<Array<Blob>, RemoteError> =>
  Effect.zipRight(
    checkSizes(conn.calls, "GET cas", digests),
    Effect.forEach(
      distinct(digests),
      (d) =>
        conn.calls.call(
          "GET cas",
          "transfer",
          Effect.flatMap(
            request(conn, "GET", `cas/${d.hash}`, "transfer", { limit: d.sizeBytes, bytes: d.sizeBytes }),
            (res) => verified(conn.settings.endpoint.display, "GET cas", d, res.body)
          ),
          described(d)
        ),
      { concurrency: CONCURRENCY }
    )
  )

export const downloadFile = (
  conn: Connection,
  d: Digest.Digest,
  file: string
): Effect.Effect<void, RemoteError | StoreError> =>
  Effect.zipRight(
    checkSizes(conn.calls, "GET cas", [d]),
    conn.calls.call(
      "GET cas",
      "transfer",
      intoFile(conn.settings.endpoint.display, "GET cas", d, file, (sink) =>
        Effect.asVoid(
          request(conn, "GET", `cas/${d.hash}`, "transfer", { limit: d.sizeBytes, bytes: d.sizeBytes, sink })
        )),
      described(d)
    )
  )

export const make = (settings: Settings, calls: Calls, version: string): Transport => {
  const conn = connect(settings, calls, version)
  return {
    calls,
    downloadFile: (digest, file) => downloadFile(conn, digest, file),
    capabilities: capabilities(conn),
    getActionResult: (action) => getActionResult(conn, action),
    updateActionResult: (action, result) => updateActionResult(conn, action, result),
    findMissing: (digests, kind) => findMissing(conn, digests, kind),
    upload: (blobs) => upload(conn, blobs),
    download: (digests) => download(conn, digests),
    close: Effect.sync(() => conn.agent.destroy())
  }
}
