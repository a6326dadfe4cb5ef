/**
 * Running a process on a REAPI executor: its input root, `Command` and `Action` uploaded (FindMissingBlobs first;
 * a directory the server was given in this run is not walked again, so a `node_modules` shared by every process costs
 * its upload once), `Execute`, then its outputs brought into the local store as a remote cache hit's are. A server
 * that says inputs are missing (FAILED_PRECONDITION with violations, or Bazel's worker's bare NOT_FOUND) gets the
 * whole input root again, once. The inputs' side is in `executionInputs.ts`; both are functions over one `Deps`.
 *
 * @internal
 */
import type * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Option from "effect/Option"
import { actionMessages } from "../../../domain/ActionKey.js"
import * as Digest from "../../../domain/Digest.js"
import type { Process } from "../../../domain/Process.js"
import type { Entry } from "../../../domain/RemoteTier.js"
import type { StoreError } from "../../../domain/StoreErrors.js"
import type * as Tree from "../../../domain/Tree.js"
import type * as Store from "../../store/Store.js"
import { RemoteError } from "../RemoteErrors.js"
import type { UploadError } from "./cacheState.js"
import type { Calls } from "./calls.js"
import { forget, uploadInputs } from "./executionInputs.js"
import type { Gathered } from "./gathered.js"
import { type Executed, serverTimings } from "./grpc/execute.js"
import * as Proto from "./proto.js"
import * as Results from "./results.js"
import type { Blob, Transport } from "./transport.js"

/** How long past a process's timeout kiln waits for the executor to say it timed out, before it cancels it. */
const CLIENT_GRACE_MS = 5_000

export interface Deps {
  readonly store: Store.Service
  readonly transport: Transport
  readonly calls: Calls
  readonly endpoint: string
  /** Digests the server has been given or has confirmed in this run. */
  readonly present: Set<string>
  /** Blobs an upload is sending now (an execution's inputs, the journal's): another waits for it instead. */
  readonly inFlight: Map<string, Deferred.Deferred<void, UploadError>>
  readonly fetchTrees: (digests: ReadonlyArray<Digest.Digest>) => Effect.Effect<Map<string, Tree.Tree>, RemoteError>
  readonly downloadFiles: (files: ReadonlyArray<Digest.Digest>) => Effect.Effect<void, RemoteError | StoreError>
  /**
   * Output files stay on the server until something needs them (`--cache-content defer`, the executor being the
   * cache): a consumer executed there never brings them here. Stdout and stderr come at once, for reports.
   */
  readonly deferOutputs?: boolean
  /**
   * Where the executor is the cache and hits are read: an answer from its action cache (`cached_result`) taken as a
   * lookup's hit is (see `lookup.ts`); None when it is no usable hit, and the action runs afresh.
   */
  readonly takeHit?: (
    process: Process,
    key: Digest.Digest,
    result: Uint8Array
  ) => Effect.Effect<Option.Option<Entry>>
  /** Actions whose cached entry was found unusable in this run: executed without a look into the cache. */
  readonly stale?: ReadonlySet<string>
  /** Sends the few KiB an execution sends unasked (its messages, small directories) in calls shared with others. */
  readonly gathered?: Gathered
}

/** A remote execution's outcome, its outputs in the local store. */
export interface Ran {
  readonly exitCode: number | null
  readonly timedOut: boolean
  readonly stdoutDigest: Digest.Digest
  readonly stderrDigest: Digest.Digest
  readonly outputDigest: Digest.Digest
  /** The executor answered from its action cache: a remote hit, nothing ran. */
  readonly cached?: boolean
  readonly timings: Record<string, number>
}

/** Bounds the executions in flight (a semaphore's permit). */
type Slot = <A, E, R>(effect: Effect.Effect<A, E, R>) => Effect.Effect<A, E, R>

/** Brings a finished execution's outputs into the local store, laid out as capture lays them. */
const bringBack = (deps: Deps, process: Process, result: Uint8Array) =>
  Effect.gen(function*() {
    const down = Results.readRemote(result, process)
    if (Either.isLeft(down)) {
      return yield* new RemoteError({
        endpoint: deps.endpoint,
        method: "Execute",
        code: "INVALID_ARGUMENT",
        detail: down.left
      })
    }
    const trees = yield* deps.fetchTrees(down.right.directories.map((d) => d.tree))
    const refused = Results.refusedTrees(down.right, trees, process)
    if (refused !== undefined) {
      return yield* new RemoteError({
        endpoint: deps.endpoint,
        method: "Execute",
        code: "INVALID_ARGUMENT",
        detail: refused
      })
    }
    const files = Results.filesOf(down.right, trees)
    if (deps.deferOutputs === true) {
      yield* deps.downloadFiles([down.right.stdout, down.right.stderr].filter((d) => d.sizeBytes > 0))
      for (const f of files) deps.present.add(f.hash)
    } else {
      yield* deps.downloadFiles(files)
    }
    return { down: down.right, outputDigest: yield* Results.layOut(deps.store, down.right, trees) }
  })

/** A server that lets an action outrun its timeout is not waited for past it (and a grace for its answer). */
const bounded = (process: Process, execution: Effect.Effect<Executed, RemoteError>) =>
  process.timeoutMs === undefined
    ? execution
    : Effect.map(
      Effect.timeoutOption(execution, process.timeoutMs + CLIENT_GRACE_MS),
      Option.getOrElse((): Executed => ({
        code: "DEADLINE_EXCEEDED",
        message: "",
        missing: [],
        clientTimeout: true
      }))
    )

/** When the phases of one execution ended, for its timings; `waited`: its time waiting for an executor slot. */
interface Clock {
  readonly started: number
  readonly uploaded: number
  readonly waited: () => number
}

