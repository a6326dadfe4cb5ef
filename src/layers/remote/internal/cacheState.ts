/**
 * The state the remote cache's phases share over a run: its connection, what the probe found, what this run has
 * learnt of the server's entries and blobs, the upload queue, and the counts its stats report. Each phase (probe,
 * lookup and trees, uploads and the journal's drain, describe) is a module of its own over this one record; `cache.ts`
 * makes it and composes them.
 *
 * @internal
 */
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import type * as Fiber from "effect/Fiber"
import type * as Option from "effect/Option"
import * as Queue from "effect/Queue"
import type * as Scope from "effect/Scope"
import type * as Digest from "../../../domain/Digest.js"
import * as Permits from "../../../domain/Permits.js"
import type { Entry } from "../../../domain/RemoteTier.js"
import type { StoreError } from "../../../domain/StoreErrors.js"
import type { Service as StoreService } from "../../store/Store.js"
import type { Capabilities } from "../Capabilities.js"
import type { Options } from "../RemoteCache.js"
import type { RemoteError } from "../RemoteErrors.js"
import type { Settings } from "../RemoteSettings.js"
import * as Blobs from "./blobs.js"
import type { Calls } from "./calls.js"
import * as Journal from "./journal.js"
import type { Transport } from "./transport.js"

/** @internal */
export type UploadError = RemoteError | Digest.MissingDigest | StoreError

type Transfers = ReturnType<typeof Blobs.make>

/** Remote lookups at once, unless the options say (`Options.lookupConcurrency`). @internal */
export const DEFAULT_LOOKUP_CONCURRENCY = 16

/** @internal */
export interface CacheState {
  readonly settings: Settings
  readonly options: Options
  readonly store: StoreService
  readonly calls: Calls
  readonly transport: Transport
  /** The server's name as messages and stats show it. */
  readonly endpoint: string
  /** The upload journal of this endpoint (and instance name), in the store's root. */
  readonly journalDir: string
  /** Whether the mode lets hits be looked up (`read`, `read-write`), and results be offered (`write`, `read-write`). */
  readonly reads: boolean
  readonly writes: boolean
  readonly fetchTrees: Transfers["fetchTrees"]
  readonly downloadFiles: Transfers["downloadFiles"]
  /** The probe's answer, started while the run starts: the first call that needs the remote waits for it. */
  readonly probed: Deferred.Deferred<Capabilities, RemoteError>
  /** Why the remote is not used at all, once the probe says so: said once, and in the stats. */
  unusable: string | undefined
  /** With `required`, the first remote failure of the run. */
  firstFailure: RemoteError | undefined
  /** Whether an upload the server refused for its configuration (not an outage) was said: once a run. */
  refusalSaid: boolean
  /** Action keys whose entries were found unusable: never looked up again this run; their producers replace them. */
  readonly stale: Set<string>
  /** Blobs the server gave wrong bytes for: uploaded again whatever FindMissingBlobs says. */
  readonly corrupt: Set<string>
  /** Remote hits made local. */
  hits: number
  /** Processes the executor ran, and those it could not take (they ran locally); its side counts them. */
  readonly execCounters: { executed: number; fallbacks: number }
  /** `ActionResult`s the server took from the journal. */
  uploadedActions: number
  /** Journal entries waiting for an upload fiber. */
  readonly queue: Queue.Queue<Digest.Digest>
  /** Action keys queued or being uploaded: each is queued once at a time. */
  readonly queued: Set<string>
  /** How many of them: `flush` waits for none. */
  inFlight: number
  /** Digests the server has been given or has confirmed in this run. */
  readonly present: Set<string>
  /** Blobs some action's upload is asking about or sending now: another action waits for it instead. */
  readonly inFlightBlobs: Map<string, Deferred.Deferred<void, UploadError>>
  /**
   * Lookups going on beside the run's graph, by action key, for processes the executor will be asked to run (see
   * `lookup.ts`): each execution takes its own.
   */
  readonly lookupsAhead: Map<string, Fiber.RuntimeFiber<Option.Option<Entry>>>
  /** How many of them ask the server at once. */
  readonly lookupsAheadBound: Permits.Permits
  /** The remote's scope (the run's): where lookups ahead run, and are interrupted at its end. */
  readonly scope: Scope.Scope
}

/** @internal */
export const make = (
  base: Pick<CacheState, "settings" | "options" | "store" | "calls" | "transport">
): Effect.Effect<CacheState, never, Scope.Scope> =>
  Effect.gen(function*() {
    const endpoint = base.settings.endpoint.display
    const { downloadFiles, fetchTrees } = Blobs.make(base.store, base.transport, base.calls, endpoint)
    return {
      ...base,
      endpoint,
      journalDir: Journal.directoryOf(base.store.options.root, endpoint, base.settings.instanceName),
      reads: base.settings.mode !== "write",
      writes: base.settings.mode !== "read",
      fetchTrees,
      downloadFiles,
      probed: yield* Deferred.make<Capabilities, RemoteError>(),
      unusable: undefined,
      firstFailure: undefined,
      refusalSaid: false,
      stale: new Set(),
      corrupt: new Set(),
      hits: 0,
      execCounters: { executed: 0, fallbacks: 0 },
      uploadedActions: 0,
      queue: yield* Queue.unbounded<Digest.Digest>(),
      queued: new Set(),
      inFlight: 0,
      present: new Set(),
      inFlightBlobs: new Map(),
      lookupsAhead: new Map(),
      lookupsAheadBound: yield* Permits.make(base.options.lookupConcurrency ?? DEFAULT_LOOKUP_CONCURRENCY),
      scope: yield* Effect.scope
    }
  })

/** Keeps a remote failure for `required`: the run then fails naming the first. @internal */
export const failed = (state: CacheState, e: RemoteError): Effect.Effect<void> =>
  Effect.sync(() => {
    if (state.settings.required && state.firstFailure === undefined) state.firstFailure = e
  })

/** Notes the blob a failure says the server gave wrong bytes for: it is sent again. @internal */
export const noteCorrupt = (state: CacheState, e: RemoteError): Effect.Effect<void> =>
  Effect.sync(() => {
    if (e.corruptBlob !== undefined) state.corrupt.add(e.corruptBlob)
  })
