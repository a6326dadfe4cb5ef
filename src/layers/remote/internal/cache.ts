/**
 * The remote cache's workings behind `RemoteCache.layer`: the probe, lookups of hits (one wave's together), the
 * upload journal's drain, and the executor's side. Loaded only when a run names a remote: its clients (grpc-js,
 * protobufjs) are no part of a run without one.
 *
 * @internal
 */
import * as Chunk from "effect/Chunk"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as Option from "effect/Option"
import * as Queue from "effect/Queue"
import * as Schedule from "effect/Schedule"
import { actionMessages } from "../../../domain/ActionKey.js"
import * as Digest from "../../../domain/Digest.js"
import type { Process } from "../../../domain/Process.js"
import type { Entry, RemoteTier } from "../../../domain/RemoteTier.js"
import type { StoreError } from "../../../domain/StoreErrors.js"
import type * as Tree from "../../../domain/Tree.js"
import { Store } from "../../store/Store.js"
import type { Capabilities } from "../Capabilities.js"
import { describe, type Options, probeFailure, type Service } from "../RemoteCache.js"
import { RemoteError } from "../RemoteErrors.js"
import type { Settings } from "../RemoteSettings.js"
import * as Blobs from "./blobs.js"
import { connect } from "./connect.js"
import * as Executor from "./executor.js"
import * as Journal from "./journal.js"
import * as Results from "./results.js"

type UploadError = RemoteError | Digest.MissingDigest | StoreError

/** Whether an error says an entry's bytes are gone or bad (rather than that the server is in trouble). */
const entryProblem = (e: RemoteError) =>
  e.code === "NOT_FOUND" || e.code === "DIGEST_MISMATCH" || e.code === "INVALID_ARGUMENT" ||
  e.code === "INTERNAL" || e.code === "TOO_LARGE"

const sumErrors = (a: Readonly<Record<string, number>>, b: Readonly<Record<string, number>>) => {
  const out = { ...a }
  for (const [code, n] of Object.entries(b)) out[code] = (out[code] ?? 0) + n
  return out
}

/** Journal entries taken up together: their blobs asked about and sent in one go. */
const UPLOAD_BATCH = 64

/** Bytes of files read from the store and sent at a time. */
const UPLOAD_SLICE_BYTES = 64 * 1024 * 1024

/**
 * The remote cache over `settings`; the journal lives in the store's root.
 */
