/**
 * What the remote cache needs of a server, whichever protocol it speaks: REAPI over gRPC (`grpc.ts`) or Bazel's
 * HTTP cache (`http.ts`). Every download is checked against its digest here, in the transport, before anyone sees
 * it: an HTTP cache serves whatever was PUT.
 *
 * @internal
 */
import * as Effect from "effect/Effect"
import type * as Option from "effect/Option"
import * as Digest from "../../domain/Digest.js"
import type { Capabilities } from "../Capabilities.js"
import { RemoteError } from "../RemoteErrors.js"
import type { Calls } from "./calls.js"
import type { Executed } from "./grpcExecute.js"

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
  /** Which of these blobs the server lacks (never the empty blob: every server has it, whatever it says). */
  readonly findMissing: (digests: ReadonlyArray<Digest.Digest>) => Effect.Effect<Array<Digest.Digest>, RemoteError>
  readonly upload: (blobs: ReadonlyArray<Blob>) => Effect.Effect<void, RemoteError>
  /** The blobs' bytes, each checked against its digest; a blob the server lacks fails the call with NOT_FOUND. */
  readonly download: (digests: ReadonlyArray<Digest.Digest>) => Effect.Effect<Array<Blob>, RemoteError>
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
    : Effect.fail(
      new RemoteError({
        endpoint,
        method,
        code: "DIGEST_MISMATCH",
        detail: `${Digest.format(digest)} came back as ${Digest.format(got)}`,
        corruptBlob: digest.hash
      })
    )
}

/** Distinct non-empty digests, in their first order. */
export const distinct = (digests: ReadonlyArray<Digest.Digest>): Array<Digest.Digest> => {
  const seen = new Map<string, Digest.Digest>()
  for (const d of digests) if (d.sizeBytes > 0 && !seen.has(d.hash)) seen.set(d.hash, d)
  return [...seen.values()]
}

/**
 * Fails with DEADLINE_EXCEEDED when `run` makes no progress (calls `progress`) for `ms`: a transfer is bounded by
 * its progress, not by a total that would be too short for a large blob or too long for a stalled one.
 */
export const withProgress = <A>(
  ms: number,
  fail: () => RemoteError,
  run: (progress: () => void) => Effect.Effect<A, RemoteError>
): Effect.Effect<A, RemoteError> =>
  Effect.suspend(() => {
    let last = Date.now()
    const watch = Effect.suspend(() => {
      const left = last + ms - Date.now()
      return left <= 0 ? Effect.fail(fail()) : Effect.sleep(Math.min(left, 1_000))
    }).pipe(Effect.forever)
    return Effect.raceFirst(run(() => (last = Date.now())), watch)
  })
