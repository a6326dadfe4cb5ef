/**
 * What the remote cache needs of a server, whichever protocol it speaks: REAPI over gRPC (`grpc/`) or Bazel's
 * HTTP cache (`http.ts`). Every download is checked against its digest here, in the transport, before anyone sees
 * it: an HTTP cache serves whatever was PUT.
 *
 * @internal
 */
import * as Effect from "effect/Effect"
import type * as Option from "effect/Option"
import { createHash } from "node:crypto"
import * as fs from "node:fs"
import * as Digest from "../../../domain/Digest.js"
import type { StoreError } from "../../../domain/StoreErrors.js"
import { ioError } from "../../../os/IoError.js"
import { writeAll } from "../../../os/WriteAll.js"
import type { Capabilities } from "../Capabilities.js"
import { RemoteError } from "../RemoteErrors.js"
import type { Calls } from "./calls.js"
import type { Executed } from "./grpc/execute.js"

export type { Capabilities }

export interface Blob {
  readonly digest: Digest.Digest
  readonly bytes: Uint8Array
}

export interface Transport {
  readonly calls: Calls
  /** Asks the server what it supports (Capabilities over gRPC, a HEAD over HTTP), once, with the probe's deadline. */
  readonly capabilities: Effect.Effect<Capabilities, RemoteError>
  /** The serialized `ActionResult` stored for an action; none on a miss. */
  readonly getActionResult: (action: Digest.Digest) => Effect.Effect<Option.Option<Uint8Array>, RemoteError>
  readonly updateActionResult: (action: Digest.Digest, result: Uint8Array) => Effect.Effect<void, RemoteError>
  /**
   * Which of these blobs the server lacks (never the empty blob: every server has it, whatever it says): for a hit's
   * check (`lookup`, the default: a lookup's budget) or for an upload or an execution's inputs (`query`: off the
   * build's path, with a transfer's deadline and breaker).
   */
  readonly findMissing: (
    digests: ReadonlyArray<Digest.Digest>,
    kind?: "lookup" | "query"
  ) => Effect.Effect<Array<Digest.Digest>, RemoteError>
  readonly upload: (blobs: ReadonlyArray<Blob>) => Effect.Effect<void, RemoteError>
  /** The blobs' bytes, each checked against its digest; a blob the server lacks fails the call with NOT_FOUND. */
  readonly download: (digests: ReadonlyArray<Digest.Digest>) => Effect.Effect<Array<Blob>, RemoteError>
  /**
   * One blob streamed into `file` (created, or emptied for each attempt), checked against its digest on the way: a
   * blob too large to hold in memory.
   */
  readonly downloadFile: (digest: Digest.Digest, file: string) => Effect.Effect<void, RemoteError | StoreError>
  /**
   * Learns, off any process's path, what the first download would otherwise have to ask before it can go (gRPC:
   * whether the server has BatchReadBlobs); never fails. Started once executions are sent: their results come back
   * all at once.
   */
  readonly prepareDownloads?: Effect.Effect<void>
  /** Runs an action the server has every input of (REAPI `Execution`; none over HTTP). */
  readonly execute?: (
    action: Digest.Digest,
    stallMs: number,
    skipCache: boolean
  ) => Effect.Effect<Executed, RemoteError>
  readonly close: Effect.Effect<void>
}

/** Fails unless `bytes` are exactly `digest`'s. */
export const verified = (
  endpoint: string,
  method: string,
  digest: Digest.Digest,
  bytes: Uint8Array
): Effect.Effect<Blob, RemoteError> => {
  const got = Digest.ofBytes(bytes)
  return got.hash === digest.hash && got.sizeBytes === digest.sizeBytes
    ? Effect.succeed({ digest, bytes })
    : Effect.fail(mismatch(endpoint, method, digest, got))
}

/** Bytes that came back as another digest than the one asked for: the server holds a corrupt blob. */
const mismatch = (endpoint: string, method: string, digest: Digest.Digest, got: Digest.Digest) =>
  new RemoteError({
    endpoint,
    method,
    code: "DIGEST_MISMATCH",
    detail: `${Digest.format(digest)} came back as ${Digest.format(got)}`,
    corruptBlob: digest.hash
  })

/**
 * Where a streamed download's bytes go: `false` when they could not be written, and the stream must stop.
 *
 * @internal
 */
export type Sink = (chunk: Uint8Array) => boolean

/**
 * One attempt of a download into `file`: `stream` feeds the sink, which writes and hashes each chunk; the bytes
 * are checked against `digest` at the end. A write that fails (a full disk) ends the attempt with its StoreError,
 * whatever the stream then says.
 */
