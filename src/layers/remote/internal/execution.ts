/**
 * Running a process on a REAPI executor: its input root, `Command` and `Action` uploaded (FindMissingBlobs first;
 * a directory the server was given in this run is not walked again, so a `node_modules` shared by every process costs
 * its upload once), `Execute`, then its outputs brought into the local store as a remote cache hit's are. A server
 * that says inputs are missing (FAILED_PRECONDITION with violations, or Bazel's worker's bare NOT_FOUND) gets the
 * whole input root again, once.
 *
 * @internal
 */
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Option from "effect/Option"
import { actionMessages } from "../../../domain/ActionKey.js"
import * as Digest from "../../../domain/Digest.js"
import * as Directory from "../../../domain/Directory.js"
import type { Process } from "../../../domain/Process.js"
import type { StoreError } from "../../../domain/StoreErrors.js"
import type * as Tree from "../../../domain/Tree.js"
import type * as Store from "../../store/Store.js"
import { RemoteError } from "../RemoteErrors.js"
import type { Calls } from "./calls.js"
import type { Executed } from "./grpcExecute.js"
import * as Proto from "./proto.js"
import * as Results from "./results.js"
import type { Blob, Transport } from "./transport.js"

/** How long past a process's timeout kiln waits for the executor to say it timed out, before it cancels it. */
const CLIENT_GRACE_MS = 5_000

/** Directories and messages up to this size are sent without a FindMissingBlobs first (one round trip less). */
const SEND_UNASKED_BYTES = 64 * 1024

/** Blobs sent per upload call, so that a large input tree is never all in memory at once. */
const UPLOAD_CHUNK = 512

export interface Deps {
  readonly store: Store.Service
  readonly transport: Transport
  readonly calls: Calls
  readonly endpoint: string
  /** Digests the server has been given or has confirmed in this run. */
  readonly present: Set<string>
  readonly fetchTrees: (digests: ReadonlyArray<Digest.Digest>) => Effect.Effect<Map<string, Tree.Tree>, RemoteError>
  readonly downloadFiles: (files: ReadonlyArray<Digest.Digest>) => Effect.Effect<void, RemoteError | StoreError>
  /**
   * Output files stay on the server until something needs them (`--cache-content defer`, the executor being the
   * cache): a consumer executed there never brings them here. Stdout and stderr come at once, for reports.
   */
  readonly deferOutputs?: boolean
}

/** A remote execution's outcome, its outputs in the local store. */
export interface Ran {
  readonly exitCode: number | null
  readonly timedOut: boolean
  readonly stdoutDigest: Digest.Digest
  readonly stderrDigest: Digest.Digest
  readonly outputDigest: Digest.Digest
  readonly timings: Record<string, number>
}

const millisOf = (t: { seconds?: number; nanos?: number } | undefined) =>
  t === undefined ? undefined : (t.seconds ?? 0) * 1000 + Math.floor((t.nanos ?? 0) / 1e6)

