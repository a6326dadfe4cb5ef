/**
 * Every remote call goes through here: its deadline, its retries (exponential backoff with jitter, the server's
 * `RetryInfo` honoured, only for codes worth retrying), the endpoint's circuit breaker, the call log
 * (`--remote-log`: one JSON line per call) and the run's counters.
 *
 * @internal
 */
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as FiberRef from "effect/FiberRef"
import * as Schedule from "effect/Schedule"
import * as fs from "node:fs"
import type { StoreError } from "../../../domain/StoreErrors.js"
import { openAppend } from "../../../os/TextFile.js"
import { RemoteError } from "../RemoteErrors.js"

/**
 * What a call is, for its deadline: a lookup (`lookup`, a hit's check; `entry`, an action-cache lookup), which the run
 * waits on, is quick retries included; a `query` (FindMissingBlobs for an upload or an execution's inputs) and a
 * `unary` call get the transfer's idle deadline, off the build's path; a transfer is bounded by its progress and size.
 */
export type Kind = "probe" | "lookup" | "entry" | "query" | "unary" | "transfer"

/**
 * Which breaker judges a call: lookups (the probe, action-cache lookups and hits' checks, which the build waits on)
 * and transfers (uploads, downloads, executions) apart. A server whose lookups stall while its uploads go through
 * is in trouble for the build all the same; an upload's success must not keep the lookups' breaker shut.
 */
export type BreakerClass = "lookup" | "transfer"

export const classOf = (kind: Kind): BreakerClass =>
  kind === "probe" || kind === "lookup" || kind === "entry" ? "lookup" : "transfer"

/** The kinds bounded to {@link LOOKUP_MS}, retries included. */
const isLookup = (kind: Kind) => kind === "lookup" || kind === "entry"

/** The budget of a lookup, retries included, and of the probe: a miss costs a local run, never more waiting. */
export const LOOKUP_MS = 2_000

/**
 * Codes a retry can help with (Bazel's list). INVALID_ARGUMENT, NOT_FOUND, PERMISSION_DENIED, UNIMPLEMENTED and a
 * digest mismatch never get better by asking again; neither does an INTERNAL that says the server's bytes are bad.
 */
const RETRYABLE = new Set(["UNAVAILABLE", "DEADLINE_EXCEEDED", "RESOURCE_EXHAUSTED", "ABORTED", "INTERNAL", "UNKNOWN"])

export const isRetryable = (e: RemoteError): boolean =>
  RETRYABLE.has(e.code) && !(e.code === "INTERNAL" && /digest|hash/i.test(e.detail))

/** Codes that say the endpoint is in trouble (rather than that this one request was wrong). */
const OUTAGE = new Set(["UNAVAILABLE", "DEADLINE_EXCEEDED", "RESOURCE_EXHAUSTED", "UNKNOWN", "CANCELLED"])

/**
 * Consecutive outage failures of one method (or one step) that open its class's breaker, and how long it stays open
 * before calls may try again. Consecutive per method: a server whose action cache answers while its CAS hangs is in
 * trouble all the same, and the answers of the one must not hide the failures of the other. Any answer that is not an
 * outage (a hit, a miss, a refusal) ends a method's run of failures: scattered failures never add up.
 */
const BREAKER_THRESHOLD = 5
const BREAKER_OPEN_MS = 15_000
/** The longest a server's `RetryInfo` keeps a class's breaker open: past it, calls try again whatever it asked. */
const MAX_BACKOFF_MS = 5 * 60_000

/** One class's breaker: its methods' runs of failures, until when it is open, and what opened it, for the run's end. */
interface Breaker {
  readonly failures: Map<string, number>
  openUntil: number
  /** Times it opened in this run. */
  opened: number
  /** What opened it the first time: "5 × DEADLINE_EXCEEDED from GetActionResult". */
  why: string | undefined
}

/** How a class's breaker fared over the run, for the closing line. */
export interface BreakerReport {
  readonly opened: number
  readonly why: string
  /** Calls it turned away. */
  readonly refused: number
}

