/**
 * The remote cache's uploads: a result offered goes into the journal, and a few fibers take the journal's entries up
 * in batches (blobs first, deduplicated across the actions in flight, then each `ActionResult`), off the build's
 * path. An entry leaves the journal only once the server has its result; what a run leaves, the next takes up first.
 *
 * @internal
 */
import * as Chunk from "effect/Chunk"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as Queue from "effect/Queue"
import * as Schedule from "effect/Schedule"
import { actionMessages } from "../../../domain/ActionKey.js"
import * as Digest from "../../../domain/Digest.js"
import type { RemoteTier } from "../../../domain/RemoteTier.js"
import type { Service } from "../RemoteCache.js"
import { type CacheState, failed, type UploadError } from "./cacheState.js"
import * as Journal from "./journal.js"
import { usable } from "./probe.js"
import * as Results from "./results.js"

/** Journal entries taken up together: their blobs asked about and sent in one go. */
const UPLOAD_BATCH = 64

/** Bytes of files read from the store and sent at a time. */
const UPLOAD_SLICE_BYTES = 64 * 1024 * 1024

type Message = { readonly digest: Digest.Digest; readonly bytes: Uint8Array }

/** A journal entry made ready to go up: its `ActionResult` and the blobs it names. */
type Ready = { readonly action: Digest.Digest; readonly pending: Journal.Pending; readonly up: Results.Up }

/**
 * Starts the upload fibers in the layer's scope (interrupted when it closes), and queues what earlier runs left in
 * the journal first.
 *
 * @internal
 */
export const start = (state: CacheState) =>
  Effect.gen(function*() {
    const workers = yield* Effect.forkScoped(
      Effect.forEach(
        Array.from({ length: state.options.uploadConcurrency ?? 4 }),
        () =>
          Effect.forever(
            Effect.flatMap(
              Queue.takeBetween(state.queue, 1, UPLOAD_BATCH),
              (c) => drainBatch(state, Chunk.toReadonlyArray(c))
            )
          ),
        { concurrency: "unbounded", discard: true }
      )
    )
    yield* Effect.addFinalizer(() => Fiber.interrupt(workers))
    if (state.writes && state.options.drain !== false) {
      yield* Effect.forEach(Journal.list(state.journalDir), (action) => enqueue(state, action), { discard: true })
    }
  })

/** A result to keep remotely: written into the journal, and queued. @internal */
export const offer = (state: CacheState): RemoteTier["Type"]["offer"] => (process, key, entry, executedRemotely) =>
  Effect.gen(function*() {
    // An executor that is the cache keeps what it ran itself; one apart from it does not.
    if (!state.writes || (executedRemotely === true && state.settings.executorEndpoint === undefined)) return
    // A server that cannot take results never will: nothing is queued for it (an unreachable one may come back).
    const caps = yield* Effect.either(Deferred.await(state.probed))
    if (Either.isRight(caps) && (caps.right.actionCache !== "read-write" || caps.right.withoutSha256 !== undefined)) {
      return
    }
    const { action, command } = actionMessages(process)
    yield* Journal.write(state.journalDir, {
      action: key,
      actionBytes: action,
      commandBytes: command,
      outputs: { outputFiles: process.outputFiles, outputDirectories: process.outputDirectories },
      entry
    })
    yield* enqueue(state, key)
  }).pipe(
    Effect.catchAll((e) => Effect.logWarning(`cannot queue the upload of ${process.description}: ${e.message}`))
  )

/** Waits for the uploads in flight, at most `waitMs`; says how many are left in the journal. @internal */
export const flush = (state: CacheState): Service["flush"] => (waitMs) =>
  Effect.gen(function*() {
    const idle = Effect.repeat(Effect.sync(() => state.inFlight), {
      until: (n) => n === 0,
      schedule: Schedule.spaced(50)
    })
    yield* Effect.timeout(idle, waitMs).pipe(Effect.ignore)
    return Journal.count(state.journalDir)
  })

const enqueue = (state: CacheState, action: Digest.Digest) =>
  Effect.suspend(() => {
    if (state.queued.has(action.hash)) return Effect.void
    state.queued.add(action.hash)
    state.inFlight++
    return Queue.offer(state.queue, action)
  })

/**
 * A batch of journal entries up: one FindMissingBlobs and one batched upload for all their blobs, then each
 * `ActionResult`, and the entry leaves the journal only once its result is there.
 */
const drainBatch = (state: CacheState, actions: ReadonlyArray<Digest.Digest>) =>
  Effect.gen(function*() {
    if ((yield* usable(state, "transfer"))?.actionCache !== "read-write") return
    const ready = (yield* Effect.forEach(actions, (action) => prepare(state, action))).filter((x) => x !== undefined)
    if (ready.length === 0) return
    // Blobs first, then the entries that name them: a server that validates its action cache (bazel-remote)
    // would refuse them otherwise, and one that does not would serve entries whose bytes are not there.
    const sent = yield* Effect.either(uploadBlobs(state, ready))
    if (sent._tag === "Left") return yield* uploadFailed(state, ready[0]!.action, sent.left)
    yield* Effect.forEach(ready, ({ action, up }) =>
      state.transport.updateActionResult(action, up.actionResult).pipe(
        Effect.zipRight(Effect.sync(() => {
          Journal.remove(state.journalDir, action)
          state.uploadedActions++
        })),
        Effect.catchAll((e) => uploadFailed(state, action, e))
      ), { concurrency: 8, discard: true })
  }).pipe(
    Effect.ensuring(Effect.sync(() => {
      for (const action of actions) state.queued.delete(action.hash)
      state.inFlight -= actions.length
    }))
  )

