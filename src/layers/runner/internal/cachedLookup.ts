/**
 * The action cache's lookups: the local store's entries first (each one validated and leased, or a miss), then the
 * remote's for what the local cache missed. A store that cannot be read is a miss, with a warning.
 *
 * @internal
 */
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import { actionDigest } from "../../../domain/ActionKey.js"
import type * as Digest from "../../../domain/Digest.js"
import { type Process, ProcessResult } from "../../../domain/Process.js"
import type * as RemoteTier from "../../../domain/RemoteTier.js"
import type { StoreError } from "../../../domain/StoreErrors.js"
import type * as Store from "../../store/Store.js"
import type { CacheContent } from "../ProcessRunner.js"
import { decodeEntry, encodeEntry } from "./cacheEntry.js"
import type { Runner } from "./runner.js"

/** What the action cache in front of a runner works with. @internal */
export interface ActionCache {
  readonly store: Store.Service
  /** The runner behind the cache: what runs a miss. */
  readonly inner: Runner
  readonly cacheContent: CacheContent
  readonly remote: RemoteTier.Service | undefined
}

/** Validates and leases the entry of one process; None when it is unusable. */
const accept = (
  cache: ActionCache,
  proc: Process,
  key: Digest.Digest,
  raw: Option.Option<Uint8Array>,
  started: number
): Effect.Effect<Option.Option<ProcessResult>, StoreError> =>
  Effect.gen(function*() {
    const { store } = cache
    if (Option.isNone(raw)) return Option.none()
    // A view on the bytes, not a copy: they are read once, here.
    const entry = decodeEntry(
      Buffer.from(raw.value.buffer, raw.value.byteOffset, raw.value.byteLength).toString("utf8")
    )
    if (Option.isNone(entry)) return Option.none()
    const e = entry.value
    if (cache.cacheContent !== "defer") {
      // A hit is a use: its tree is leased again (in the same walk that checks it is all there), so GC removes
      // what runs stop using, not this.
      const present = (yield* store.hasFile(e.stdoutDigest)) && (yield* store.hasFile(e.stderrDigest)) &&
        (yield* store.ensureTree(e.outputDigest, { complete: true, lease: true }).pipe(
          Effect.as(true),
          Effect.catchTag("MissingDigest", () => Effect.succeed(false))
        ))
      if (!present) {
        yield* Effect.logDebug(`cache entry for ${proc.description} refers to missing bytes: running it again`)
        return Option.none()
      }
    }
    yield* store.leaseUsed(key, [e.stdoutDigest, e.stderrDigest])
    const now = Date.now()
    return Option.some(
      new ProcessResult({
        ...e,
        durationMs: now - started,
        actionDigest: key,
        source: "cache-hit",
        timings: { cacheLookup: now - started }
      }, true)
    )
  })

const degrade = (err: StoreError): Effect.Effect<Option.Option<ProcessResult>> =>
  Effect.as(Effect.logWarning(`action cache lookup failed (${err.message}): running instead`), Option.none())

/**
 * Asks the remote for what the local cache missed; a hit (its bytes already in the local store) is written into
 * the local cache, so the next run finds it here.
 *
 * @internal
 */
export const remoteLookup = (
  cache: ActionCache,
  requests: ReadonlyArray<{ readonly process: Process; readonly key: Digest.Digest }>,
  started: number,
  options?: RemoteTier.LookupOptions
): Effect.Effect<Array<Option.Option<ProcessResult>>> => {
  const { remote, store } = cache
  return remote === undefined || requests.length === 0
    ? Effect.succeed(requests.map(() => Option.none()))
    : Effect.flatMap(remote.lookup(requests, options), (found) =>
      Effect.forEach(found, (entry, i) => {
        if (Option.isNone(entry)) return Effect.succeedNone
        const { key } = requests[i]!
        const now = Date.now()
        const result = new ProcessResult({
          ...entry.value,
          durationMs: now - started,
          actionDigest: key,
          source: "remote-cache",
          timings: { cacheLookup: now - started }
        }, true)
        return store.putActionResult(key, Buffer.from(encodeEntry({ ...entry.value, durationMs: 0 }))).pipe(
          Effect.as(Option.some(result)),
          Effect.catchTag("StoreError", (err) =>
            Effect.as(
              Effect.logWarning(`a remote hit could not be written to the store (${err.message})`),
              Option.some(result)
            ))
        )
      }))
}

/** The local cache's entry for one process. @internal */
export const lookupOne = (cache: ActionCache, proc: Process, key: Digest.Digest, started: number) =>
  Effect.flatMap(cache.store.getActionResults([key]), ([raw]) => accept(cache, proc, key, raw!, started)).pipe(
    Effect.catchTag("StoreError", degrade)
  )

/**
 * Looks many processes up at once, the local cache's entries read in one transaction per shard, then the remote's
 * for the misses.
 *
 * @internal
 */
export const lookupMany = (
  cache: ActionCache,
  processes: ReadonlyArray<Process>,
  options?: RemoteTier.LookupOptions
): Effect.Effect<Array<Option.Option<ProcessResult>>> =>
  Effect.gen(function*() {
    const started = Date.now()
    const usable = processes.map((p) => p.cache !== "never")
    const keys = processes.map(actionDigest)
    const raws = yield* cache.store.getActionResults(keys.filter((_, i) => usable[i])).pipe(
      Effect.catchTag("StoreError", (err) => Effect.as(degrade(err), undefined))
    )
    if (raws === undefined) return processes.map(() => Option.none())
    let next = 0
    const local = yield* Effect.forEach(processes, (p, i) =>
      usable[i]
        ? accept(cache, p, keys[i]!, raws[next++]!, started).pipe(Effect.catchTag("StoreError", degrade))
        : Effect.succeedNone)
    const asked = local.flatMap((hit, i) => (usable[i] && Option.isNone(hit) ? [i] : []))
    const found = yield* remoteLookup(
      cache,
      asked.map((i) => ({ process: processes[i]!, key: keys[i]! })),
      started,
      options
    )
    asked.forEach((i, j) => (local[i] = found[j]!))
    return local
  })
