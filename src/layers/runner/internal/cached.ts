/**
 * The action cache in front of the runner. Lookup happens before a concurrency permit is taken; a hit whose bytes
 * are gone is a miss (never a failure); a re-run's result *replaces* a stale entry (Pants never overwrites, so a
 * bad entry stayed forever); failures are cached only under the `always` policy; and one action runs once across
 * every engine on the store at a time.
 *
 * @internal
 */
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import { actionDigest } from "../../../domain/ActionKey.js"
import type * as Digest from "../../../domain/Digest.js"
import { type Process, ProcessResult } from "../../../domain/Process.js"
import type * as RemoteTier from "../../../domain/RemoteTier.js"
import type { StoreError } from "../../../domain/StoreErrors.js"
import type * as Store from "../../store/Store.js"
import type { CacheContent } from "../ProcessRunner.js"
import type { Runner } from "./runner.js"

export type { CacheContent }

/**
 * What an action-cache entry holds: the result's fields that do not depend on how it was obtained.
 *
 * @internal
 */
export const EntryFields = Schema.Struct(ProcessResult.fields).pipe(
  Schema.pick("exitCode", "signal", "timedOut", "stdoutDigest", "stderrDigest", "outputDigest", "durationMs")
)
const Entry = Schema.parseJson(EntryFields)
/**
 * The general decoder of an entry's JSON text, which {@link decodeEntry} must agree with.
 *
 * @internal
 */
export const decodeEntrySchema = Schema.decodeUnknownOption(Entry)
type EntryType = typeof Entry.Type

const HASH = /^[0-9a-f]{64}$/
const isDigest = (d: unknown): boolean =>
  typeof d === "object" && d !== null && Object.keys(d).length === 2 &&
  typeof (d as any).hash === "string" && HASH.test((d as any).hash) &&
  Number.isSafeInteger((d as any).sizeBytes) && (d as any).sizeBytes >= 0
const ENTRY_KEYS = 7

/** Whether `json` has exactly the shape of an entry kiln writes, every field valid. */
const isEntry = (json: any): boolean =>
  typeof json === "object" && json !== null && Object.keys(json).length === ENTRY_KEYS &&
  (json.exitCode === null || Number.isInteger(json.exitCode)) &&
  (json.signal === null || typeof json.signal === "string") &&
  typeof json.timedOut === "boolean" &&
  isDigest(json.stdoutDigest) && isDigest(json.stderrDigest) && isDigest(json.outputDigest) &&
  typeof json.durationMs === "number" && Number.isFinite(json.durationMs)

/**
 * Decodes an entry. A run reads hundreds of them, and the schema decoder cost 40–70 µs each; entries kiln wrote
 * have exactly this shape, so it is checked directly and the schema only decides what does not fit it.
 *
 * @internal
 */
export const decodeEntry = (text: string): Option.Option<EntryType> => {
  let json: any
  try {
    json = JSON.parse(text)
  } catch {
    return Option.none()
  }
  return isEntry(json) ? Option.some(json as EntryType) : decodeEntrySchema(text)
}

/**
 * The general encoder of an entry, which {@link encodeEntry} must agree with byte for byte.
 *
 * @internal
 */
export const encodeEntrySchema = Schema.encodeSync(Entry)

/** A digest as the schema encodes it; anything else as it is, for the schema to refuse. */
const digestJson = (d: EntryType["stdoutDigest"]): unknown =>
  typeof d === "object" && d !== null ? { hash: d.hash, sizeBytes: d.sizeBytes } : d

/**
 * Encodes an entry: what the schema encodes, written directly (a run writes one per process it runs, and the schema
 * encoder was most of that write's CPU). Anything the decoder's fast path would not accept (an invalid entry, a
 * duration that is not finite) goes to the schema, which refuses it or encodes it as it always did.
 *
 * @internal
 */
export const encodeEntry = (entry: EntryType): string => {
  const json = {
    exitCode: entry.exitCode,
    signal: entry.signal,
    timedOut: entry.timedOut,
    stdoutDigest: digestJson(entry.stdoutDigest),
    stderrDigest: digestJson(entry.stderrDigest),
    outputDigest: digestJson(entry.outputDigest),
    durationMs: entry.durationMs
  }
  return isEntry(json) ? JSON.stringify(json) : encodeEntrySchema(entry)
}

/**
 * Whether a result may be stored. A timeout never is, whatever the policy: it says how loaded the machine was, not
 * what the action computes, and a cached one would fail every later build until the cache is cleared (Bazel never
 * caches one either).
 */
const cacheable = (process: Process, result: ProcessResult) =>
  !result.timedOut && result.inputsChanged !== true &&
  (process.cache === "always" || (process.cache === "successful" && result.succeeded))

/** @internal */
export interface Cached {
  readonly run: Runner
  /**
   * Looks many processes up at once, as a run does for every process of a wave whose inputs are known: the entries
   * are read in one transaction per shard. None for a miss, an uncacheable process, or an entry whose bytes are gone.
   */
  readonly lookup: (processes: ReadonlyArray<Process>) => Effect.Effect<Array<Option.Option<ProcessResult>>>
}