/** Queue and execution times the server measured (`ExecutedActionMetadata`), where it says. */
const serverTimings = (result: Uint8Array): Record<string, number> => {
  const m = Proto.decode<{ execution_metadata?: Record<string, { seconds?: number; nanos?: number }> }>(
    "ActionResult",
    result
  ).execution_metadata
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

export const make = (deps: Deps) => {
  const { store, transport, present } = deps

  /** Every directory and file of a tree the server was not given in this run, with the directories' bytes. */
  const walk = (root: Digest.Digest) =>
    Effect.gen(function*() {
      const dirs: Array<Blob> = []
      const files = new Map<string, Digest.Digest>()
      const stack = [root]
      while (stack.length > 0) {
        const digest = stack.pop()!
        if (Digest.isEmpty(digest) || present.has(digest.hash)) continue
        const dir = yield* store.getDirectory(digest)
        dirs.push({ digest, bytes: Directory.encode(dir) })
        for (const f of dir.files) {
          if (f.digest.sizeBytes > 0 && !present.has(f.digest.hash)) files.set(f.digest.hash, f.digest)
        }
        for (const d of dir.directories) stack.push(d.digest)
      }
      return { dirs, files: [...files.values()] }
    })

  /** Sends what the server lacks of a tree and of the action's messages. */
  const uploadInputs = (root: Digest.Digest, messages: ReadonlyArray<Blob>) =>
    Effect.gen(function*() {
      const { dirs, files } = yield* walk(root)
      const inMemory = [...dirs, ...messages.filter((m) => !present.has(m.digest.hash))]
      // A few KiB of messages and directories cost less to send than to ask about: they go without a question.
      const askAll = inMemory.reduce((n, b) => n + b.bytes.length, 0) > SEND_UNASKED_BYTES
      const asked = [...(askAll ? inMemory.map((b) => b.digest) : []), ...files]
      const missing = new Set(asked.length === 0 ? [] : (yield* transport.findMissing(asked)).map((d) => d.hash))
      const sendNow = askAll ? inMemory.filter((b) => missing.has(b.digest.hash)) : inMemory
      const fromStore = files.filter((d) => missing.has(d.hash))
      for (let i = 0; i < fromStore.length; i += UPLOAD_CHUNK) {
        const chunk = yield* Effect.forEach(
          fromStore.slice(i, i + UPLOAD_CHUNK),
          (digest) => Effect.map(store.getFile(digest), (bytes): Blob => ({ digest, bytes }))
        )
        yield* transport.upload(chunk)
        deps.calls.counters.uploadedBytes += chunk.reduce((n, b) => n + b.digest.sizeBytes, 0)
      }
      yield* transport.upload(sendNow)
      deps.calls.counters.uploadedBytes += sendNow.reduce((n, b) => n + b.digest.sizeBytes, 0)
      for (const b of inMemory) present.add(b.digest.hash)
      for (const d of files) present.add(d.hash)
    })

  /** Forgets what the server was said to have of a tree: it lost some of it. */
  const forget = (root: Digest.Digest) =>
    Effect.gen(function*() {
      const stack = [root]
      while (stack.length > 0) {
        const digest = stack.pop()!
        if (!present.delete(digest.hash)) continue
        const dir = yield* store.getDirectory(digest)
        for (const f of dir.files) present.delete(f.digest.hash)
        for (const d of dir.directories) stack.push(d.digest)
      }
    })

  /** Brings a finished execution's outputs into the local store, laid out as capture lays them. */
  const bringBack = (process: Process, result: Uint8Array) =>
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
        for (const f of files) present.add(f.hash)
      } else {
        yield* deps.downloadFiles(files)
      }
      return { down: down.right, outputDigest: yield* Results.layOut(store, down.right, trees) }
    })

  /**
   * Runs `process` (its key `key`) on the executor; `stallMs`: how long a silent execution is waited for. `slot`
   * bounds the executions in flight, and only them: uploads and downloads go on beside, so the executor's slots are
   * never idle while kiln moves bytes.
   */
  const run = (
    process: Process,
    key: Digest.Digest,
    stallMs: number,
    slot: <A, E, R>(effect: Effect.Effect<A, E, R>) => Effect.Effect<A, E, R>,
    skipCache: boolean
  ) =>
    Effect.gen(function*() {
      // The wait for an executor slot is measured apart: it is the bound's doing, not the executor's.
      let waited = 0
      const execute = (action: Digest.Digest, stall: number) =>
        Effect.suspend(() => {
          const asked = Date.now()
          return slot(Effect.suspend(() => {
            waited += Date.now() - asked
            return transport.execute!(action, stall, skipCache)
          }))
        })
      const started = Date.now()
      const { action, command } = actionMessages(process)
      const messages: Array<Blob> = [
        { digest: Digest.ofBytes(command), bytes: command },
        { digest: key, bytes: action }
      ]
      yield* uploadInputs(process.inputDigest, messages)
      const uploaded = Date.now()
      // A server that lets an action outrun its timeout is not waited for past it (and a grace for its answer).
      const bounded = (run: Effect.Effect<Executed, RemoteError>) =>
        process.timeoutMs === undefined
          ? run
          : Effect.map(
            Effect.timeoutOption(run, process.timeoutMs + CLIENT_GRACE_MS),
            Option.getOrElse((): Executed => ({
              code: "DEADLINE_EXCEEDED",
              message: "",
              missing: [],
              clientTimeout: true
            }))
          )
      let executed = yield* bounded(execute(key, stallMs))
      // The server lost inputs since they were sent (or never had them): all of them again, once.
      if (executed.code === "FAILED_PRECONDITION" || (executed.code === "NOT_FOUND" && executed.result === undefined)) {
        yield* Effect.logDebug(
          `${process.description}: the executor lacks inputs (${
            executed.missing.join(", ") || executed.message
          }): sending them again`
        )
        yield* forget(process.inputDigest)
        for (const m of messages) present.delete(m.digest.hash)
        yield* uploadInputs(process.inputDigest, messages)
        executed = yield* bounded(execute(key, stallMs))
      }
      if (executed.clientTimeout === true) {
        return {
          exitCode: null,
          timedOut: true,
          stdoutDigest: Digest.empty,
          stderrDigest: Digest.empty,
          outputDigest: Digest.empty,
          timings: { remoteUpload: uploaded - started, remoteWait: waited, remoteRun: Date.now() - uploaded - waited }
        } satisfies Ran
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
      const ran = Date.now()
      const { down, outputDigest } = yield* bringBack(process, executed.result)
      const ended = Date.now()
      return {
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
          ...serverTimings(executed.result)
        }
      } satisfies Ran
    })

  return { run }
}
