/**
 * The remote cache's workings behind `RemoteCache.layer`: its state (`cacheState.ts`) and its phases over it, the
 * probe (`probe.ts`), lookups of hits, one wave's together (`lookup.ts`), the upload journal's drain (`uploads.ts`),
 * `kiln explain`'s question (`describe.ts`), and the executor's side. Loaded only when a run names a remote: its
 * clients (grpc-js, protobufjs) are no part of a run without one.
 *
 * @internal
 */
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import { Store } from "../../store/Store.js"
import type { Options, Service } from "../RemoteCache.js"
import type { Settings } from "../RemoteSettings.js"
import * as CacheState from "./cacheState.js"
import { connect } from "./connect.js"
import { describeAction } from "./describe.js"
import * as Executor from "./executor.js"
import * as Journal from "./journal.js"
import { aheadOf, fetchTree, lookup, takeExecuted } from "./lookup.js"
import * as Probe from "./probe.js"
import * as Uploads from "./uploads.js"

const sumErrors = (a: Readonly<Record<string, number>>, b: Readonly<Record<string, number>>) => {
  const out = { ...a }
  for (const [code, n] of Object.entries(b)) out[code] = (out[code] ?? 0) + n
  return out
}

/**
 * The remote cache over `settings`; the journal lives in the store's root.
 */
export const make = (settings: Settings, options: Options) =>
  Effect.gen(function*() {
    const store = yield* Store
    const { calls, transport } = yield* connect(settings, options.version)
    const state = yield* CacheState.make({ settings, options, store, calls, transport })
    // zstd would need Node's native codec (22.15 and later) and a server that lists it; kiln ships no other codec.
    yield* Effect.logDebug(`remote transfers are uncompressed (Node ${process.versions.node}; zstd needs native zlib)`)
    yield* Probe.start(state)
    yield* Uploads.start(state)
    const executor = yield* Executor.make(settings, options, {
      store,
      transport,
      calls,
      endpoint: state.endpoint,
      present: state.present,
      inFlight: state.inFlightBlobs,
      fetchTrees: state.fetchTrees,
      downloadFiles: state.downloadFiles,
      usable: Probe.usable(state, "transfer"),
      counters: state.execCounters,
      aheadOf: aheadOf(state),
      // With hits read, an answer from the executor's cache is one; without, what it answers counts as executed.
      ...(state.reads ? { takeHit: takeExecuted(state), stale: state.stale } : {})
    })
    // The probe is answered before the layer is ready, so before the run hashes its workspace: hashing a large tree
    // keeps this thread and libuv's pool busy (name resolution waits behind file reads), and the probe's deadline
    // must measure the server, never kiln. A healthy server costs a round trip; an unreachable one its 2 s, which
    // the first lookup waited for anyway.
    yield* Effect.exit(Deferred.await(state.probed))

    const service: Service = {
      settings,
      capabilities: Deferred.await(state.probed),
      flush: Uploads.flush(state),
      stats: Effect.sync(() => ({
        endpoint: state.endpoint,
        remoteCacheHits: state.hits,
        uploadedBytes: calls.counters.uploadedBytes + (executor.ownCalls?.counters.uploadedBytes ?? 0),
        downloadedBytes: calls.counters.downloadedBytes + (executor.ownCalls?.counters.downloadedBytes ?? 0),
        pendingUploads: Journal.count(state.journalDir),
        uploadedActions: state.uploadedActions,
        remoteExecuted: state.execCounters.executed,
        remoteFallbacks: state.execCounters.fallbacks,
        remoteErrors: sumErrors(calls.counters.errors, executor.ownCalls?.counters.errors ?? {}),
        ...(state.unusable !== undefined ? { unusable: state.unusable } : {}),
        ...(Object.keys(calls.breakers()).length > 0 ? { breakers: calls.breakers() } : {})
      })),
      failure: Effect.sync(() => Option.fromNullable(state.firstFailure))
    }
    return {
      service,
      tier: {
        lookup: lookup(state),
        offer: Uploads.offer(state),
        fetchTree: fetchTree(state),
        describe: describeAction(state),
        execute: executor.execute,
        executorJobs: settings.executor ? settings.remoteJobs : 0
      }
    }
  })