export const intoFile = (
  endpoint: string,
  method: string,
  digest: Digest.Digest,
  file: string,
  stream: (sink: Sink) => Effect.Effect<void, RemoteError>
): Effect.Effect<void, RemoteError | StoreError> =>
  Effect.acquireUseRelease(
    Effect.try({ try: () => fs.openSync(file, "w", 0o600), catch: ioError(file, "cannot write a download") }),
    (fd) =>
      Effect.suspend(() => {
        const hasher = createHash("sha256")
        let size = 0
        let failure: StoreError | undefined
        const sink: Sink = (chunk) => {
          if (failure !== undefined) return false
          try {
            writeAll(fd, chunk)
          } catch (e) {
            failure = ioError(file, "cannot write a download")(e)
            return false
          }
          hasher.update(chunk)
          size += chunk.length
          return true
        }
        return stream(sink).pipe(
          Effect.catchAll((e): Effect.Effect<void, RemoteError | StoreError> =>
            Effect.fail(failure !== undefined ? failure : e)
          ),
          Effect.zipRight(Effect.suspend(() => {
            const got = { hash: hasher.digest("hex"), sizeBytes: size }
            return got.hash === digest.hash && got.sizeBytes === digest.sizeBytes
              ? Effect.void
              : Effect.fail(mismatch(endpoint, method, digest, got))
          }))
        )
      }),
    (fd) => Effect.sync(() => fs.closeSync(fd))
  )

/** Distinct non-empty digests, in their first order. */
export const distinct = (digests: ReadonlyArray<Digest.Digest>): Array<Digest.Digest> => {
  const seen = new Map<string, Digest.Digest>()
  for (const d of digests) if (d.sizeBytes > 0 && !seen.has(d.hash)) seen.set(d.hash, d)
  return [...seen.values()]
}

/**
 * Bounds on what a server may send. Whatever a response claims, kiln holds at most this much of it in memory:
 * an `ActionResult` lists outputs by digest and a `Tree` lists directories (kiln asks for no inline contents), so
 * even a large build's fit well within these, while a server sending more is broken or hostile. A blob is bounded
 * by its digest's size, and by {@link MAX_BLOB_BYTES} before any of it is asked for.
 */
/** 16 MiB: four times gRPC's default message limit, room for some 150,000 output files. */
export const MAX_ACTION_RESULT_BYTES = 16 * 1024 * 1024
/** 64 MiB: some 600,000 files and directories in one output directory. */
export const MAX_TREE_BYTES = 64 * 1024 * 1024
/** 64 GiB: a blob claiming more is refused unread (a digest's size is the server's word until the bytes are in). */
export const MAX_BLOB_BYTES = 64 * 1024 * 1024 * 1024

/** The error of a response past its bound: a server error like any other, never retried, never an outage. */
export const tooLarge = (endpoint: string, method: string, detail: string): RemoteError =>
  new RemoteError({ endpoint, method, code: "TOO_LARGE", detail })

/**
 * Fails with TOO_LARGE before any byte is asked for when one of `digests` is over `max`: a failed call of `method`,
 * logged and counted as any other.
 */
export const checkSizes = (
  calls: Calls,
  method: string,
  digests: ReadonlyArray<Digest.Digest>,
  max = MAX_BLOB_BYTES
): Effect.Effect<void, RemoteError> => {
  const over = digests.find((d) => d.sizeBytes > max)
  return over === undefined
    ? Effect.void
    : calls.call(
      method,
      "transfer",
      Effect.fail(tooLarge(calls.endpoint, method, `${Digest.format(over)} is over the ${max}-byte bound`)),
      { digest: Digest.format(over), bytes: over.sizeBytes }
    )
}

/**
 * Fails with DEADLINE_EXCEEDED when `run` makes no progress (calls `progress`) for `idleMs`, or has not finished
 * within `totalMs`: the idle bound catches a stalled transfer early, the total one a server that keeps a call alive
 * with a trickle of bytes. No `totalMs`: an execution's stream, bounded by the news it brings.
 */
export const withProgress = <A>(
  idleMs: number,
  totalMs: number | undefined,
  fail: (why: string) => RemoteError,
  run: (progress: () => void) => Effect.Effect<A, RemoteError>
): Effect.Effect<A, RemoteError> =>
  Effect.suspend(() => {
    let last = Date.now()
    const watch = Effect.suspend(() => {
      const left = last + idleMs - Date.now()
      return left <= 0 ? Effect.fail(fail("no progress")) : Effect.sleep(Math.min(left, 1_000))
    }).pipe(Effect.forever)
    const raced = Effect.raceFirst(run(() => (last = Date.now())), watch)
    return totalMs === undefined
      ? raced
      : Effect.timeoutFail(raced, { duration: totalMs, onTimeout: () => fail("not finished in time") })
  })
