/**
 * The action cache in front of the runner. Lookup happens before a concurrency permit is taken; a hit whose bytes
 * are gone is a miss (never a failure); a re-run's result *replaces* a stale entry (Pants never overwrites, so a
 * bad entry stayed forever); failures are cached only under the `always` policy; and one action runs once across
 * every engine on the store at a time.
 *
 * @internal
 */
import { Effect, Option, Schema } from "effect"
import { type Process, ProcessResult } from "../../domain/Process.js"
import type * as Store from "../Store.js"
import { actionDigest } from "./actionKey.js"
import type { Runner } from "./runner.js"

/**
 * How a cache hit's content is checked: `validate` (the default) and `fetch` make sure every blob of the result is
 * in the store (kiln has no remote store yet, so the two agree), `defer` trusts the entry and leaves a missing blob
 * to backtracking.
 *
 * @internal
 */
export type CacheContent = "fetch" | "validate" | "defer"

/** What an action-cache entry holds: the result's fields that do not depend on how it was obtained. */
const Entry = Schema.parseJson(
  Schema.Struct(ProcessResult.fields).pipe(
    Schema.pick("exitCode", "signal", "timedOut", "stdoutDigest", "stderrDigest", "outputDigest", "durationMs")
  )
)
const decodeEntry = Schema.decodeUnknownOption(Entry)
const encodeEntry = Schema.encodeSync(Entry)

const cacheable = (process: Process, result: ProcessResult) =>
  process.cache === "always" || (process.cache === "successful" && result.succeeded)

/** @internal */
export const make = (store: Store.Service, inner: Runner, cacheContent: CacheContent): Runner => (process, policy) =>
  Effect.gen(function*() {
    const started = Date.now()
    const key = actionDigest(process)
    const usable = process.cache !== "never"

    const lookup: Effect.Effect<Option.Option<ProcessResult>, never> = Effect.gen(function*() {
      const raw = yield* store.getActionResult(key)
      if (Option.isNone(raw)) return Option.none()
      const entry = decodeEntry(Buffer.from(raw.value).toString("utf8"))
      if (Option.isNone(entry)) return Option.none()
      const e = entry.value
      if (cacheContent !== "defer") {
        const present = yield* store.ensureDownloaded(e.outputDigest).pipe(
          Effect.zipRight(Effect.all([store.hasFile(e.stdoutDigest), store.hasFile(e.stderrDigest)])),
          Effect.map(([a, b]) => a && b),
          Effect.catchTag("MissingDigest", () => Effect.succeed(false))
        )
        if (!present) {
          yield* Effect.logDebug(`cache entry for ${process.description} refers to missing bytes: running it again`)
          return Option.none()
        }
      }
      // A hit is a use: its entry and its bytes are leased again, so GC removes what runs stop using, not this.
      yield* store.leaseUsed(key, [e.stdoutDigest, e.stderrDigest])
      if (cacheContent !== "defer") {
        yield* store.leaseTree(e.outputDigest).pipe(Effect.catchTag("MissingDigest", () => Effect.void))
      }
      return Option.some(
        new ProcessResult({
          ...e,
          durationMs: Date.now() - started,
          actionDigest: key,
          source: "cache-hit",
          timings: { cacheLookup: Date.now() - started }
        })
      )
    }).pipe(
      Effect.catchTag(
        "StoreError",
        (err) =>
          Effect.as(Effect.logWarning(`action cache lookup failed (${err.message}): running instead`), Option.none())
      )
    )

    if (usable && policy.read) {
      const hit = yield* lookup
      if (Option.isSome(hit)) return hit.value
    }
    const lookupMs = Date.now() - started
    const run = Effect.gen(function*() {
      const result = yield* inner(process, policy)
      if (usable && policy.write && cacheable(process, result)) {
        yield* store.putActionResult(key, Buffer.from(encodeEntry(result)))
      }
      return new ProcessResult({ ...result, actionDigest: key, timings: { ...result.timings, cacheLookup: lookupMs } })
    })
    if (!usable) return yield* run
    const readFirst = policy.read
      ? Effect.flatMap(lookup, Option.match({ onSome: Effect.succeed, onNone: () => run }))
      : run
    return yield* store.withActionLock(key, policy.read ? lookup : Effect.succeedNone, readFirst)
  })
