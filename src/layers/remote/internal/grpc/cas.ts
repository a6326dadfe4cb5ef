/**
 * REAPI's `ContentAddressableStorage` over gRPC: FindMissingBlobs, and blobs up and down in batches under the
 * server's limit (and gRPC's 4 MiB), larger ones by ByteStream. A batch the server refuses as too large goes blob by
 * blob; BatchReadBlobs UNIMPLEMENTED falls back to ByteStream for good; batch responses without digests are matched
 * by position; the empty blob is never sent or fetched.
 *
 * @internal
 */
import * as Effect from "effect/Effect"
import * as Digest from "../../../../domain/Digest.js"
import type { RemoteError } from "../../RemoteErrors.js"
import * as Proto from "../proto.js"
import { type Blob, checkSizes, distinct, verified } from "../transport.js"
import { read, write } from "./byteStream.js"
import { codeName, type Connection, digestArg, fail, unary, V2 } from "./connection.js"

const FIND_MISSING_CHUNK = 10_000

export const findMissing = (
  conn: Connection,
  digests: ReadonlyArray<Digest.Digest>,
  kind: "lookup" | "query" = "lookup"
): Effect.Effect<Array<Digest.Digest>, RemoteError> =>
  Effect.gen(function*() {
    const wanted = distinct(digests)
    const missing: Array<Digest.Digest> = []
    for (let i = 0; i < wanted.length; i += FIND_MISSING_CHUNK) {
      const chunk = wanted.slice(i, i + FIND_MISSING_CHUNK)
      const res = yield* unary<{ missing_blob_digests?: Array<Proto.WireDigest> }>(
        conn,
        `${V2}ContentAddressableStorage`,
        "FindMissingBlobs",
        ["FindMissingBlobsRequest", { instance_name: conn.settings.instanceName, blob_digests: chunk.map(digestArg) }],
        "FindMissingBlobsResponse",
        kind,
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
const plan = <B extends { readonly digest: Digest.Digest }>(conn: Connection, items: ReadonlyArray<B>) => {
  const { batchLimit } = conn.learned
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

export const upload = (conn: Connection, blobs: ReadonlyArray<Blob>): Effect.Effect<void, RemoteError> =>
  Effect.gen(function*() {
    const { batches, streams } = plan(conn, blobs.filter((b) => b.digest.sizeBytes > 0))
    yield* Effect.forEach(batches, (batch) => uploadBatch(conn, batch), { concurrency: 4, discard: true })
    yield* Effect.forEach(streams, (blob) => write(conn, blob), { concurrency: 4, discard: true })
  })

type UpdateAnswer = {
  responses?: Array<{ digest?: Proto.WireDigest; status?: { code?: number; message?: string } }>
}

const uploadBatch = (conn: Connection, batch: ReadonlyArray<Blob>): Effect.Effect<void, RemoteError> =>
  Effect.suspend(() => {
    const bytes = batch.reduce((n, b) => n + b.digest.sizeBytes, 0)
    // A blob the server refused in a call that went through (its status in the answer, not the call's): the call's
    // failure all the same, counted in the run's errors and logged with its code, not as OK.
    const refusals = new WeakSet<RemoteError>()
    const refusal = (res: UpdateAnswer) => {
      const responses = res.responses ?? []
      for (let i = 0; i < responses.length; i++) {
        const r = responses[i]!
        if ((r.status?.code ?? 0) === 0) continue
        // Bazel's worker leaves the digest out of its responses: they are matched by position then.
        const digest = Proto.fromWire(r.digest) ?? batch[i]?.digest
        const e = fail(
          conn,
          "BatchUpdateBlobs",
          codeName(r.status?.code),
          `${digest ? Digest.format(digest) : "a blob"}: ${r.status?.message ?? ""}`
        )
        refusals.add(e)
        return e
      }
      return undefined
    }
    return unary<UpdateAnswer>(
      conn,
      `${V2}ContentAddressableStorage`,
      "BatchUpdateBlobs",
      ["BatchUpdateBlobsRequest", {
        instance_name: conn.settings.instanceName,
        requests: batch.map((b) => ({ digest: digestArg(b.digest), data: b.bytes }))
      }],
      "BatchUpdateBlobsResponse",
      "transfer",
      { bytes },
      refusal
    ).pipe(
      // A batch the server's message limit refused (Bazel's worker cancels it) goes blob by blob; a blob refused
      // on its own is no such limit.
      Effect.catchIf(
        (e) => (e.code === "CANCELLED" || e.code === "RESOURCE_EXHAUSTED") && !refusals.has(e),
        () => Effect.forEach(batch, (blob) => write(conn, blob), { concurrency: 4, discard: true })
      ),
      Effect.asVoid
    )
  })

const downloadBatch = (
  conn: Connection,
  batch: ReadonlyArray<Digest.Digest>
): Effect.Effect<Array<Blob>, RemoteError> =>
  Effect.gen(function*() {
    const res = yield* unary<
      {
        responses?: Array<
          { digest?: Proto.WireDigest; data?: Uint8Array; status?: { code?: number; message?: string } }
        >
      }
    >(
      conn,
      `${V2}ContentAddressableStorage`,
      "BatchReadBlobs",
      ["BatchReadBlobsRequest", { instance_name: conn.settings.instanceName, digests: batch.map(digestArg) }],
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
          conn,
          "BatchReadBlobs",
          r === undefined ? "NOT_FOUND" : codeName(r.status?.code),
          Digest.format(digest)
        )
      }
      out.push(yield* verified(conn.settings.endpoint.display, "BatchReadBlobs", digest, r.data ?? new Uint8Array()))
    }
    return out
  })

/**
 * Learns whether the server has BatchReadBlobs before any download needs to know (an empty batch, under the probe's
 * short deadline and without retries), so that the downloads of the first executions to finish go their way at once
 * instead of waiting on the one that asks. What it cannot learn (any other failure) is left to that first download.
 */
export const learnBatchRead = (conn: Connection): Effect.Effect<void> =>
  conn.learned.batchReadProbe.withPermit(Effect.suspend(() => {
    if (conn.learned.batchRead !== "unknown") return Effect.void
    return unary(
      conn,
      `${V2}ContentAddressableStorage`,
      "BatchReadBlobs",
      ["BatchReadBlobsRequest", { instance_name: conn.settings.instanceName, digests: [] }],
      "BatchReadBlobsResponse",
      "probe",
      { count: 0 }
    ).pipe(
      Effect.match({
        onFailure: (e) => {
          if (e.code === "UNIMPLEMENTED") conn.learned.batchRead = false
        },
        onSuccess: () => {
          conn.learned.batchRead = true
        }
      })
    )
  }))

export const download = (
  conn: Connection,
  digests: ReadonlyArray<Digest.Digest>
): Effect.Effect<Array<Blob>, RemoteError> =>
  Effect.gen(function*() {
    yield* checkSizes(conn.calls, "ByteStream.Read", digests)
    const wanted = distinct(digests)
    // Until the server has said whether it has BatchReadBlobs, downloads ask one at a time.
    return yield* conn.learned.batchRead === "unknown"
      ? conn.learned.batchReadProbe.withPermit(Effect.suspend(() => downloadLearned(conn, wanted)))
      : downloadLearned(conn, wanted)
  })

/** Blobs down, in batches unless the server is known to lack BatchReadBlobs; large ones by ByteStream. */
const downloadLearned = (conn: Connection, wanted: ReadonlyArray<Digest.Digest>) =>
  Effect.gen(function*() {
    if (conn.learned.batchRead === false) {
      return yield* Effect.forEach(wanted, (d) => read(conn, d), { concurrency: 4 })
    }
    const { batches, streams } = plan(conn, wanted.map((digest) => ({ digest })))
    const batched = yield* Effect.forEach(batches, (b) => downloadBatch(conn, b.map((x) => x.digest)), {
      concurrency: 4
    }).pipe(
      Effect.tap(() => {
        if (batches.length > 0) conn.learned.batchRead = true
      }),
      Effect.catchIf((e) => e.code === "UNIMPLEMENTED", () => {
        conn.learned.batchRead = false
        return Effect.forEach(batches.flat(), (x) => Effect.map(read(conn, x.digest), (b) => [b]), { concurrency: 4 })
      })
    )
    const streamed = yield* Effect.forEach(streams, (x) => read(conn, x.digest), { concurrency: 4 })
    return [...batched.flat(), ...streamed]
  })