/** @internal */
export const make = (
  store: Store.Service,
  inner: Runner,
  cacheContent: CacheContent,
  remote?: RemoteTier.Service
): Cached => {
  /** Validates and leases the entry of one process; None when it is unusable. */
  const accept = (
    process: Process,
    key: Digest.Digest,
    raw: Option.Option<Uint8Array>,
    started: number
  ): Effect.Effect<Option.Option<ProcessResult>, StoreError> =>
    Effect.gen(function*() {
      if (Option.isNone(raw)) return Option.none()
      // A view on the bytes, not a copy: they are read once, here.
      const entry = decodeEntry(
        Buffer.from(raw.value.buffer, raw.value.byteOffset, raw.value.byteLength).toString("utf8")
      )
      if (Option.isNone(entry)) return Option.none()
      const e = entry.value
      if (cacheContent !== "defer") {
        // A hit is a use: its tree is leased again (in the same walk that checks it is all there), so GC removes
        // what runs stop using, not this.
        const present = (yield* store.hasFile(e.stdoutDigest)) && (yield* store.hasFile(e.stderrDigest)) &&
          (yield* store.ensureTree(e.outputDigest, { complete: true, lease: true }).pipe(
            Effect.as(true),
            Effect.catchTag("MissingDigest", () => Effect.succeed(false))
          ))
        if (!present) {
          yield* Effect.logDebug(`cache entry for ${process.description} refers to missing bytes: running it again`)
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
   */
  const remoteLookup = (
    requests: ReadonlyArray<{ readonly process: Process; readonly key: Digest.Digest }>,
    started: number
  ): Effect.Effect<Array<Option.Option<ProcessResult>>> =>
    remote === undefined || requests.length === 0
      ? Effect.succeed(requests.map(() => Option.none()))
      : Effect.flatMap(remote.lookup(requests), (found) =>
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

  const lookupOne = (process: Process, key: Digest.Digest, started: number) =>
    Effect.flatMap(store.getActionResults([key]), ([raw]) => accept(process, key, raw!, started)).pipe(
      Effect.catchTag("StoreError", degrade)
    )

  const lookup: Cached["lookup"] = (processes) =>
    Effect.gen(function*() {
      const started = Date.now()
      const usable = processes.map((p) => p.cache !== "never")
      const keys = processes.map(actionDigest)
      const raws = yield* store.getActionResults(keys.filter((_, i) => usable[i])).pipe(
        Effect.catchTag("StoreError", (err) => Effect.as(degrade(err), undefined))
      )
      if (raws === undefined) return processes.map(() => Option.none())
      let next = 0
      const local = yield* Effect.forEach(processes, (p, i) =>
        usable[i]
          ? accept(p, keys[i]!, raws[next++]!, started).pipe(Effect.catchTag("StoreError", degrade))
          : Effect.succeedNone)
      const asked = local.flatMap((hit, i) => (usable[i] && Option.isNone(hit) ? [i] : []))
      const found = yield* remoteLookup(asked.map((i) => ({ process: processes[i]!, key: keys[i]! })), started)
      asked.forEach((i, j) => (local[i] = found[j]!))
      return local
    })

  const run: Runner = (process, policy) =>
    Effect.gen(function*() {
      const started = Date.now()
      const key = actionDigest(process)
      const usable = process.cache !== "never"
      if (usable && policy.read && policy.missed !== true) {
        const hit = yield* lookupOne(process, key, started)
        if (Option.isSome(hit)) return hit.value
        const [remoteHit] = yield* remoteLookup([{ process, key }], started)
        if (Option.isSome(remoteHit!)) return remoteHit.value
      }
      const lookupMs = Date.now() - started
      // The duration is the process's whole span, from this lookup on, as the phases in its timings are: the inner
      // runners each measure only from when they were entered.
      const execute = Effect.map(inner(process, policy), (result) =>
        new ProcessResult(
          {
            ...result,
            actionDigest: key,
            durationMs: Date.now() - started,
            timings: { ...result.timings, cacheLookup: lookupMs }
          },
          true
        ))
      if (!usable) return yield* execute
      const again = lookupOne(process, key, started)
      const readFirst = policy.read
        ? Effect.flatMap(again, Option.match({ onSome: Effect.succeed, onNone: () => execute }))
        : execute
      // The entry is written after the run, under the action's lock but off this fiber's path: its commit (an
      // fsync) took longer than a small process's whole run.
      const result = yield* store.withActionLock(
        key,
        policy.read ? again : Effect.succeedNone as typeof again,
        readFirst,
        (result) =>
          (result.source === "ran" || result.source === "remote") && policy.write && cacheable(process, result)
            ? Option.some(Buffer.from(encodeEntry(result)))
            : Option.none()
      )
      // What ran goes up in the background, once it is in the local store: a failure, a timeout, an uncacheable
      // result or one whose inputs changed under it never does.
      if (
        remote !== undefined && (result.source === "ran" || result.source === "remote") && policy.write &&
        cacheable(process, result)
      ) {
        yield* remote.offer(process, key, result, result.source === "remote")
      }
      return result
    })

  return { run, lookup }
}
