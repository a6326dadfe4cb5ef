/**
 * Every remote call goes through here: its deadline, its retries (exponential backoff with jitter, the server's
 * `RetryInfo` honoured, only for codes worth retrying), the endpoint's circuit breaker, the call log
 * (`--remote-log`: one JSON line per call) and the run's counters.
 *
 * @internal
 */
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Schedule from "effect/Schedule"
import * as fs from "node:fs"
import type { StoreError } from "../../domain/StoreErrors.js"
import { RemoteError } from "../RemoteErrors.js"

/**
 * What a call is, for its deadline: a lookup is cheap and must be quick, and an action-cache lookup (`entry`), which
 * the run waits on, is quick retries included; a transfer is bounded by its progress and its size.
 */
export type Kind = "probe" | "lookup" | "entry" | "unary" | "transfer"

/**
 * Codes a retry can help with (Bazel's list). INVALID_ARGUMENT, NOT_FOUND, PERMISSION_DENIED, UNIMPLEMENTED and a
 * digest mismatch never get better by asking again; neither does an INTERNAL that says the server's bytes are bad.
 */
const RETRYABLE = new Set(["UNAVAILABLE", "DEADLINE_EXCEEDED", "RESOURCE_EXHAUSTED", "ABORTED", "INTERNAL", "UNKNOWN"])

export const isRetryable = (e: RemoteError): boolean =>
  RETRYABLE.has(e.code) && !(e.code === "INTERNAL" && /digest|hash/i.test(e.detail))

/** Codes that say the endpoint is in trouble (rather than that this one request was wrong). */
const OUTAGE = new Set(["UNAVAILABLE", "DEADLINE_EXCEEDED", "RESOURCE_EXHAUSTED", "UNKNOWN", "CANCELLED"])

/** Consecutive outage failures that open the breaker, and how long it stays open before one call may probe. */
const BREAKER_THRESHOLD = 5
const BREAKER_OPEN_MS = 15_000

/**
 * The slowest average rate (bytes per second) a transfer may go at, after its idle deadline's worth of grace: far
 * below any link a build cache is used over, far above a server that keeps a call alive a byte at a time.
 */
export const MIN_RATE = 100 * 1024

/** What a call is about, for its log line: an action or blob, the bytes it moves, or how many digests it asks of. */
export interface Described {
  readonly digest?: string
  readonly bytes?: number
  readonly count?: number
}

export interface Counters {
  uploadedBytes: number
  downloadedBytes: number
  readonly errors: Record<string, number>
}

export interface Calls {
  readonly endpoint: string
  readonly counters: Counters
  /** The deadline of one attempt of a call of this kind without progress, in milliseconds. */
  readonly deadlineMs: (kind: Kind) => number
  /**
   * The total deadline of one attempt of a call of this kind moving `bytes`: a lookup's and a probe's are their idle
   * ones; a transfer's grows with its size, at {@link MIN_RATE}.
   */
  readonly totalMs: (kind: Kind, bytes?: number) => number
  /**
   * Runs one call (each attempt is `attempt`, which must apply `deadlineMs(kind)` itself: only the transport knows
   * how to cancel its request), with retries and the breaker; logs it and counts its errors. A `StoreError` (a
   * download streamed to a file that cannot be written) ends the call: it is this machine's, not the server's.
   */
  readonly call: <A, E extends RemoteError | StoreError = RemoteError>(
    method: string,
    kind: Kind,
    attempt: Effect.Effect<A, E>,
    describe?: Described
  ) => Effect.Effect<A, E | RemoteError>
  /**
   * Logs a step of a call already under `call` (a re-attached stream), without a retry or the breaker: its failures
   * are the call's to count.
   */
  readonly note: (method: string, status: string, startedMs: number, describe?: Described) => void
  /** Whether the breaker lets calls through now. */
  readonly open: () => boolean
  /** Closes the call log. */
  readonly close: Effect.Effect<void>
}

export interface CallsOptions {
  readonly endpoint: string
  readonly timeoutMs: number
  readonly logFile?: string
  /** Retries after the first attempt (default 3). */
  readonly retries?: number
}

