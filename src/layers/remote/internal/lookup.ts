/**
 * The remote cache's lookups: a wave's hits found together (their entries, then one batch of trees, one
 * FindMissingBlobs and one download for all of them), a hit that fails in the batch taken again on its own, and a
 * tree's files fetched when something needs them.
 *
 * @internal
 */
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Fiber from "effect/Fiber"
import * as Option from "effect/Option"
import * as Digest from "../../../domain/Digest.js"
import type { Process } from "../../../domain/Process.js"
import type { Entry, RemoteTier } from "../../../domain/RemoteTier.js"
import type * as Tree from "../../../domain/Tree.js"
import { describe } from "../RemoteCache.js"
import { RemoteError } from "../RemoteErrors.js"
import { type CacheState, DEFAULT_LOOKUP_CONCURRENCY, failed, noteCorrupt } from "./cacheState.js"
import * as Executor from "./executor.js"
import { usable } from "./probe.js"
import * as Results from "./results.js"

type Request = { readonly process: Process; readonly key: Digest.Digest }

/** Whether an error says an entry's bytes are gone or bad (rather than that the server is in trouble). */
const entryProblem = (e: RemoteError) =>
  e.code === "NOT_FOUND" || e.code === "DIGEST_MISMATCH" || e.code === "INVALID_ARGUMENT" ||
  e.code === "INTERNAL" || e.code === "TOO_LARGE"

/** The files of the tree `root` (whose directories are in the store), fetched from the remote; false if it cannot. */
export const fetchTree = (state: CacheState): RemoteTier["Type"]["fetchTree"] => (root) =>
  Effect.gen(function*() {
    if (!state.reads || (yield* usable(state, "transfer")) === undefined) return false
    const entries = yield* state.store.listTree(root)
    const files = entries.flatMap((
      e
    ) => (e.type === "file" && e.digest !== undefined && e.digest.sizeBytes > 0 ? [e.digest] : []))
    yield* state.downloadFiles(files)
    return true
  }).pipe(
    Effect.tapErrorTag("RemoteError", (e) => noteCorrupt(state, e)),
    Effect.catchAll((e) =>
      Effect.as(
        Effect.logWarning(`the remote cannot give the files of ${Digest.format(root)} (${e.message})`),
        false
      )
    )
  )

/**
 * Hits looked up together: each one's entry, and then all of their trees and files at once. Ahead of execution, the
 * processes the executor will be asked to run are not waited for: their lookups go on beside (see {@link lookAhead}).
 */
export const lookup = (state: CacheState): RemoteTier["Type"]["lookup"] => (requests, options) =>
  Effect.gen(function*() {
    if (!state.reads || requests.length === 0) return requests.map(() => Option.none())
    if ((yield* usable(state, "lookup")) === undefined) {
      // Not asked because the lookups' breaker is open (rather than because the remote is off for the run).
      if (state.unusable === undefined) state.calls.skipped("lookup", requests.length)
      return requests.map(() => Option.none())
    }
    const now = options?.aheadOfExecution === true
      ? requests.flatMap((r, i) => (Executor.takes(state.settings, r.process) ? [] : [i]))
      : requests.map((_, i) => i)
    if (now.length === requests.length) return yield* lookupMany(state, requests)
    const out: Array<Option.Option<Entry>> = requests.map(() => Option.none())
    const askedNow = new Set(now)
    yield* Effect.forEach(requests, (r, i) => (askedNow.has(i) ? Effect.void : lookAhead(state, r)), { discard: true })
    const found = yield* lookupMany(state, now.map((i) => requests[i]!))
    now.forEach((i, n) => (out[i] = found[n]!))
    return out
  })

/**
 * Starts the lookup of a process the executor will be asked to run, and leaves it going: the run goes on as for a
 * miss, and the process's execution takes its answer first ({@link aheadOf}). A wave's executions then start as
 * their own lookups come back, not when the last of the wave's has: against a worker that answers lookups one at a
 * time, 100 of them held back every execution by ~125 ms.
 */
const lookAhead = (state: CacheState, request: Request) =>
  Effect.suspend(() => {
    if (state.lookupsAhead.has(request.key.hash)) return Effect.void
    return Effect.map(
      Effect.forkIn(
        state.lookupsAheadBound.withPermit(lookupOne(state, request.process, request.key)),
        state.scope
      ),
      (fiber) => void state.lookupsAhead.set(request.key.hash, fiber)
    )
  })

/**
 * The answer of a lookup left going ahead of `key`'s execution (none when there was none): a hit is the execution's
 * answer, as the executor's own `cached_result` is.
 */