/**
 * The slowest average rate (bytes per second) a transfer may go at, after its idle deadline's worth of grace: far
 * below any link a build cache is used over, far above a server that keeps a call alive a byte at a time.
 */
export const MIN_RATE = 100 * 1024

/**
 * The failures counted in the step (`within`) a fiber runs in, fibers it forks included: a step past its deadline
 * counts one error only when none of its calls has counted its own.
 */
const stepFailures = FiberRef.unsafeMake<{ failed: number } | undefined>(undefined)

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
  /** Calls each breaker turned away, and lookups skipped while the lookups' one was open. */
  readonly refused: Record<BreakerClass, number>
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
   * Runs several calls as one step under one total deadline, retries included (checking a hit: its Trees and the
   * FindMissingBlobs that validates it, which would otherwise each get the retries an upload gets). Past it, the step
   * fails with DEADLINE_EXCEEDED: logged, and counted and fed to the breaker once, unless a call in it already was.
   */
  readonly within: <A, E>(method: string, ms: number, step: Effect.Effect<A, E>) => Effect.Effect<A, E | RemoteError>
  /** The total deadline of checking a hit whose Trees are `treeBytes` together: an entry's, and the Trees' transfer. */
  readonly hitCheckMs: (treeBytes: number) => number
  /**
   * Logs a step of a call already under `call` (a re-attached stream), without a retry or the breaker: its failures
   * are the call's to count.
   */
  readonly note: (method: string, status: string, startedMs: number, describe?: Described) => void
  /** Whether the class's breaker lets calls through now. */
  readonly open: (cls: BreakerClass) => boolean
  /** Notes `n` calls the caller did not make because the class's breaker is open (lookups skipped). */
  readonly skipped: (cls: BreakerClass, n?: number) => void
  /** Each class's breaker that opened in the run. */
  readonly breakers: () => Partial<Record<BreakerClass, BreakerReport>>
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

/** One more error of `code` in the run's counters. */
const bump = (counters: Counters, code: string) => {
  counters.errors[code] = (counters.errors[code] ?? 0) + 1
}

/** What a call or a step that ran out its total deadline fails with. */
const pastDeadline = (endpoint: string, method: string) =>
  new RemoteError({ endpoint, method, code: "DEADLINE_EXCEEDED", detail: "no answer in time" })

/** Appends a call's line to the `--remote-log` file, when there is one. */
const recordTo = (log: number | undefined) => (method: string, status: string, started: number, d?: Described) => {
  if (log === undefined) return
  const line = JSON.stringify({
    method,
    ...(d?.digest !== undefined ? { digest: d.digest } : {}),
    ...(d?.bytes !== undefined ? { bytes: d.bytes } : {}),
    ...(d?.count !== undefined ? { count: d.count } : {}),
    status,
    // When it started (epoch ms), so that the lines make a timeline of the run's calls.
    at: started,
    ms: Date.now() - started
  })
  try {
    fs.writeSync(log, `${line}\n`)
  } catch {
    // The log is a diagnostic: a full disk under it must not fail the remote call it describes.
  }
}

/** What a class's breaker costs while it is open, to follow the endpoint's name in its warning. */
const costOf = (cls: BreakerClass, seconds: number) =>
  cls === "lookup"
    ? `lookups are not asked for ${seconds}s: processes run locally meanwhile`
    : `transfers are not tried for ${seconds}s: uploads wait in the journal, hits and executions run locally`

/**
 * The two classes' breakers of one endpoint, and how a failure goes into them; `lookupMs` is a lookup's budget.
 */