export const make = (options: CallsOptions): Calls => {
  const counters: Counters = { uploadedBytes: 0, downloadedBytes: 0, errors: {} }
  let failures = 0
  let openUntil = 0
  const log = options.logFile !== undefined ? fs.openSync(options.logFile, "a") : undefined
  const deadlineMs = (kind: Kind) =>
    kind === "probe" || kind === "lookup" || kind === "entry" ? Math.min(options.timeoutMs, 2_000) : options.timeoutMs
  const totalMs = (kind: Kind, bytes = 0) =>
    kind === "probe" || kind === "lookup" || kind === "entry"
      ? deadlineMs(kind)
      : options.timeoutMs + Math.ceil((bytes / MIN_RATE) * 1000)

  const policy = Schedule.identity<RemoteError | StoreError>().pipe(
    Schedule.intersect(Schedule.exponential(Duration.millis(100), 2).pipe(Schedule.jittered)),
    Schedule.intersect(Schedule.recurs(options.retries ?? 3)),
    Schedule.whileInput((e: RemoteError | StoreError) =>
      e._tag === "RemoteError" && isRetryable(e) && Date.now() >= openUntil
    ),
    Schedule.modifyDelay(([[e]], delay) =>
      e._tag === "RemoteError" && e.retryDelayMs !== undefined
        ? Duration.millis(Math.min(e.retryDelayMs, 10_000))
        : Duration.min(delay, Duration.seconds(2))
    )
  )

  const record = (method: string, status: string, started: number, d?: Described) => {
    if (log === undefined) return
    const line = JSON.stringify({
      method,
      ...(d?.digest !== undefined ? { digest: d.digest } : {}),
      ...(d?.bytes !== undefined ? { bytes: d.bytes } : {}),
      ...(d?.count !== undefined ? { count: d.count } : {}),
      status,
      ms: Date.now() - started
    })
    try {
      fs.writeSync(log, `${line}\n`)
    } catch {
      // The log is a diagnostic: a full disk under it must not fail the remote call it describes.
    }
  }

  /** A failed attempt, in the run's counters and the breaker. */
  const count = (e: RemoteError) => {
    // NOT_FOUND is an answer (a miss), and UNIMPLEMENTED one the transport falls back on (BatchRead).
    if (e.code !== "NOT_FOUND" && e.code !== "UNIMPLEMENTED") {
      counters.errors[e.code] = (counters.errors[e.code] ?? 0) + 1
    }
    if (OUTAGE.has(e.code)) {
      failures++
      if (failures >= BREAKER_THRESHOLD) openUntil = Date.now() + BREAKER_OPEN_MS
    }
  }

  const call: Calls["call"] = <A, E extends RemoteError | StoreError>(
    method: string,
    kind: Kind,
    attempt: Effect.Effect<A, E>,
    describe?: Described
  ): Effect.Effect<A, E | RemoteError> =>
    Effect.suspend((): Effect.Effect<A, E | RemoteError> => {
      if (Date.now() < openUntil) {
        counters.errors["CIRCUIT_OPEN"] = (counters.errors["CIRCUIT_OPEN"] ?? 0) + 1
        return Effect.fail(
          new RemoteError({
            endpoint: options.endpoint,
            method,
            code: "UNAVAILABLE",
            detail: "circuit open after repeated failures"
          })
        )
      }
      const started = Date.now()
      let failedAttempts = 0
      const logged = attempt.pipe(
        Effect.tapBoth({
          onSuccess: () =>
            Effect.sync(() => {
              failures = 0
              record(method, "OK", started, describe)
            }),
          onFailure: (e) =>
            Effect.sync(() => {
              failedAttempts++
              if (e._tag !== "RemoteError") return record(method, "LOCAL_ERROR", started, describe)
              record(method, e.code, started, describe)
              count(e)
            })
        })
      )
      if (kind === "probe") return logged
      const retried = Effect.retry(logged, policy)
      if (kind !== "entry") return retried
      // An action-cache lookup's deadline bounds its retries too: a miss costs a local run, never more waiting.
      const overall = new RemoteError({
        endpoint: options.endpoint,
        method,
        code: "DEADLINE_EXCEEDED",
        detail: "no answer in time"
      })
      return retried.pipe(
        Effect.timeoutFail({ duration: deadlineMs(kind), onTimeout: () => overall }),
        Effect.tapError((e: E | RemoteError) =>
          Effect.sync(() => {
            if (e !== overall) return
            record(method, e.code, started, describe)
            // An attempt that failed already counted this call's error; a call cut short in its first one has not.
            if (failedAttempts === 0) count(e)
          })
        )
      )
    })

  return {
    endpoint: options.endpoint,
    counters,
    deadlineMs,
    totalMs,
    call,
    note: record,
    open: () => Date.now() >= openUntil,
    close: Effect.sync(() => {
      if (log !== undefined) fs.closeSync(log)
    })
  }
}