export const aheadOf = (state: CacheState) => (key: Digest.Digest): Effect.Effect<Option.Option<Entry>> =>
  Effect.suspend(() => {
    const fiber = state.lookupsAhead.get(key.hash)
    if (fiber === undefined) return Effect.succeedNone
    state.lookupsAhead.delete(key.hash)
    return Fiber.join(fiber)
  })

/**
 * Checking hits, which is part of their lookup and bounded like it (`calls.hitCheckMs`), retries included: their
 * Trees, fetched and checked against their processes (a refusal per hit, or undefined), and, under `validate`,
 * which of the blobs they name the server lacks. A server that does not answer in time costs one remote error and
 * the hits, never the retries an upload gets.
 */
const check = (state: CacheState, downs: ReadonlyArray<Results.Down>, processes: ReadonlyArray<Process>) => {
  const treeDigests = downs.flatMap((d) => d.directories.map((dir) => dir.tree))
  const treeBytes = treeDigests.reduce((n, d) => n + d.sizeBytes, 0)
  return state.calls.within(
    "check hit",
    state.calls.hitCheckMs(treeBytes),
    Effect.gen(function*() {
      const trees = yield* state.fetchTrees(treeDigests)
      const refused = downs.map((down, i) => Results.refusedTrees(down, trees, processes[i]!))
      const files = downs.map((down, i) => (refused[i] === undefined ? Results.filesOf(down, trees) : []))
      const missing = state.options.cacheContent === "validate" ? yield* state.transport.findMissing(files.flat()) : []
      return { trees, refused, files, missing }
    })
  )
}

const unusableEntry = (state: CacheState, process: Process, key: Digest.Digest, why: string) =>
  Effect.sync(() => state.stale.add(key.hash)).pipe(
    Effect.zipRight(Effect.logWarning(
      `remote cache entry for ${process.description} is unusable (${why}): running it, and replacing the entry`
    ))
  )

/** A hit's entry as the action cache holds it, its outputs laid out in the store. */
const entryOf = (state: CacheState, down: Results.Down, trees: ReadonlyMap<string, Tree.Tree>) =>
  Effect.map(Results.layOut(state.store, down, trees), (outputDigest): Entry => {
    state.hits++
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
 * The remote's entry for `key`, read and checked against `process`; undefined when there is none, it is refused, or
 * it is a failure `process` does not cache. An open breaker: the remote is given up for now, and a lookup waits for
 * nothing.
 */
const findEntry = (state: CacheState, process: Process, key: Digest.Digest) =>
  Effect.gen(function*() {
    if (state.stale.has(key.hash)) return undefined
    if (!state.calls.open("lookup")) {
      state.calls.skipped("lookup")
      return undefined
    }
    const raw = yield* state.transport.getActionResult(key)
    if (Option.isNone(raw)) return undefined
    return yield* readEntry(state, process, key, raw.value)
  })

/** A serialized entry read and checked against `process`: undefined when it is refused or not a hit for it. */
const readEntry = (state: CacheState, process: Process, key: Digest.Digest, raw: Uint8Array) =>
  Effect.gen(function*() {
    const down = Results.readRemote(raw, process)
    if (Either.isLeft(down)) {
      yield* unusableEntry(state, process, key, down.left)
      return undefined
    }
    if (down.right.exitCode !== 0 && process.cache !== "always") return undefined
    return down.right
  })

/** One remote hit, made local: its trees, then the files the local store lacks, checked, then its layout. */
const lookupOne = (state: CacheState, process: Process, key: Digest.Digest) =>
  takeEntry(state, process, key, findEntry(state, process, key))

/**
 * The entry the executor answered `Execute` with from its action cache (`cached_result`), taken exactly as a
 * lookup's hit is: checked, its files fetched per `--cache-content`, laid out and counted among the remote hits.
 * None when it is no usable hit for `process`: then it must run (`skip_cache_lookup`).
 */
export const takeExecuted = (state: CacheState) => (process: Process, key: Digest.Digest, raw: Uint8Array) =>
  takeEntry(state, process, key, readEntry(state, process, key, raw))

/** The rest of a hit once its entry is read (`found`): its trees, the files the store lacks, its layout. */
const takeEntry = <R>(
  state: CacheState,
  process: Process,
  key: Digest.Digest,
  found: Effect.Effect<Results.Down | undefined, RemoteError, R>
) =>
  Effect.gen(function*() {
    const down = yield* found
    if (down === undefined) return Option.none<Entry>()
    const checked = yield* check(state, [down], [process])
    const refused = checked.refused[0]
    if (refused !== undefined) {
      yield* unusableEntry(state, process, key, refused)
      return Option.none<Entry>()
    }
    if (checked.missing.length > 0) {
      return yield* new RemoteError({
        endpoint: state.endpoint,
        method: "FindMissingBlobs",
        code: "NOT_FOUND",
        detail: `${Digest.format(checked.missing[0]!)} (and ${checked.missing.length - 1} more)`
      })
    }
    // The trees' directories are in the store from here on; their files now, or when something needs them.
    if (state.options.cacheContent === "fetch") yield* state.downloadFiles(checked.files[0]!)
    return Option.some(yield* entryOf(state, down, checked.trees))
  }).pipe(
    Effect.tapErrorTag("RemoteError", (e) => noteCorrupt(state, e)),
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
        state.stale.add(key.hash)
        return Effect.as(
          Effect.logWarning(
            `remote cache entry for ${process.description} is unusable (${
              describe(e)
            }): running it, and replacing the entry`
          ),
          Option.none<Entry>()
        )
      }
      return Effect.as(failed(state, e), Option.none<Entry>())
    })
  )

