/**
 * The executor's side of the remote tier: processes that may run remotely go to the executor, `remoteJobs` at a
 * time; one it cannot take runs locally with one warning (or fails, with fallback off). The executor is the cache's
 * endpoint, or one of its own: then it has its own connection, probe and record of what its CAS holds, and its
 * results reach the cache as what ran locally does.
 *
 * @internal
 */
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Option from "effect/Option"
import type { Digest } from "../../../domain/Digest.js"
import * as Permits from "../../../domain/Permits.js"
import { CHROOT, type Process, SpawnError } from "../../../domain/Process.js"
import type { Entry, Executed, RemoteTier } from "../../../domain/RemoteTier.js"
import type { Capabilities } from "../Capabilities.js"
import { type Options, probeFailure, withoutSha256 } from "../RemoteCache.js"
import type { RemoteError } from "../RemoteErrors.js"
import type { Settings } from "../RemoteSettings.js"
import * as Blobs from "./blobs.js"
import { connect } from "./connect.js"
import * as Execution from "./execution.js"
import * as Gathered from "./gathered.js"

/** Whether a process names its sandbox's path: it could not run anywhere else. */
const namesItsSandbox = (process: Process) =>
  process.argv.some((a) => a.includes(CHROOT)) || Object.values(process.env).some((v) => v.includes(CHROOT))

/** Whether the executor is asked to run `process` under `settings` (it may still fall back to a local run). */
export const takes = (settings: Settings, process: Process): boolean =>
  settings.executor && process.remote && !namesItsSandbox(process)

/** A remote cache hit as an execution's answer: nothing ran (see `RemoteTier.Executed.cached`). */
const hitOf = (entry: Entry): Executed => ({
  exitCode: entry.exitCode,
  timedOut: entry.timedOut,
  stdoutDigest: entry.stdoutDigest,
  stderrDigest: entry.stderrDigest,
  outputDigest: entry.outputDigest,
  cached: true,
  timings: {}
})

type Side = Execution.Deps & {
  readonly usable: Effect.Effect<Capabilities | undefined>
  /** Why the probe failed, where this side says (the cache's own warning says it otherwise). */
  readonly unusable?: Effect.Effect<string | undefined>
}

/** A connection to an executor apart from the cache: probed while the run starts, closed with the scope. */
const ownSide = (settings: Settings, options: Options, cacheSide: Side) =>
  Effect.gen(function*() {
    const endpoint = settings.executorEndpoint!
    const { calls, transport } = yield* connect({ ...settings, endpoint }, options.version)
    const probed = yield* Deferred.make<Capabilities, RemoteError>()
    yield* Effect.forkScoped(Effect.intoDeferred(transport.capabilities, probed))
    const usable = Effect.map(
      Effect.option(Deferred.await(probed)),
      (caps) =>
        Option.isSome(caps) && caps.value.withoutSha256 === undefined && calls.open("transfer") ? caps.value : undefined
    )
    const unusable = Effect.match(Deferred.await(probed), {
      onFailure: probeFailure,
      onSuccess: (caps) => caps.withoutSha256 !== undefined ? withoutSha256(caps.withoutSha256) : undefined
    })
    return {
      ...Blobs.make(cacheSide.store, transport, calls, endpoint.display),
      unusable,
      store: cacheSide.store,
      transport,
      calls,
      endpoint: endpoint.display,
      present: new Set<string>(),
      inFlight: new Map(),
      usable
    } satisfies Side
  })

export const make = (
  settings: Settings,
  cacheOptions: Options,
  cacheSide: Side & {
    readonly counters: { executed: number; fallbacks: number }
    /** The answer of the cache's lookup left going ahead of an execution (`lookup.ts`), none without one. */
    readonly aheadOf: (key: Digest) => Effect.Effect<Option.Option<Entry>>
  }
) =>
  Effect.gen(function*() {
    const deps = settings.executorEndpoint === undefined ? cacheSide : yield* ownSide(settings, cacheOptions, cacheSide)
    const jobs = yield* Permits.make(settings.remoteJobs)
    // An executor apart from the cache gives every output here: the cache is sent them from the local store.
    const execution = Execution.make({
      ...deps,
      deferOutputs: cacheOptions.cacheContent === "defer" && deps === cacheSide,
      gathered: Gathered.make(deps.transport.upload, yield* Effect.scope)
    })
    const counters = cacheSide.counters
    const scope = yield* Effect.scope
    let downloadsPrepared = false
    let warned = false
    const fallBack = (process: Process, why: string) =>
      Effect.gen(function*() {
        if (!settings.fallback) {
          return yield* new SpawnError({ argv0: process.argv[0], detail: `remote executor ${deps.endpoint}: ${why}` })
        }
        counters.fallbacks++
        if (!warned) {
          warned = true
          yield* Effect.logWarning(`remote executor ${deps.endpoint}: ${why}: running processes locally instead`)
        }
        return Option.none<Executed>()
      })
    const execute: RemoteTier["Type"]["execute"] = (process, key, options) =>
      Effect.gen(function*() {
        if (!takes(settings, process)) return Option.none<Executed>()
        // The cache's lookup of it, left going beside the graph (`lookup.ts`): its hit is the answer, before anything
        // is sent (and before a fallback could run it here).
        const ahead = yield* cacheSide.aheadOf(key)
        if (Option.isSome(ahead)) return Option.some(hitOf(ahead.value))
        const caps = yield* deps.usable
        if (caps === undefined) {
          return yield* fallBack(process, (yield* deps.unusable ?? Effect.succeed(undefined)) ?? "it cannot be used")
        }
        if (!caps.execution) return yield* fallBack(process, "it does not offer remote execution")
        const prepare = deps.transport.prepareDownloads
        if (!downloadsPrepared && prepare !== undefined) {
          downloadsPrepared = true
          yield* Effect.forkIn(prepare, scope)
        }
        // An execution silent for the remote timeout is re-attached to; the process's own timeout bounds the whole.
        const ran = yield* Effect.either(
          execution.run(process, key, settings.timeoutMs, jobs.withPermit, options?.skipCache === true)
        )
        if (Either.isLeft(ran)) {
          const e = ran.left
          return yield* fallBack(
            process,
            e._tag === "RemoteError" ? `${e.code}${e.detail ? `: ${e.detail}` : ""}` : e.message
          )
        }
        if (ran.right.cached !== true) counters.executed++
        return Option.some<Executed>(ran.right)
      })
    /** The executor's own calls, when it is not the cache: their bytes and errors count in the run's totals. */
    return { execute, ownCalls: deps === cacheSide ? undefined : deps.calls }
  })