export const make = (settings: Settings, options: Options) =>
  Effect.gen(function*() {
    const store = yield* Store
    const endpoint = settings.endpoint.display
    const { calls, transport } = yield* connect(settings, options.version)
    const journalDir = Journal.directoryOf(store.options.root, endpoint, settings.instanceName)
    // zstd would need Node's native codec (22.15 and later) and a server that lists it; kiln ships no other codec.
    yield* Effect.logDebug(`remote transfers are uncompressed (Node ${process.versions.node}; zstd needs native zlib)`)
    const reads = settings.mode !== "write"
    const writes = settings.mode !== "read"
    const stale = new Set<string>()
    /** Blobs the server gave wrong bytes for: uploaded again whatever FindMissingBlobs says. */
    const corrupt = new Set<string>()
    const noteCorrupt = (e: RemoteError) =>
      Effect.sync(() => {
        if (e.corruptBlob !== undefined) corrupt.add(e.corruptBlob)
      })
    let hits = 0
    const execCounters = { executed: 0, fallbacks: 0 }
    let uploadedActions = 0
    let unusable: string | undefined
    let firstFailure: RemoteError | undefined
    const failed = (e: RemoteError) =>
      Effect.sync(() => {
        if (settings.required && firstFailure === undefined) firstFailure = e
      })

    // The probe runs while the run starts; the first call that needs the remote waits for it.
    const probed = yield* Deferred.make<Capabilities, RemoteError>()
    yield* Effect.forkScoped(Effect.intoDeferred(transport.capabilities, probed))
    const usable = Effect.gen(function*() {
      const caps = yield* Effect.either(Deferred.await(probed))
      if (Either.isLeft(caps)) {
        if (unusable === undefined) {
          unusable = probeFailure(caps.left)
          yield* failed(caps.left)
          yield* Effect.logWarning(`remote cache ${endpoint} ${unusable}: running locally`)
        }
        return undefined
      }
      if (caps.right.actionCache === "none") {
        if (unusable === undefined) {
          unusable = "has no action cache (a CAS-only server)"
          yield* Effect.logWarning(
            `remote cache ${endpoint} has no action cache (a CAS-only server): kiln cannot keep results there; running locally`
          )
        }
        return undefined
      }
      return calls.open() ? caps.right : undefined
    })

    const { downloadFiles, fetchTrees } = Blobs.make(store, transport, calls, endpoint)

    const fetchTree: RemoteTier["Type"]["fetchTree"] = (root) =>
      Effect.gen(function*() {
        if (!reads || (yield* usable) === undefined) return false
        const entries = yield* store.listTree(root)
        const files = entries.flatMap((
          e
        ) => (e.type === "file" && e.digest !== undefined && e.digest.sizeBytes > 0 ? [e.digest] : []))
        yield* downloadFiles(files)
        return true
      }).pipe(
        Effect.tapErrorTag("RemoteError", noteCorrupt),
        Effect.catchAll((e) =>
          Effect.as(
            Effect.logWarning(`the remote cannot give the files of ${Digest.format(root)} (${e.message})`),
            false
          )
        )
      )

    /**
     * Checking hits, which is part of their lookup and bounded like it (`calls.hitCheckMs`), retries included: their
     * Trees, fetched and checked against their processes (a refusal per hit, or undefined), and, under `validate`,
     * which of the blobs they name the server lacks. A server that does not answer in time costs one remote error and
     * the hits, never the retries an upload gets.
     */
    const check = (downs: ReadonlyArray<Results.Down>, processes: ReadonlyArray<Process>) => {
      const treeDigests = downs.flatMap((d) => d.directories.map((dir) => dir.tree))
      const treeBytes = treeDigests.reduce((n, d) => n + d.sizeBytes, 0)
      return calls.within(
        "check hit",
        calls.hitCheckMs(treeBytes),
        Effect.gen(function*() {
          const trees = yield* fetchTrees(treeDigests)
          const refused = downs.map((down, i) => Results.refusedTrees(down, trees, processes[i]!))
          const files = downs.map((down, i) => (refused[i] === undefined ? Results.filesOf(down, trees) : []))
          const missing = options.cacheContent === "validate" ? yield* transport.findMissing(files.flat()) : []
          return { trees, refused, files, missing }
        })
      )
    }

    /** One remote hit, made local: its trees, then the files the local store lacks, checked, then its layout. */
    const lookupOne = (process: Process, key: Digest.Digest) =>
      Effect.gen(function*() {
        // An open breaker: the remote is given up for now, and a lookup waits for nothing.
        if (stale.has(key.hash) || !calls.open()) return Option.none<Entry>()
        const raw = yield* transport.getActionResult(key)
        if (Option.isNone(raw)) return Option.none<Entry>()
        const down = Results.readRemote(raw.value, process)
        if (Either.isLeft(down)) {
          yield* unusableEntry(process, key, down.left)
          return Option.none<Entry>()
        }
        if (down.right.exitCode !== 0 && process.cache !== "always") return Option.none<Entry>()
        const checked = yield* check([down.right], [process])
        const trees = checked.trees
        const refused = checked.refused[0]
        if (refused !== undefined) {
          yield* unusableEntry(process, key, refused)
          return Option.none<Entry>()
        }
        const files = checked.files[0]!
        if (checked.missing.length > 0) {
          return yield* new RemoteError({
            endpoint,
            method: "FindMissingBlobs",
            code: "NOT_FOUND",
            detail: `${Digest.format(checked.missing[0]!)} (and ${checked.missing.length - 1} more)`
          })
        }
        // The trees' directories are in the store from here on; their files now, or when something needs them.
        if (options.cacheContent === "fetch") yield* downloadFiles(files)
        const outputDigest = yield* Results.layOut(store, down.right, trees)
        hits++
        return Option.some<Entry>({
          exitCode: down.right.exitCode,
          signal: null,
          timedOut: false,
          stdoutDigest: down.right.stdout,
          stderrDigest: down.right.stderr,
          outputDigest,
          durationMs: 0
        })
      }).pipe(
        Effect.tapErrorTag("RemoteError", noteCorrupt),
        Effect.catchAll((e) => {
          if (e._tag !== "RemoteError") {
            return Effect.as(
              Effect.logWarning(`remote hit for ${process.description} could not be stored (${e.message}): running it`),
              Option.none<Entry>()
            )
          }
          // An entry whose bytes are gone or bad is never used again in this run: its producer runs instead, and its
          // fresh result replaces the entry.
          if (entryProblem(e)) {
            stale.add(key.hash)
            return Effect.as(
              Effect.logWarning(
                `remote cache entry for ${process.description} is unusable (${
                  describe(e)
                }): running it, and replacing the entry`
              ),
              Option.none<Entry>()
            )
          }
          return Effect.as(failed(e), Option.none<Entry>())
        })
      )

    const unusableEntry = (process: Process, key: Digest.Digest, why: string) =>
      Effect.sync(() => stale.add(key.hash)).pipe(
        Effect.zipRight(Effect.logWarning(
          `remote cache entry for ${process.description} is unusable (${why}): running it, and replacing the entry`
        ))
      )

    /** A hit's entry as the action cache holds it, its outputs laid out in the store. */
    const entryOf = (down: Results.Down, trees: ReadonlyMap<string, Tree.Tree>) =>
      Effect.map(Results.layOut(store, down, trees), (outputDigest): Entry => {
        hits++
        return {
          exitCode: down.exitCode,
          signal: null,
          timedOut: false,
          stdoutDigest: down.stdout,
          stderrDigest: down.stderr,
          outputDigest,
          durationMs: 0
        }
      })

    /**
     * Many lookups at once, as a wave of the engine asks: each action's entry (no REAPI call takes several), then
     * one batch of trees, one FindMissingBlobs and one download for all of the hits, instead of a round of each per
     * hit. Anything in the batch that fails sends its hits the one-by-one way, which says which entry is bad.
     */
    const lookupMany = (requests: ReadonlyArray<{ readonly process: Process; readonly key: Digest.Digest }>) =>
      Effect.gen(function*() {
        const found = yield* Effect.forEach(requests, ({ key, process }) =>
          stale.has(key.hash) || !calls.open()
            ? Effect.succeed(undefined)
            : Effect.flatMap(transport.getActionResult(key), (raw) => {
              if (Option.isNone(raw)) return Effect.succeed(undefined)
              const down = Results.readRemote(raw.value, process)
              if (Either.isLeft(down)) return Effect.as(unusableEntry(process, key, down.left), undefined)
              if (down.right.exitCode !== 0 && process.cache !== "always") return Effect.succeed(undefined)
              return Effect.succeed(down.right)
            }).pipe(Effect.catchAll((e) => Effect.as(failed(e), undefined))), {
          concurrency: options.lookupConcurrency ?? 16
        })
        const hitsAt = found.flatMap((down, i) => (down === undefined ? [] : [i]))
        const out: Array<Option.Option<Entry>> = requests.map(() => Option.none())
        if (hitsAt.length === 0) return out
        const batch = yield* Effect.either(Effect.gen(function*() {
          const checked = yield* check(hitsAt.map((i) => found[i]!), hitsAt.map((i) => requests[i]!.process))
          const trees = checked.trees
          const usable = new Set(hitsAt)
          for (const [n, i] of hitsAt.entries()) {
            const refused = checked.refused[n]
            if (refused === undefined) continue
            usable.delete(i)
            yield* unusableEntry(requests[i]!.process, requests[i]!.key, refused)
          }
          const filesOf = new Map(hitsAt.flatMap((i, n) => (usable.has(i) ? [[i, checked.files[n]!] as const] : [])))
          if (options.cacheContent === "validate") {
            const missing = new Set(checked.missing.map((d) => d.hash))
            for (const i of [...usable]) {
              const gone = filesOf.get(i)!.find((d) => missing.has(d.hash))
              if (gone === undefined) continue
              usable.delete(i)
              yield* unusableEntry(requests[i]!.process, requests[i]!.key, `NOT_FOUND: ${Digest.format(gone)}`)
            }
          }
          if (options.cacheContent === "fetch") {
            yield* downloadFiles([...usable].flatMap((i) => filesOf.get(i)!))
          }
          return { trees, usable }
        }))
        if (Either.isLeft(batch) && batch.left._tag === "RemoteError" && !entryProblem(batch.left)) {
          // The server, not an entry: asking again hit by hit would only wait again.
          yield* failed(batch.left)
          return out
        }
        if (Either.isLeft(batch)) {
          yield* Effect.logDebug(`a batch of remote hits failed (${batch.left.message}): taking them one by one`)
          yield* Effect.forEach(hitsAt, (i) =>
            Effect.map(lookupOne(requests[i]!.process, requests[i]!.key), (entry) => {
              out[i] = entry
            }), { concurrency: options.lookupConcurrency ?? 16, discard: true })
          return out
        }
        yield* Effect.forEach(batch.right.usable, (i) =>
          entryOf(found[i]!, batch.right.trees).pipe(
            Effect.map((entry) => {
              out[i] = Option.some(entry)
            }),
            Effect.catchAll((e) =>
              Effect.logWarning(`remote hit for ${requests[i]!.process.description} could not be stored (${e.message})`)
            )
          ), { discard: true })
        return out
      })

    const lookup: RemoteTier["Type"]["lookup"] = (requests) =>
      Effect.gen(function*() {
        if (!reads || requests.length === 0) return requests.map(() => Option.none())
        if ((yield* usable) === undefined) return requests.map(() => Option.none())
        return yield* lookupMany(requests)
      })

    // Uploads: the journal's entries, taken up by a few fibers; blobs deduplicated across actions in flight.
    const queue = yield* Queue.unbounded<Digest.Digest>()
    const queued = new Set<string>()
    const present = new Set<string>()
    let inFlight = 0
    /** Blobs some action's upload is asking about or sending now: another action waits for it instead. */
    const inFlightBlobs = new Map<string, Deferred.Deferred<void, UploadError>>()
    const uploadBlobs = (items: ReadonlyArray<{ readonly pending: Journal.Pending; readonly up: Results.Up }>) =>
      Effect.gen(function*() {
        const messages = items.flatMap(({ pending, up }) => [
          { digest: Digest.ofBytes(pending.actionBytes), bytes: pending.actionBytes },
          { digest: Digest.ofBytes(pending.commandBytes), bytes: pending.commandBytes },
          ...up.trees
        ])
        const up = { files: items.flatMap((i) => i.up.files) }
        const candidates = [
          ...new Map([...up.files, ...messages.map((m) => m.digest)].map((d) => [d.hash, d])).values()
        ]
          .filter((d) => !present.has(d.hash))
        const theirs = candidates.flatMap((d) => inFlightBlobs.get(d.hash) ?? [])
        const all = candidates.filter((d) => !inFlightBlobs.has(d.hash))
        const mine = yield* Deferred.make<void, UploadError>()
        for (const d of all) inFlightBlobs.set(d.hash, mine)
        yield* Effect.onExit(sendBlobs(messages, up, all), (exit) =>
          Effect.zipRight(
            Effect.sync(() => {
              for (const d of all) if (inFlightBlobs.get(d.hash) === mine) inFlightBlobs.delete(d.hash)
            }),
            Deferred.done(mine, Exit.asVoid(exit))
          ))
        // The entry may name them only once they are there, whoever sent them.
        yield* Effect.forEach(new Set(theirs), Deferred.await, { discard: true })
      })
    const sendBlobs = (
      messages: ReadonlyArray<{ readonly digest: Digest.Digest; readonly bytes: Uint8Array }>,
      up: { readonly files: ReadonlyArray<Digest.Digest> },
      all: ReadonlyArray<Digest.Digest>
    ) =>
      Effect.gen(function*() {
        if (all.length === 0) return
        const missing = yield* transport.findMissing(all)
        const wanted = new Set([
          ...missing.map((d) => d.hash),
          ...all.filter((d) => corrupt.has(d.hash)).map((d) => d.hash)
        ])
        const send = (blobs: ReadonlyArray<{ readonly digest: Digest.Digest; readonly bytes: Uint8Array }>) =>
          Effect.zipRight(
            transport.upload(blobs),
            Effect.sync(() => {
              calls.counters.uploadedBytes += blobs.reduce((n, b) => n + b.digest.sizeBytes, 0)
              for (const b of blobs) corrupt.delete(b.digest.hash)
            })
          )
        yield* send(messages.filter((m) => wanted.has(m.digest.hash)))
        // Files are read from the store a slice at a time, so a batch of large outputs is never all in memory.
        let slice: Array<Digest.Digest> = []
        let sliceBytes = 0
        const flush = Effect.suspend(() => {
          const digests = slice
          slice = []
          sliceBytes = 0
          return Effect.flatMap(
            Effect.forEach(digests, (digest) => Effect.map(store.getFile(digest), (bytes) => ({ digest, bytes }))),
            send
          )
        })
        for (const d of new Map(up.files.filter((f) => wanted.has(f.hash)).map((f) => [f.hash, f])).values()) {
          slice.push(d)
          sliceBytes += d.sizeBytes
          if (sliceBytes >= UPLOAD_SLICE_BYTES) yield* flush
        }
        yield* flush
        for (const d of all) present.add(d.hash)
      })
    /** A journal entry made ready to go up: its `ActionResult` and the blobs it names; undefined to skip it. */
    const prepare = (action: Digest.Digest) =>
      Effect.gen(function*() {
        const pending = Journal.read(journalDir, action)
        if (pending === undefined) return undefined
        const up = yield* Results.toRemote(store, pending.entry, pending.outputs)
        if (up.absent !== undefined) {
          // A result missing a declared output may be a tool's silent failure: it stays local, never shared.
          yield* Effect.logDebug(`not uploading ${Digest.format(action)}: it did not make its output \`${up.absent}\``)
          Journal.remove(journalDir, action)
          return undefined
        }
        return { action, pending, up }
      }).pipe(Effect.catchAll((e) => Effect.as(uploadFailed(action, e), undefined)))
    const uploadFailed = (action: Digest.Digest, e: UploadError) =>
      e._tag === "RemoteError"
        ? failed(e)
        : e._tag === "MissingDigest"
        ? Effect.zipRight(
          Effect.logWarning(`upload of ${Digest.format(action)} dropped: ${e.message} is gone from the local store`),
          Effect.sync(() => Journal.remove(journalDir, action))
        )
        : Effect.logWarning(`upload of ${Digest.format(action)} failed: ${e.message}`)
    /**
     * A batch of journal entries up: one FindMissingBlobs and one batched upload for all their blobs, then each
     * `ActionResult`, and the entry leaves the journal only once its result is there.
     */
    const drainBatch = (actions: ReadonlyArray<Digest.Digest>) =>
      Effect.gen(function*() {
        if ((yield* usable)?.actionCache !== "read-write") return
        const ready = (yield* Effect.forEach(actions, prepare)).filter((x) => x !== undefined)
        if (ready.length === 0) return
        // Blobs first, then the entries that name them: a server that validates its action cache (bazel-remote)
        // would refuse them otherwise, and one that does not would serve entries whose bytes are not there.
        const sent = yield* Effect.either(uploadBlobs(ready))
        if (sent._tag === "Left") return yield* uploadFailed(ready[0]!.action, sent.left)
        yield* Effect.forEach(ready, ({ action, up }) =>
          transport.updateActionResult(action, up.actionResult).pipe(
            Effect.zipRight(Effect.sync(() => {
              Journal.remove(journalDir, action)
              uploadedActions++
            })),
            Effect.catchAll((e) => uploadFailed(action, e))
          ), { concurrency: 8, discard: true })
      }).pipe(
        Effect.ensuring(Effect.sync(() => {
          for (const action of actions) queued.delete(action.hash)
          inFlight -= actions.length
        }))
      )
    const enqueue = (action: Digest.Digest) =>
      Effect.suspend(() => {
        if (queued.has(action.hash)) return Effect.void
        queued.add(action.hash)
        inFlight++
        return Queue.offer(queue, action)
      })
    const workers = yield* Effect.forkScoped(
      Effect.forEach(
        Array.from({ length: options.uploadConcurrency ?? 4 }),
        () =>
          Effect.forever(
            Effect.flatMap(Queue.takeBetween(queue, 1, UPLOAD_BATCH), (c) => drainBatch(Chunk.toReadonlyArray(c)))
          ),
        { concurrency: "unbounded", discard: true }
      )
    )
    yield* Effect.addFinalizer(() => Fiber.interrupt(workers))
    // What earlier runs left is taken up first.
    if (writes && options.drain !== false) yield* Effect.forEach(Journal.list(journalDir), enqueue, { discard: true })

    const offer: RemoteTier["Type"]["offer"] = (process, key, entry, executedRemotely) =>
      Effect.gen(function*() {
        // An executor that is the cache keeps what it ran itself; one apart from it does not.
        if (!writes || (executedRemotely === true && settings.executorEndpoint === undefined)) return
        // A server that cannot take results never will: nothing is queued for it (an unreachable one may come back).
        const caps = yield* Effect.either(Deferred.await(probed))
        if (Either.isRight(caps) && caps.right.actionCache !== "read-write") return
        const { action, command } = actionMessages(process)
        yield* Journal.write(journalDir, {
          action: key,
          actionBytes: action,
          commandBytes: command,
          outputs: { outputFiles: process.outputFiles, outputDirectories: process.outputDirectories },
          entry
        })
        yield* enqueue(key)
      }).pipe(
        Effect.catchAll((e) => Effect.logWarning(`cannot queue the upload of ${process.description}: ${e.message}`))
      )

    const flush: Service["flush"] = (waitMs) =>
      Effect.gen(function*() {
        const idle = Effect.repeat(Effect.sync(() => inFlight), {
          until: (n) => n === 0,
          schedule: Schedule.spaced(50)
        })
        yield* Effect.timeout(idle, waitMs).pipe(Effect.ignore)
        return Journal.count(journalDir)
      })

    const executor = yield* Executor.make(settings, options, {
      store,
      transport,
      calls,
      endpoint,
      present,
      fetchTrees,
      downloadFiles,
      usable,
      counters: execCounters
    })

    const service: Service = {
      settings,
      capabilities: Deferred.await(probed),
      flush,
      stats: Effect.sync(() => ({
        endpoint,
        remoteCacheHits: hits,
        uploadedBytes: calls.counters.uploadedBytes + (executor.ownCalls?.counters.uploadedBytes ?? 0),
        downloadedBytes: calls.counters.downloadedBytes + (executor.ownCalls?.counters.downloadedBytes ?? 0),
        pendingUploads: Journal.count(journalDir),
        uploadedActions,
        remoteExecuted: execCounters.executed,
        remoteFallbacks: execCounters.fallbacks,
        remoteErrors: sumErrors(calls.counters.errors, executor.ownCalls?.counters.errors ?? {}),
        ...(unusable !== undefined ? { unusable } : {})
      })),
      failure: Effect.sync(() => Option.fromNullable(firstFailure))
    }
    const describeAction: RemoteTier["Type"]["describe"] = (key) =>
      Effect.gen(function*() {
        if ((yield* usable) === undefined) {
          return `remote cache ${endpoint} ${unusable ?? "is not in use (its breaker is open after repeated failures)"}`
        }
        const raw = yield* transport.getActionResult(key)
        if (Option.isNone(raw)) return `remote cache ${endpoint}: does not have it`
        const missing = yield* transport.findMissing(Results.blobsOf(raw.value))
        return missing.length === 0
          ? `remote cache ${endpoint}: has it, with every blob it names`
          : `remote cache ${endpoint}: has it, but ${missing.length} of its blobs are gone (e.g. ${
            Digest.format(missing[0]!)
          }): it would run again`
      }).pipe(Effect.catchAll((e) => Effect.succeed(`remote cache ${endpoint}: cannot say (${e.message})`)))

    return {
      service,
      tier: {
        lookup,
        offer,
        fetchTree,
        describe: describeAction,
        execute: executor.execute,
        executorJobs: settings.executor ? settings.remoteJobs : 0
      }
    }
  })
