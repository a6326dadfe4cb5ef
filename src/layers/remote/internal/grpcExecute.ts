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
import * as Digest from "../../../domain/Digest.js"
import { RemoteError } from "../RemoteErrors.js"
import type { Calls } from "./calls.js"
import * as Proto from "./proto.js"
import { withProgress } from "./transport.js"

/** What an execution ended with. */
export interface Executed {
  /** The serialized `ActionResult`, when the server gave one (a failure to run may give none). */
  readonly result?: Uint8Array
  /** The execution's status: OK, or why the action did not run to completion (DEADLINE_EXCEEDED: its timeout). */
  readonly code: string
  readonly message: string
  /** Missing inputs the server named (`FAILED_PRECONDITION` with `PreconditionFailure` violations). */
  readonly missing: ReadonlyArray<string>
  /** kiln stopped waiting: the process's timeout (and a grace) passed without an answer. */
  readonly clientTimeout?: boolean
}

export interface Deps {
  readonly client: grpc.Client
  readonly calls: Calls
  readonly instanceName: string
  readonly endpoint: string
  readonly metadata: (actionId?: string) => grpc.Metadata
  readonly fromGrpc: (method: string, err: grpc.ServiceError) => RemoteError
  readonly codeName: (code: number | undefined) => string
  readonly getActionResult: (action: Digest.Digest) => Effect.Effect<Option.Option<Uint8Array>, RemoteError>
}

const V2 = "/build.bazel.remote.execution.v2.Execution/"

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

export const make = (deps: Deps) => {
  const ser = (name: string) => (value: Record<string, unknown>) => Buffer.from(Proto.encode(name, value))
  const de = <A>(name: string) => (bytes: Buffer): A => Proto.decode<A>(name, bytes)
  const fail = (method: string, code: string, detail: string) =>
    new RemoteError({ endpoint: deps.endpoint, method, code, detail })

  const missingOf = (status: WireStatus): Array<string> =>
    (status.details ?? []).flatMap((any) => {
      if (any.type_url?.endsWith("google.rpc.PreconditionFailure") !== true || any.value === undefined) return []
      const failure = Proto.decode<{ violations?: Array<{ type?: string; subject?: string }> }>(
        "google.rpc.PreconditionFailure",
        any.value
      )
      return (failure.violations ?? []).filter((v) => v.type === "MISSING").map((v) => v.subject ?? "")
    })

  /** The outcome a finished `Operation` carries. */
  const outcome = (method: string, op: WireOperation): Effect.Effect<Executed, RemoteError> => {
    if (op.error !== undefined && (op.error.code ?? 0) !== 0) {
      return Effect.fail(fail(method, deps.codeName(op.error.code), op.error.message ?? ""))
    }
    if (op.response?.value === undefined) {
      return Effect.fail(fail(method, "INTERNAL", "a finished operation without a response"))
    }
    const response = Proto.decode<{
      result?: Record<string, unknown>
      status?: WireStatus
      message?: string
    }>("ExecuteResponse", op.response.value)
    const status = response.status ?? {}
    return Effect.succeed({
      ...(response.result !== undefined ? { result: Proto.encode("ActionResult", response.result) } : {}),
      code: deps.codeName(status.code ?? 0),
      message: status.message ?? response.message ?? "",
      missing: missingOf(status)
    })
  }

  /** One stream (`Execute` or `WaitExecution`) to its finished `Operation`; its name is kept for resumption. */
  const stream = (
    method: "Execute" | "WaitExecution",
    request: [string, Record<string, unknown>],
    action: Digest.Digest,
    stallMs: number,
    named: Named
  ): Effect.Effect<Executed, RemoteError> =>
    withProgress(
      stallMs,
      undefined,
      () => fail(method, "DEADLINE_EXCEEDED", `no news of the execution for ${stallMs} ms`),
      (progress) =>
        Effect.async<WireOperation, RemoteError>((resume) => {
          const call = deps.client.makeServerStreamRequest<Record<string, unknown>, WireOperation>(
            `${V2}${method}`,
            ser(request[0]),
            de("google.longrunning.Operation"),
            request[1],
            deps.metadata(action.hash)
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
            if (!done) resume(Effect.fail(deps.fromGrpc(method, err)))
          })
          call.on("end", () => {
            if (!done) {
              resume(Effect.fail(fail(method, "UNAVAILABLE", "the stream ended before the operation finished")))
            }
          })
          return Effect.sync(() => call.cancel())
        })
    ).pipe(Effect.flatMap((op) => outcome(method, op)))

  /** Asks the server to stop an operation (Bazel's worker cannot: UNIMPLEMENTED, and its action runs on). */
  const cancel = (name: string) =>
    deps.calls.call(
      "CancelOperation",
      "probe",
      Effect.async<void, RemoteError>((resume) => {
        const call = deps.client.makeUnaryRequest(
          "/google.longrunning.Operations/CancelOperation",
          ser("google.longrunning.CancelOperationRequest"),
          de("google.protobuf.Empty"),
          { name },
          deps.metadata(),
          { deadline: Date.now() + 2_000 },
          (err) => resume(err ? Effect.fail(deps.fromGrpc("CancelOperation", err)) : Effect.void)
        )
        return Effect.sync(() => call.cancel())
      }),
      { digest: name }
    ).pipe(Effect.ignore)

  /**
   * Executes an action whose inputs, `Command` and `Action` the server has. Interruption cancels the operation on the
   * server. A stream that breaks, ends early or stalls is re-attached with `WaitExecution` for as long as the server
   * still knows the operation: servers end long streams on purpose (Buildbarn), and one that says nothing while an
   * action runs (Bazel's worker) is asked again each `stallMs`. A stall is bounded by the process's own timeout, not
   * here; streams that break at once, with no news in between, are given up after `MAX_BREAKS`. An operation the
   * server forgot may have finished: the action cache is asked, and otherwise the caller's retry executes it again.
   */
  const execute = (
    action: Digest.Digest,
    stallMs: number,
    skipCache: boolean
  ): Effect.Effect<Executed, RemoteError> => {
    const named: Named = { news: 0 }
    const first = stream(
      "Execute",
      ["ExecuteRequest", {
        instance_name: deps.instanceName,
        ...(skipCache ? { skip_cache_lookup: true } : {}),
        action_digest: Proto.wire(action)
      }],
      action,
      stallMs,
      named
    )
    const resumed = (e: RemoteError): Effect.Effect<Executed, RemoteError> => {
      if (!resumable(e) || named.name === undefined) return Effect.fail(e)
      const name = named.name
      let breaks = 0
      let newsSeen = named.news
      let started = 0
      const reattach = Effect.suspend(() => {
        started = Date.now()
        return stream("WaitExecution", ["WaitExecutionRequest", { name }], action, stallMs, named).pipe(
          Effect.tapBoth({
            onSuccess: () => Effect.sync(() => deps.calls.note("WaitExecution", "OK", started, { digest: name })),
            onFailure: (f) => Effect.sync(() => deps.calls.note("WaitExecution", f.code, started, { digest: name }))
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
          Effect.flatMap(deps.getActionResult(action), (found) =>
            Option.isSome(found)
              ? Effect.succeed<Executed>({ result: found.value, code: "OK", message: "", missing: [] })
              : Effect.fail(e))
        )
      )
    }
    return deps.calls.call("Execute", "transfer", Effect.catchAll(first, resumed), { digest: Digest.format(action) })
      .pipe(
        Effect.onInterrupt(() => (named.name !== undefined ? cancel(named.name) : Effect.void))
      )
  }

  return { execute }
}
