/**
 * REAPI `Execution.Execute` over gRPC: one stream of `Operation`s per action, the last one `done` with an
 * `ExecuteResponse`. A stream that stalls (no new `Operation` for `--remote-timeout`), ends early or breaks is
 * re-attached with `WaitExecution`, then the action cache is asked (the action may have finished meanwhile); an
 * interrupted execution is cancelled on the server where it supports `CancelOperation`.
 *
 * @internal
 */
import type * as grpc from "@grpc/grpc-js"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Schedule from "effect/Schedule"
import * as Digest from "../../../../domain/Digest.js"
import type { RemoteError } from "../../RemoteErrors.js"
import * as Proto from "../proto.js"
import { withProgress } from "../transport.js"
import { getActionResult } from "./actionCache.js"
import { codeName, type Connection, de, fail, fromGrpc, metadata, ser } from "./connection.js"

/** What an execution ended with. */
export interface Executed {
  /** The serialized `ActionResult`, when the server gave one (a failure to run may give none). */
  readonly result?: Uint8Array
  /** The server answered from its action cache (`cached_result`): nothing ran. */
  readonly cached?: boolean
  /** The queue and execution times the result's `ExecutedActionMetadata` gives, read with it. */
  readonly serverTimings?: Record<string, number>
  /** The execution's status: OK, or why the action did not run to completion (DEADLINE_EXCEEDED: its timeout). */
  readonly code: string
  readonly message: string
  /** Missing inputs the server named (`FAILED_PRECONDITION` with `PreconditionFailure` violations). */
  readonly missing: ReadonlyArray<string>
  /** kiln stopped waiting: the process's timeout (and a grace) passed without an answer. */
  readonly clientTimeout?: boolean
}

const EXECUTION = "/build.bazel.remote.execution.v2.Execution/"

/** Re-attached streams in a row that broke with no news in between, before kiln stops waiting on the operation. */
const MAX_BREAKS = 3

/** The pause before re-attaching to an operation: short, growing, at most 2 s. */
const REATTACH_SCHEDULE = Schedule.exponential(Duration.millis(200)).pipe(
  Schedule.jittered,
  Schedule.union(Schedule.spaced(Duration.seconds(2)))
)

/** Failures after which the operation may still be running on the server. */
const resumable = (e: RemoteError) =>
  e.code === "UNAVAILABLE" || e.code === "DEADLINE_EXCEEDED" || e.code === "CANCELLED"

/** The operation's name, once the server gave it, and how many `Operation`s its streams brought. */
interface Named {
  name?: string
  news: number
}

interface WireOperation {
  readonly name?: string
  readonly done?: boolean
  readonly error?: { code?: number; message?: string }
  readonly response?: { type_url?: string; value?: Uint8Array }
}

interface WireStatus {
  readonly code?: number
  readonly message?: string
  readonly details?: ReadonlyArray<{ type_url?: string; value?: Uint8Array }>
}

const missingOf = (status: WireStatus): Array<string> =>
  (status.details ?? []).flatMap((any) => {
    if (any.type_url?.endsWith("google.rpc.PreconditionFailure") !== true || any.value === undefined) return []
    const failure = Proto.decode<{ violations?: Array<{ type?: string; subject?: string }> }>(
      "google.rpc.PreconditionFailure",
      any.value
    )
    return (failure.violations ?? []).filter((v) => v.type === "MISSING").map((v) => v.subject ?? "")
  })

const millisOf = (t: { seconds?: number; nanos?: number } | undefined) =>
  t === undefined ? undefined : (t.seconds ?? 0) * 1000 + Math.floor((t.nanos ?? 0) / 1e6)

/** Queue and execution times the server measured (`ExecutedActionMetadata`), where it says. */
export const serverTimings = (
  m: Record<string, { seconds?: number; nanos?: number }> | undefined
): Record<string, number> => {
  if (m === undefined) return {}
  const queued = millisOf(m.queued_timestamp)
  const started = millisOf(m.worker_start_timestamp)
  const execStart = millisOf(m.execution_start_timestamp)
  const execEnd = millisOf(m.execution_completed_timestamp)
  return {
    ...(queued !== undefined && started !== undefined ? { remoteQueue: Math.max(0, started - queued) } : {}),
    ...(execStart !== undefined && execEnd !== undefined ? { remoteExecution: Math.max(0, execEnd - execStart) } : {})
  }
}

/** The outcome a finished `Operation` carries. */
const outcome = (conn: Connection, method: string, op: WireOperation): Effect.Effect<Executed, RemoteError> => {
  if (op.error !== undefined && (op.error.code ?? 0) !== 0) {
    return Effect.fail(fail(conn, method, codeName(op.error.code), op.error.message ?? ""))
  }
  if (op.response?.value === undefined) {
    return Effect.fail(fail(conn, method, "INTERNAL", "a finished operation without a response"))
  }
  const response = Proto.decode<{
    result?: Record<string, unknown> & {
      execution_metadata?: Record<string, { seconds?: number; nanos?: number }>
    }
    cached_result?: boolean
    status?: WireStatus
    message?: string
  }>("ExecuteResponse", op.response.value)
  const status = response.status ?? {}
  return Effect.succeed({
    ...(response.result !== undefined
      ? {
        result: Proto.encode("ActionResult", response.result),
        serverTimings: serverTimings(response.result.execution_metadata)
      }
      : {}),
    ...(response.cached_result === true ? { cached: true } : {}),
    code: codeName(status.code ?? 0),
    message: status.message ?? response.message ?? "",
    missing: missingOf(status)
  })
}