/** An execution that ended: what it says, its outputs brought back. */
const ranOf = (deps: Deps, process: Process, executed: Executed, clock: Clock) =>
  Effect.gen(function*() {
    const { started, uploaded } = clock
    if (executed.clientTimeout === true) {
      const waited = clock.waited()
      const out: Ran = {
        exitCode: null,
        timedOut: true,
        stdoutDigest: Digest.empty,
        stderrDigest: Digest.empty,
        outputDigest: Digest.empty,
        timings: { remoteUpload: uploaded - started, remoteWait: waited, remoteRun: Date.now() - uploaded - waited }
      }
      return out
    }
    const timedOut = executed.code === "DEADLINE_EXCEEDED"
    if (executed.result === undefined || (executed.code !== "OK" && !timedOut)) {
      return yield* new RemoteError({
        endpoint: deps.endpoint,
        method: "Execute",
        code: executed.code === "OK" ? "INTERNAL" : executed.code,
        detail: executed.message || "the execution gave no result"
      })
    }
    const waited = clock.waited()
    const ran = Date.now()
    const { down, outputDigest } = yield* bringBack(deps, process, executed.result)
    const ended = Date.now()
    const out: Ran = {
      exitCode: timedOut ? null : down.exitCode,
      timedOut,
      stdoutDigest: down.stdout,
      stderrDigest: down.stderr,
      outputDigest,
      timings: {
        remoteUpload: uploaded - started,
        remoteWait: waited,
        remoteRun: ran - uploaded - waited,
        remoteDownload: ended - ran,
        ...(executed.serverTimings ?? serverTimings(
          Proto.decode<{ execution_metadata?: Record<string, { seconds?: number; nanos?: number }> }>(
            "ActionResult",
            executed.result
          ).execution_metadata
        ))
      }
    }
    return out
  })

/**
 * An answer from the executor's action cache taken as a remote hit, or None: it is no usable hit for `process`
 * (refused, or a failure it does not cache), and must run.
 */
const hitOf = (deps: Deps, process: Process, key: Digest.Digest, executed: Executed, clock: Clock) =>
  Effect.gen(function*() {
    if (executed.cached !== true || executed.code !== "OK" || executed.result === undefined) return Option.none<Ran>()
    if (deps.takeHit === undefined) return Option.none<Ran>()
    const waited = clock.waited()
    const answered = Date.now()
    const hit = yield* deps.takeHit(process, key, executed.result)
    return Option.map(hit, (entry): Ran => ({
      exitCode: entry.exitCode,
      timedOut: false,
      stdoutDigest: entry.stdoutDigest,
      stderrDigest: entry.stderrDigest,
      outputDigest: entry.outputDigest,
      cached: true,
      timings: {
        remoteUpload: clock.uploaded - clock.started,
        remoteWait: waited,
        remoteRun: answered - clock.uploaded - waited,
        remoteDownload: Date.now() - answered
      }
    }))
  })

/**
 * Runs `process` (its key `key`) on the executor; `stallMs`: how long a silent execution is waited for. `slot`
 * bounds the executions in flight, and only them: uploads and downloads go on beside, so the executor's slots are
 * never idle while kiln moves bytes. Unless `skipCache`, the executor looks the action up in its cache first (no
 * GetActionResult of kiln's own before it): an answer from there is a remote hit, or, when it is none for this
 * process, the action is executed again past the cache.
 */
const run = (
  deps: Deps,
  process: Process,
  key: Digest.Digest,
  stallMs: number,
  slot: Slot,
  skipCache: boolean
) =>
  Effect.gen(function*() {
    // The wait for an executor slot is measured apart: it is the bound's doing, not the executor's.
    let waited = 0
    const execute = (fresh: boolean) =>
      Effect.suspend(() => {
        const asked = Date.now()
        return slot(Effect.suspend(() => {
          waited += Date.now() - asked
          return deps.transport.execute!(key, stallMs, fresh)
        }))
      })
    const fresh = skipCache || deps.stale?.has(key.hash) === true
    const started = Date.now()
    const { action, command } = actionMessages(process)
    const messages: Array<Blob> = [
      { digest: Digest.ofBytes(command), bytes: command },
      { digest: key, bytes: action }
    ]
    yield* uploadInputs(deps, process.inputDigest, messages)
    const uploaded = Date.now()
    let executed = yield* bounded(process, execute(fresh))
    // The server lost inputs since they were sent (or never had them): all of them again, once.
    if (executed.code === "FAILED_PRECONDITION" || (executed.code === "NOT_FOUND" && executed.result === undefined)) {
      yield* Effect.logDebug(
        `${process.description}: the executor lacks inputs (${
          executed.missing.join(", ") || executed.message
        }): sending them again`
      )
      yield* forget(deps, process.inputDigest)
      for (const m of messages) deps.present.delete(m.digest.hash)
      yield* uploadInputs(deps, process.inputDigest, messages)
      executed = yield* bounded(process, execute(fresh))
    }
    const clock: Clock = { started, uploaded, waited: () => waited }
    const hit = yield* hitOf(deps, process, key, executed, clock)
    if (Option.isSome(hit)) return hit.value
    if (executed.cached === true && deps.takeHit !== undefined) executed = yield* bounded(process, execute(true))
    return yield* ranOf(deps, process, executed, clock)
  })

/** Executions over `deps`: one connection, and its record of what the server holds. */
export const make = (deps: Deps) => ({
  run: (
    process: Process,
    key: Digest.Digest,
    stallMs: number,
    slot: Slot,
    skipCache: boolean
  ) => run(deps, process, key, stallMs, slot, skipCache)
})
