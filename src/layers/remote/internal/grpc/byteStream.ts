/**
 * ByteStream over gRPC, for blobs too large for a batch: `Write` in 1 MiB chunks, resumed after a failed attempt
 * where the server says the last one got to, and `Read` into memory or a file, no more bytes than the digest's size.
 * A ReadResponse without `data` is empty.
 *
 * @internal
 */
import type * as grpc from "@grpc/grpc-js"
import * as Effect from "effect/Effect"
import { randomUUID } from "node:crypto"
import * as Digest from "../../../../domain/Digest.js"
import type { StoreError } from "../../../../domain/StoreErrors.js"
import { RemoteError } from "../../RemoteErrors.js"
import { type Blob, checkSizes, intoFile, type Sink, verified, withProgress } from "../transport.js"
import { type Connection, de, fail, fromGrpc, metadata, resource, ser, unary } from "./connection.js"

/** ByteStream chunks: Pants' 1 MiB (Bazel's 16 KiB cost a round of framing per 16 KiB). */
const CHUNK = 1024 * 1024

/**
 * Where a retried upload of `name` may go on from: what the server says it has committed, or 0 where it cannot
 * say (QueryWriteStatus is UNIMPLEMENTED on Bazel's worker, and an upload it never saw is NOT_FOUND).
 */
const committedOf = (conn: Connection, name: string, size: number): Effect.Effect<number> =>
  unary<{ committed_size?: number; complete?: boolean }>(
    conn,
    "/google.bytestream.ByteStream",
    "QueryWriteStatus",
    ["google.bytestream.QueryWriteStatusRequest", { resource_name: name }],
    "google.bytestream.QueryWriteStatusResponse",
    "probe"
  ).pipe(
    Effect.map((s) => (s.complete === true ? size : Math.min(Number(s.committed_size ?? 0), size))),
    Effect.orElseSucceed(() => 0)
  )

/** One blob uploaded by ByteStream, each retry going on from what the server has committed. */
export const write = (conn: Connection, blob: Blob): Effect.Effect<void, RemoteError> => {
  const method = "ByteStream.Write"
  const { instanceName } = conn.settings
  // One upload name across attempts, so that a retry can resume where the server says the last one got to.
  const name = `${
    instanceName !== "" ? `${instanceName}/` : ""
  }uploads/${randomUUID()}/blobs/${blob.digest.hash}/${blob.digest.sizeBytes}`
  let attempts = 0
  const attempt = Effect.flatMap(
    Effect.suspend(() => (attempts++ === 0 ? Effect.succeed(0) : committedOf(conn, name, blob.digest.sizeBytes))),
    (from) => (from >= blob.digest.sizeBytes ? Effect.void : writeFrom(conn, blob, name, from))
  )
  return conn.calls.call(method, "transfer", attempt, {
    digest: Digest.format(blob.digest),
    bytes: blob.digest.sizeBytes
  })
}

/** One attempt at an upload: the blob's bytes from `from` on. */
const writeFrom = (conn: Connection, blob: Blob, name: string, from: number): Effect.Effect<void, RemoteError> => {
  const method = "ByteStream.Write"
  const { calls, client } = conn
  return withProgress(
    calls.deadlineMs("transfer"),
    calls.totalMs("transfer", blob.digest.sizeBytes - from),
    (why) => fail(conn, method, "DEADLINE_EXCEEDED", why),
    (progress) =>
      Effect.async<void, RemoteError>((resume) => {
        const stream = client.makeClientStreamRequest<Record<string, unknown>, { committed_size?: number }>(
          "/google.bytestream.ByteStream/Write",
          ser("google.bytestream.WriteRequest"),
          de("google.bytestream.WriteResponse"),
          metadata(conn),
          {},
          (err, res) => {
            if (err) return resume(Effect.fail(fromGrpc(conn, method, err)))
            const committed = Number(res?.committed_size ?? 0)
            // A server that has the blob already may end the write early, committing the whole size.
            resume(
              committed === blob.digest.sizeBytes
                ? Effect.void
                : Effect.fail(
                  fail(conn, method, "DATA_LOSS", `committed ${committed} of ${blob.digest.sizeBytes} bytes`)
                )
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
const readInto = (conn: Connection, digest: Digest.Digest, sink: Sink): Effect.Effect<void, RemoteError> => {
  const method = "ByteStream.Read"
  const { calls, client } = conn
  return withProgress(
    calls.deadlineMs("transfer"),
    calls.totalMs("transfer", digest.sizeBytes),
    (why) => fail(conn, method, "DEADLINE_EXCEEDED", why),
    (progress) =>
      Effect.async<void, RemoteError>((resume) => {
        const stream = client.makeServerStreamRequest<Record<string, unknown>, { data?: Uint8Array }>(
          "/google.bytestream.ByteStream/Read",
          ser("google.bytestream.ReadRequest"),
          de("google.bytestream.ReadResponse"),
          { resource_name: resource(conn, digest) },
          metadata(conn)
        )
        let size = 0
        stream.on("data", (res: { data?: Uint8Array }) => {
          progress()
          if (res.data === undefined) return
          size += res.data.length
          if (size > digest.sizeBytes) {
            stream.cancel()
            return resume(
              Effect.fail(fail(conn, method, "DIGEST_MISMATCH", `${Digest.format(digest)}: the server sent more bytes`))
            )
          }
          if (!sink(res.data)) {
            stream.cancel()
            resume(
              Effect.fail(
                fail(conn, method, "CANCELLED", `${Digest.format(digest)}: the download could not be written`)
              )
            )
          }
        })
        stream.on("error", (err: grpc.ServiceError) => {
          const e = fromGrpc(conn, method, err)
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

/** One blob read by ByteStream into memory, checked against its digest. */
export const read = (conn: Connection, digest: Digest.Digest): Effect.Effect<Blob, RemoteError> => {
  const method = "ByteStream.Read"
  const attempt = Effect.suspend(() => {
    const chunks: Array<Uint8Array> = []
    return readInto(conn, digest, (chunk) => chunks.push(chunk) > 0).pipe(
      Effect.flatMap(() => verified(conn.settings.endpoint.display, method, digest, Buffer.concat(chunks)))
    )
  })
  return conn.calls.call(method, "transfer", attempt, { digest: Digest.format(digest), bytes: digest.sizeBytes })
}

/** One blob read by ByteStream into `file`, hashed on the way. */
export const downloadFile = (
  conn: Connection,
  digest: Digest.Digest,
  file: string
): Effect.Effect<void, RemoteError | StoreError> => {
  const method = "ByteStream.Read"
  const { calls } = conn
  return Effect.zipRight(
    checkSizes(calls, method, [digest]),
    calls.call(
      method,
      "transfer",
      intoFile(conn.settings.endpoint.display, method, digest, file, (sink) => readInto(conn, digest, sink)),
      { digest: Digest.format(digest), bytes: digest.sizeBytes }
    )
  )
}