/**
 * The hits at `hitsAt` checked together: those a tree of or (under `validate`) a blob of refuses are dropped as
 * unusable, and the rest's files downloaded in one go (under `fetch`).
 */
const checkBatch = (
  state: CacheState,
  requests: ReadonlyArray<Request>,
  found: ReadonlyArray<Results.Down | undefined>,
  hitsAt: ReadonlyArray<number>
) =>
  Effect.gen(function*() {
    const checked = yield* check(state, hitsAt.map((i) => found[i]!), hitsAt.map((i) => requests[i]!.process))
    const trees = checked.trees
    const usable = new Set(hitsAt)
    for (const [n, i] of hitsAt.entries()) {
      const refused = checked.refused[n]
      if (refused === undefined) continue
      usable.delete(i)
      yield* unusableEntry(state, requests[i]!.process, requests[i]!.key, refused)
    }
    const filesOf = new Map(hitsAt.flatMap((i, n) => (usable.has(i) ? [[i, checked.files[n]!] as const] : [])))
    if (state.options.cacheContent === "validate") {
      const missing = new Set(checked.missing.map((d) => d.hash))
      for (const i of [...usable]) {
        const gone = filesOf.get(i)!.find((d) => missing.has(d.hash))
        if (gone === undefined) continue
        usable.delete(i)
        yield* unusableEntry(state, requests[i]!.process, requests[i]!.key, `NOT_FOUND: ${Digest.format(gone)}`)
      }
    }
    if (state.options.cacheContent === "fetch") {
      yield* state.downloadFiles([...usable].flatMap((i) => filesOf.get(i)!))
    }
    return { trees, usable }
  })

/**
 * Many lookups at once, as a wave of the engine asks: each action's entry (no REAPI call takes several), then
 * one batch of trees, one FindMissingBlobs and one download for all of the hits, instead of a round of each per
 * hit. Anything in the batch that fails sends its hits the one-by-one way, which says which entry is bad.
 */
const lookupMany = (state: CacheState, requests: ReadonlyArray<Request>) =>
  Effect.gen(function*() {
    const concurrency = state.options.lookupConcurrency ?? DEFAULT_LOOKUP_CONCURRENCY
    const found = yield* Effect.forEach(
      requests,
      ({ key, process }) =>
        findEntry(state, process, key).pipe(Effect.catchAll((e) => Effect.as(failed(state, e), undefined))),
      { concurrency }
    )
    const hitsAt = found.flatMap((down, i) => (down === undefined ? [] : [i]))
    const out: Array<Option.Option<Entry>> = requests.map(() => Option.none())
    if (hitsAt.length === 0) return out
    const batch = yield* Effect.either(checkBatch(state, requests, found, hitsAt))
    if (Either.isLeft(batch) && batch.left._tag === "RemoteError" && !entryProblem(batch.left)) {
      // The server, not an entry: asking again hit by hit would only wait again.
      yield* failed(state, batch.left)
      return out
    }
    if (Either.isLeft(batch)) {
      yield* Effect.logDebug(`a batch of remote hits failed (${batch.left.message}): taking them one by one`)
      yield* Effect.forEach(hitsAt, (i) =>
        Effect.map(lookupOne(state, requests[i]!.process, requests[i]!.key), (entry) => {
          out[i] = entry
        }), { concurrency, discard: true })
      return out
    }
    yield* Effect.forEach(batch.right.usable, (i) =>
      entryOf(state, found[i]!, batch.right.trees).pipe(
        Effect.map((entry) => {
          out[i] = Option.some(entry)
        }),
        Effect.catchAll((e) =>
          Effect.logWarning(`remote hit for ${requests[i]!.process.description} could not be stored (${e.message})`)
        )
      ), { discard: true })
    return out
  })