const breakersOf = (endpoint: string, lookupMs: number) => {
  const breaker = (): Breaker => ({ failures: new Map(), openUntil: 0, opened: 0, why: undefined })
  const breakers: Record<BreakerClass, Breaker> = { lookup: breaker(), transfer: breaker() }
  const isOpen = (cls: BreakerClass) => Date.now() < breakers[cls].openUntil

  /**
   * A failure of `method` (an attempt, or a step past its deadline) in its class's breaker; the warning when that
   * opens it for the first time in the run. An answer that is no outage ends the method's run of failures. A lookup
   * the server asks to wait longer than a lookup's budget for (`RetryInfo`) is a miss, and the lookups' breaker opens
   * for as long as it asked.
   */
  const fail = (cls: BreakerClass, method: string, e: RemoteError): Effect.Effect<void> =>
    Effect.suspend(() => {
      const b = breakers[cls]
      if (!OUTAGE.has(e.code)) {
        b.failures.delete(method)
        return Effect.void
      }
      // An open breaker stays open for its time, not longer for the calls it turned away.
      if (isOpen(cls)) return Effect.void
      const n = (b.failures.get(method) ?? 0) + 1
      b.failures.set(method, n)
      const backOff = cls === "lookup" && e.retryDelayMs !== undefined && e.retryDelayMs > lookupMs
      if (n < BREAKER_THRESHOLD && !backOff) return Effect.void
      const ms = backOff ? Math.min(e.retryDelayMs!, MAX_BACKOFF_MS) : BREAKER_OPEN_MS
      b.openUntil = Date.now() + ms
      b.opened++
      if (b.why !== undefined) return Effect.void
      b.why = backOff
        ? `${method} answered ${e.code} asking kiln to wait ${Math.ceil(e.retryDelayMs! / 1000)}s`
        : `${n} × ${e.code} in a row from ${method}`
      return Effect.logWarning(`remote cache ${endpoint}: ${b.why}; ${costOf(cls, Math.ceil(ms / 1000))}`)
    })

  return { breakers, fail, isOpen }
}

/**
 * A call's retries: only codes worth it, not while its class's breaker is open, and never a lookup that stalled
 * (its deadline is its budget: a stalled lookup is a miss).
 */
const retryPolicy = (kind: Kind, retries: number, isOpen: (cls: BreakerClass) => boolean) =>
  Schedule.identity<RemoteError | StoreError>().pipe(
    Schedule.intersect(Schedule.exponential(Duration.millis(100), 2).pipe(Schedule.jittered)),
    Schedule.intersect(Schedule.recurs(retries)),
    Schedule.whileInput((e: RemoteError | StoreError) =>
      e._tag === "RemoteError" && isRetryable(e) && !isOpen(classOf(kind)) &&
      !(isLookup(kind) && e.code === "DEADLINE_EXCEEDED")
    ),
    Schedule.modifyDelay(([[e]], delay) =>
      e._tag === "RemoteError" && e.retryDelayMs !== undefined
        ? Duration.millis(Math.min(e.retryDelayMs, 10_000))
        : Duration.min(delay, Duration.seconds(2))
    )
  )