/** A journal entry made ready to go up; undefined to skip it. */
const prepare = (state: CacheState, action: Digest.Digest) =>
  Effect.gen(function*() {
    const pending = Journal.read(state.journalDir, action)
    if (pending === undefined) return undefined
    const up = yield* Results.toRemote(state.store, pending.entry, pending.outputs)
    if (up.absent !== undefined) {
      // A result missing a declared output may be a tool's silent failure: it stays local, never shared.
      yield* Effect.logDebug(`not uploading ${Digest.format(action)}: it did not make its output \`${up.absent}\``)
      Journal.remove(state.journalDir, action)
      return undefined
    }
    return { action, pending, up } satisfies Ready
  }).pipe(Effect.catchAll((e) => Effect.as(uploadFailed(state, action, e), undefined)))

/** Answers that say the server is set up so that it cannot take kiln's uploads: waiting will not change them. */
const REFUSALS = new Set(["FAILED_PRECONDITION", "PERMISSION_DENIED", "UNAUTHENTICATED", "INVALID_ARGUMENT"])

const uploadFailed = (state: CacheState, action: Digest.Digest, e: UploadError) =>
  e._tag === "RemoteError"
    ? Effect.zipRight(
      failed(state, e),
      Effect.suspend(() => {
        if (!REFUSALS.has(e.code) || state.refusalSaid) return Effect.void
        state.refusalSaid = true
        return Effect.logWarning(
          `remote cache ${state.endpoint} refused an upload (${e.method}: ${e.code}: ${e.detail}): uploads stay pending`
        )
      })
    )
    : e._tag === "MissingDigest"
    ? Effect.zipRight(
      Effect.logWarning(`upload of ${Digest.format(action)} dropped: ${e.message} is gone from the local store`),
      Effect.sync(() => Journal.remove(state.journalDir, action))
    )
    : Effect.logWarning(`upload of ${Digest.format(action)} failed: ${e.message}`)

/**
 * The blobs of a batch's entries up (their `Action`s, `Command`s, trees and files). One another action's upload is
 * asking about or sending already is waited for rather than sent twice.
 */
const uploadBlobs = (state: CacheState, items: ReadonlyArray<Ready>) =>
  Effect.gen(function*() {
    const messages = items.flatMap(({ pending, up }) => [
      { digest: Digest.ofBytes(pending.actionBytes), bytes: pending.actionBytes },
      { digest: Digest.ofBytes(pending.commandBytes), bytes: pending.commandBytes },
      ...up.trees
    ])
    const files = items.flatMap((i) => i.up.files)
    const candidates = [
      ...new Map([...files, ...messages.map((m) => m.digest)].map((d) => [d.hash, d])).values()
    ]
      .filter((d) => !state.present.has(d.hash))
    const theirs = candidates.flatMap((d) => state.inFlightBlobs.get(d.hash) ?? [])
    const all = candidates.filter((d) => !state.inFlightBlobs.has(d.hash))
    const mine = yield* Deferred.make<void, UploadError>()
    for (const d of all) state.inFlightBlobs.set(d.hash, mine)
    yield* Effect.onExit(sendBlobs(state, messages, files, all), (exit) =>
      Effect.zipRight(
        Effect.sync(() => {
          for (const d of all) if (state.inFlightBlobs.get(d.hash) === mine) state.inFlightBlobs.delete(d.hash)
        }),
        Deferred.done(mine, Exit.asVoid(exit))
      ))
    // The entry may name them only once they are there, whoever sent them.
    yield* Effect.forEach(new Set(theirs), Deferred.await, { discard: true })
  })

/** Sends those of `all` the server lacks (or gave wrong bytes for): the messages from memory, files from the store. */
const sendBlobs = (
  state: CacheState,
  messages: ReadonlyArray<Message>,
  files: ReadonlyArray<Digest.Digest>,
  all: ReadonlyArray<Digest.Digest>
) =>
  Effect.gen(function*() {
    if (all.length === 0) return
    const missing = yield* state.transport.findMissing(all, "query")
    const wanted = new Set([
      ...missing.map((d) => d.hash),
      ...all.filter((d) => state.corrupt.has(d.hash)).map((d) => d.hash)
    ])
    const send = (blobs: ReadonlyArray<Message>) =>
      Effect.zipRight(
        state.transport.upload(blobs),
        Effect.sync(() => {
          state.calls.counters.uploadedBytes += blobs.reduce((n, b) => n + b.digest.sizeBytes, 0)
          for (const b of blobs) state.corrupt.delete(b.digest.hash)
        })
      )
    yield* send(messages.filter((m) => wanted.has(m.digest.hash)))
    // Files are read from the store a slice at a time, so a batch of large outputs is never all in memory.
    let slice: Array<Digest.Digest> = []
    let sliceBytes = 0
    const flushSlice = Effect.suspend(() => {
      const digests = slice
      slice = []
      sliceBytes = 0
      return Effect.flatMap(
        Effect.forEach(digests, (digest) => Effect.map(state.store.getFile(digest), (bytes) => ({ digest, bytes }))),
        send
      )
    })
    for (const d of new Map(files.filter((f) => wanted.has(f.hash)).map((f) => [f.hash, f])).values()) {
      slice.push(d)
      sliceBytes += d.sizeBytes
      if (sliceBytes >= UPLOAD_SLICE_BYTES) yield* flushSlice
    }
    yield* flushSlice
    for (const d of all) state.present.add(d.hash)
  })