/** One stream (`Execute` or `WaitExecution`) to its finished `Operation`; its name is kept for resumption. */
const stream = (
  conn: Connection,
  method: "Execute" | "WaitExecution",
  request: [string, Record<string, unknown>],
  action: Digest.Digest,
  stallMs: number,
  named: Named
): Effect.Effect<Executed, RemoteError> =>
  withProgress(
    stallMs,
    undefined,
    () => fail(conn, method, "DEADLINE_EXCEEDED", `no news of the execution for ${stallMs} ms`),
    (progress) =>
      Effect.async<WireOperation, RemoteError>((resume) => {
        const call = conn.client.makeServerStreamRequest<Record<string, unknown>, WireOperation>(
          `${EXECUTION}${method}`,
          ser(request[0]),
          de("google.longrunning.Operation"),
          request[1],
          metadata(conn, action.hash)
        )
        let done = false
        call.on("data", (op: WireOperation) => {
          progress()
          named.news++
          if (op.name !== undefined && op.name !== "") named.name = op.name
          if (op.done === true && !done) {
            done = true
            resume(Effect.succeed(op))
          }
        })
        call.on("error", (err: grpc.ServiceError) => {
          if (!done) resume(Effect.fail(fromGrpc(conn, method, err)))
        })
        call.on("end", () => {
          if (!done) {
            resume(Effect.fail(fail(conn, method, "UNAVAILABLE", "the stream ended before the operation finished")))
          }
        })
        return Effect.sync(() => call.cancel())
      })
  ).pipe(Effect.flatMap((op) => outcome(conn, method, op)))

/** Asks the server to stop an operation (Bazel's worker cannot: UNIMPLEMENTED, and its action runs on). */
const cancel = (conn: Connection, name: string) =>
  conn.calls.call(
    "CancelOperation",
    "probe",
    Effect.async<void, RemoteError>((resume) => {
      const call = conn.client.makeUnaryRequest(
        "/google.longrunning.Operations/CancelOperation",
        ser("google.longrunning.CancelOperationRequest"),
        de("google.protobuf.Empty"),
        { name },
        metadata(conn),
        { deadline: Date.now() + 2_000 },
        (err) => resume(err ? Effect.fail(fromGrpc(conn, "CancelOperation", err)) : Effect.void)
      )
      return Effect.sync(() => call.cancel())
    }),
    { digest: name }
  ).pipe(Effect.ignore)

/**
 * After the first stream failed with `e`: the operation re-attached with `WaitExecution` while the server knows it,
 * then the action cache asked; `e` again when neither gives the outcome (or the operation was never named).
 */
const resumed = (
  conn: Connection,
  action: Digest.Digest,
  stallMs: number,
  named: Named,
  e: RemoteError
): Effect.Effect<Executed, RemoteError> => {
  if (!resumable(e) || named.name === undefined) return Effect.fail(e)
  const { calls } = conn
  const name = named.name
  let breaks = 0
  let newsSeen = named.news
  let started = 0
  const reattach = Effect.suspend(() => {
    started = Date.now()
    return stream(conn, "WaitExecution", ["WaitExecutionRequest", { name }], action, stallMs, named).pipe(
      Effect.tapBoth({
        onSuccess: () => Effect.sync(() => calls.note("WaitExecution", "OK", started, { digest: name })),
        onFailure: (f) => Effect.sync(() => calls.note("WaitExecution", f.code, started, { digest: name }))
      })
    )
  })
  const again = (f: RemoteError) => {
    if (!resumable(f)) return false
    if (named.news > newsSeen) {
      newsSeen = named.news
      breaks = 0
    }
    // Silent for the whole bound: a stall, waited out again. A server's own quick DEADLINE_EXCEEDED is a break.
    const stalled = f.code === "DEADLINE_EXCEEDED" && Date.now() - started >= stallMs
    return stalled || ++breaks <= MAX_BREAKS
  }
  return Effect.retry(reattach, { schedule: REATTACH_SCHEDULE, while: again }).pipe(
    // However re-attaching ended (NOT_FOUND: the server forgot it), the action may have finished meanwhile.
    Effect.catchAll(() =>
      Effect.flatMap(getActionResult(conn, action), (found) =>
        Option.isSome(found)
          ? Effect.succeed<Executed>({ result: found.value, code: "OK", message: "", missing: [] })
          : Effect.fail(e))
    )
  )
}

/**
 * Executes an action whose inputs, `Command` and `Action` the server has. Interruption cancels the operation on the
 * server. A stream that breaks, ends early or stalls is re-attached with `WaitExecution` for as long as the server
 * still knows the operation: servers end long streams on purpose (Buildbarn), and one that says nothing while an
 * action runs (Bazel's worker) is asked again each `stallMs`. A stall is bounded by the process's own timeout, not
 * here; streams that break at once, with no news in between, are given up after `MAX_BREAKS`. An operation the
 * server forgot may have finished: the action cache is asked, and otherwise the caller's retry executes it again.
 */
export const execute = (
  conn: Connection,
  action: Digest.Digest,
  stallMs: number,
  skipCache: boolean
): Effect.Effect<Executed, RemoteError> => {
  const named: Named = { news: 0 }
  const first = stream(
    conn,
    "Execute",
    ["ExecuteRequest", {
      instance_name: conn.settings.instanceName,
      ...(skipCache ? { skip_cache_lookup: true } : {}),
      action_digest: Proto.wire(action)
    }],
    action,
    stallMs,
    named
  )
  return conn.calls.call(
    "Execute",
    "transfer",
    Effect.catchAll(first, (e) => resumed(conn, action, stallMs, named, e)),
    { digest: Digest.format(action) }
  ).pipe(
    Effect.onInterrupt(() => (named.name !== undefined ? cancel(conn, named.name) : Effect.void))
  )
}