export const make = (options: CallsOptions): Calls => {
  const counters: Counters = { uploadedBytes: 0, downloadedBytes: 0, errors: {}, refused: { lookup: 0, transfer: 0 } }
  const { breakers, fail, isOpen } = breakersOf(options.endpoint, Math.min(options.timeoutMs, LOOKUP_MS))
  // Checked when the settings were read (`RemoteSettings.resolve`); one replaced since by what is not a file is not
  // written to.
  const opened = options.logFile !== undefined ? openAppend(options.logFile) : undefined
  const log = typeof opened === "number" ? opened : undefined
  const deadlineMs = (kind: Kind) =>
    kind === "probe" || isLookup(kind) ? Math.min(options.timeoutMs, LOOKUP_MS) : options.timeoutMs
  const totalMs = (kind: Kind, bytes = 0) =>
    kind === "probe" || isLookup(kind)
      ? deadlineMs(kind)
      : options.timeoutMs + Math.ceil((bytes / MIN_RATE) * 1000)

  // A schedule is a value: one per kind, not one built for every call.
  const policies = new Map<Kind, ReturnType<typeof retryPolicy>>()
  const policyOf = (kind: Kind) => {
    let policy = policies.get(kind)
    if (policy === undefined) policies.set(kind, policy = retryPolicy(kind, options.retries ?? 3, isOpen))
    return policy
  }

  const record = recordTo(log)

  /** A failed attempt of `method`, in the run's counters and its class's breaker. */
  const count = (cls: BreakerClass, method: string, e: RemoteError) => {
    // NOT_FOUND is an answer (a miss), and UNIMPLEMENTED one the transport falls back on (BatchRead).
    if (e.code !== "NOT_FOUND" && e.code !== "UNIMPLEMENTED") {
      bump(counters, e.code)
    }
    return fail(cls, method, e)
  }

  const call: Calls["call"] = <A, E extends RemoteError | StoreError>(
    method: string,
    kind: Kind,
    attempt: Effect.Effect<A, E>,
    describe?: Described
  ): Effect.Effect<A, E | RemoteError> =>
    Effect.suspend((): Effect.Effect<A, E | RemoteError> => {
      const cls = classOf(kind)
      if (isOpen(cls)) {
        bump(counters, "CIRCUIT_OPEN")
        counters.refused[cls]++
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
              breakers[cls].failures.delete(method)
              record(method, "OK", started, describe)
            }),
          onFailure: (e) =>
            Effect.suspend(() => {
              failedAttempts++
              if (e._tag !== "RemoteError") return Effect.sync(() => record(method, "LOCAL_ERROR", started, describe))
              record(method, e.code, started, describe)
              return count(cls, method, e)
            }).pipe(
              Effect.zipRight(FiberRef.get(stepFailures)),
              Effect.map((step) => {
                if (step !== undefined) step.failed++
              })
            )
        })
      )
      if (kind === "probe") return logged
      const retried = Effect.retry(logged, policyOf(kind))
      if (!isLookup(kind)) return retried
      // A lookup's deadline bounds its retries too: a miss costs a local run, never more waiting. Its error is made
      // only once the deadline passes: an error captures a stack and is checked against its schema.
      let overall: RemoteError | undefined
      return retried.pipe(
        Effect.timeoutFail({
          duration: deadlineMs(kind),
          onTimeout: () => (overall = pastDeadline(options.endpoint, method))
        }),
        Effect.tapError((e: E | RemoteError) =>
          Effect.suspend(() => {
            if (overall === undefined || e !== overall) return Effect.void
            record(method, e.code, started, describe)
            // An attempt that failed already counted this call's error; a call cut short in its first one has not.
            return failedAttempts === 0 ? count(cls, method, e) : Effect.void
          })
        )
      )
    })

  const within: Calls["within"] = <A, E>(method: string, ms: number, step: Effect.Effect<A, E>) =>
    Effect.suspend(() => {
      const started = Date.now()
      const region = { failed: 0 }
      let overall: RemoteError | undefined
      return Effect.locally(step, stepFailures, region).pipe(
        Effect.timeoutFail({ duration: ms, onTimeout: () => (overall = pastDeadline(options.endpoint, method)) }),
        Effect.tapBoth({
          onSuccess: () => Effect.sync(() => breakers.lookup.failures.delete(method)),
          // The step is one failure for the breaker, however many of its calls failed, and counted once.
          onFailure: (e: E | RemoteError) =>
            Effect.suspend(() => {
              if (overall !== undefined && e === overall) {
                record(method, overall.code, started)
                if (region.failed === 0) bump(counters, overall.code)
              }
              return e instanceof RemoteError ? fail("lookup", method, e) : Effect.void
            })
        })
      )
    })

  return {
    endpoint: options.endpoint,
    counters,
    deadlineMs,
    totalMs,
    call,
    within,
    hitCheckMs: (treeBytes) => deadlineMs("entry") + Math.ceil((treeBytes / MIN_RATE) * 1000),
    note: record,
    open: (cls) => !isOpen(cls),
    skipped: (cls, n = 1) => {
      counters.refused[cls] += n
    },
    breakers: () => {
      const out: Partial<Record<BreakerClass, BreakerReport>> = {}
      for (const cls of ["lookup", "transfer"] as const) {
        const b = breakers[cls]
        if (b.why !== undefined) out[cls] = { opened: b.opened, why: b.why, refused: counters.refused[cls] }
      }
      return out
    },
    close: Effect.sync(() => {
      if (log !== undefined) fs.closeSync(log)
    })
  }
}
