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
import { actionDigest } from "../../../domain/ActionKey.js"
import type * as Digest from "../../../domain/Digest.js"
import { type Process, ProcessResult } from "../../../domain/Process.js"
import type * as RemoteTier from "../../../domain/RemoteTier.js"
import type * as Store from "../../store/Store.js"
import type { CacheContent } from "../ProcessRunner.js"
import { type ActionCache, lookupMany, lookupOne, remoteLookup } from "./cachedLookup.js"
import { cacheable, encodeEntry } from "./cacheEntry.js"
import type { Runner, RunPolicy } from "./runner.js"
import type * as TreeChecks from "./treeChecks.js"

export type { CacheContent }

/** @internal */
export interface Cached {
  readonly run: Runner
  /**
   * Looks many processes up at once, as a run does for every process of a wave whose inputs are known: the entries
   * are read in one transaction per shard. None for a miss, an uncacheable process, or an entry whose bytes are gone.
   */
  readonly lookup: (
    processes: ReadonlyArray<Process>,
    options?: RemoteTier.LookupOptions
  ) => Effect.Effect<Array<Option.Option<ProcessResult>>>
}

/** What one run through the cache carries from phase to phase. */
interface CachedRun {
  readonly cache: ActionCache
  readonly proc: Process
  readonly policy: RunPolicy
  readonly key: Digest.Digest
  /** Whether it may be cached at all (a process cached `never` is not even looked up). */
  readonly usable: boolean
  /** `Date.now()` when its lookup began: its result's duration counts from it. */
  readonly started: number
}

/** A hit before anything runs: the local cache's, else the remote's; none when reads are off or it missed before. */
const hitBefore = (run: CachedRun) =>
  Effect.gen(function*() {
    const { key, policy, proc, started } = run
    if (!(run.usable && policy.read && policy.missed !== true)) return Option.none<ProcessResult>()
    const hit = yield* lookupOne(run.cache, proc, key, started)
    if (Option.isSome(hit)) return hit
    const [remoteHit] = yield* remoteLookup(run.cache, [{ process: proc, key }], started)
    return remoteHit!
  })

/**
 * Runs it behind the cache. The duration is the process's whole span, from the lookup on, as the phases in its
 * timings are: the inner runners each measure only from when they were entered.
 */
const execute = (run: CachedRun, lookupMs: number) =>
  Effect.map(run.cache.inner(run.proc, run.policy), (result) =>
    new ProcessResult(
      {
        ...result,
        actionDigest: run.key,
        durationMs: Date.now() - run.started,
        timings: { ...result.timings, cacheLookup: lookupMs }
      },
      true
    ))

/** Whether a result is offered to the remote cache: what ran here or remotely, under a policy that writes. */
const writable = (run: CachedRun, result: ProcessResult) =>
  (result.source === "ran" || result.source === "remote") && run.policy.write && cacheable(run.proc, result)

/**
 * Whether a result is written into the local cache: what ran, and a remote hit the executor answered from its cache
 * when asked to execute (written as a lookup's remote hit is, so that the next run finds it here).
 */
const storable = (run: CachedRun, result: ProcessResult) =>
  writable(run, result) || (result.source === "remote-cache" && cacheable(run.proc, result))

/** Whether the workspace directories its process mounted held while it ran (true when it mounted none). */
const inputsHeld = (checks: TreeChecks.TreeChecks, result: ProcessResult) =>
  result.inputsCheck === undefined ? Effect.succeed(true) : checks.held(result.inputsCheck)

/**
 * Under the action's lock (one engine on the store runs it at a time): a look again, since another may just have run
 * it, else `executed`. The entry is written after the run, under the lock but off this fiber's path: its commit (an
 * fsync) took longer than a small process's whole run, and it waits for the check of the directories it mounted.
 */
const underLock = (run: CachedRun, executed: ReturnType<typeof execute>, checks: TreeChecks.TreeChecks) => {
  const { cache, key, policy, proc, started } = run
  const again = lookupOne(cache, proc, key, started)
  const readFirst = policy.read
    ? Effect.flatMap(again, Option.match({ onSome: Effect.succeed, onNone: () => executed }))
    : executed
  return cache.store.withActionLock(
    key,
    policy.read ? again : Effect.succeedNone as typeof again,
    readFirst,
    (result) =>
      storable(run, result)
        ? Effect.map(
          inputsHeld(checks, result),
          (held) => held ? Option.some(Buffer.from(encodeEntry(result))) : Option.none()
        )
        : Effect.succeedNone
  )
}

/**
 * What ran goes up in the background, once it is in the local store: a failure, a timeout, an uncacheable result or
 * one whose inputs changed under it never does. One waiting for the check of its inputs is offered once they held,
 * by a fiber of `later`.
 */
const offerRemote = (
  run: CachedRun,
  result: ProcessResult,
  checks: TreeChecks.TreeChecks,
  later: (effect: Effect.Effect<void>) => Effect.Effect<void>
) => {
  const remote = run.cache.remote
  if (remote === undefined || !writable(run, result)) return Effect.void
  const offer = remote.offer(run.proc, run.key, result, result.source === "remote")
  return result.inputsCheck === undefined
    ? offer
    : later(Effect.flatMap(inputsHeld(checks, result), (held) => held ? offer : Effect.void))
}

/** @internal */
export const make = (
  store: Store.Service,
  inner: Runner,
  cacheContent: CacheContent,
  checks: TreeChecks.TreeChecks,
  /** Runs an upload that waits for a check in the background, where the runner's closing waits for it. */
  later: (effect: Effect.Effect<void>) => Effect.Effect<void>,
  remote?: RemoteTier.Service
): Cached => {
  const cache: ActionCache = { store, inner, cacheContent, remote }
  const run: Runner = (proc, policy) =>
    Effect.gen(function*() {
      const started = Date.now()
      const key = actionDigest(proc)
      const cachedRun: CachedRun = { cache, proc, policy, key, usable: proc.cache !== "never", started }
      const hit = yield* hitBefore(cachedRun)
      if (Option.isSome(hit)) return hit.value
      const executed = execute(cachedRun, Date.now() - started)
      if (!cachedRun.usable) return yield* executed
      const result = yield* underLock(cachedRun, executed, checks)
      yield* offerRemote(cachedRun, result, checks, later)
      return result
    })
  return { run, lookup: (processes, options) => lookupMany(cache, processes, options) }
}
