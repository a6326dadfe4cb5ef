/**
 * The remote cache: a REAPI server or a Bazel HTTP cache behind the local store, as a layer. It is the runner's
 * `RemoteTier` (looked up after the local action cache, a hit written into the local store) and the upload journal's
 * drain. It never fails a build unless asked (`required`): a probe at start with a short deadline, a breaker that
 * stops calls after repeated failures and lets one through later, retries only where they can help, and uploads off
 * the build's path, resumed by the next run when this one ends first.
 *
 * @since 0.1.0
 */
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import type * as Option from "effect/Option"
import * as ProcessName from "../../domain/config/ProcessName.js"
import { RemoteTier } from "../../domain/RemoteTier.js"
import { type CacheContent, defaultCacheContent } from "../runner/ProcessRunner.js"
import type { Store } from "../store/Store.js"
import type { Capabilities } from "./Capabilities.js"
import type { RemoteError } from "./RemoteErrors.js"
import type { Settings } from "./RemoteSettings.js"

/**
 * What the remote did in a run, for the summary and the closing lines.
 *
 * @since 0.1.0
 * @category models
 */
export interface Stats {
  readonly endpoint: string
  readonly remoteCacheHits: number
  readonly uploadedBytes: number
  readonly downloadedBytes: number
  /** Uploads left in the journal (for the next run or `kiln remote flush`). */
  readonly pendingUploads: number
  readonly uploadedActions: number
  /** Processes run on the executor, and processes it could not take that ran locally instead. */
  readonly remoteExecuted: number
  readonly remoteFallbacks: number
  /** Error code → count (NOT_FOUND, a miss, is not an error). */
  readonly remoteErrors: Readonly<Record<string, number>>
  /**
   * Why the remote was not used at all, when it was not, to follow its name: "is unreachable (…)", "has no action
   * cache (a CAS-only server)".
   */
  readonly unusable?: string
  /**
   * The breakers that opened in the run (the lookups', the transfers'): what opened each first, how many times, and
   * how many calls and lookups it turned away.
   */
  readonly breakers?: Readonly<
    Partial<Record<"lookup" | "transfer", { readonly opened: number; readonly why: string; readonly refused: number }>>
  >
}

/**
 * @since 0.1.0
 * @category models
 */
export interface Service {
  readonly settings: Settings
  /** The probe's answer (awaited): what the server supports, or why it cannot be used. */
  readonly capabilities: Effect.Effect<Capabilities, RemoteError>
  /**
   * Waits for the uploads queued so far, at most `waitMs`; says how many are left in the journal. With `all`, the
   * journal's older entries (other runs') are taken up too.
   */
  readonly flush: (waitMs: number) => Effect.Effect<number>
  readonly stats: Effect.Effect<Stats>
  /** With `required`, the first remote failure of the run: the CLI exits 1 naming it. */
  readonly failure: Effect.Effect<Option.Option<RemoteError>>
}

/**
 * @since 0.1.0
 * @category tags
 */
export class RemoteCache extends Context.Tag("kiln/RemoteCache")<RemoteCache, Service>() {}

/**
 * @since 0.1.0
 * @category models
 */
export interface Options {
  readonly version: string
  /**
   * How a remote hit's content is checked: the runner's `ProcessRunner.CacheContent`, whose default
   * (`ProcessRunner.defaultCacheContent`) is this one's too.
   */
  readonly cacheContent?: CacheContent
  /** Uploads in flight at once (actions). Default 4. */
  readonly uploadConcurrency?: number
  /** Lookups in flight at once. Default 16. */
  readonly lookupConcurrency?: number
  /** Take up the journal's uploads (default true; `kiln remote status` only probes). */
  readonly drain?: boolean
}

/** @internal */
export const describe = (e: RemoteError) => `${e.code}${e.detail ? `: ${ProcessName.printable(e.detail)}` : ""}`

/**
 * What a failed probe says of the server, to follow its name: it could not be reached, or it answered no (a missing
 * credential, a proxy's error page).
 *
 * @since 0.1.0
 * @category models
 */
export const probeFailure = (e: RemoteError): string =>
  e.code === "UNAVAILABLE" || e.code === "DEADLINE_EXCEEDED"
    ? `is unreachable (${describe(e)})`
    : `refused kiln's probe (${describe(e)})`

/**
 * What a server that does not offer SHA-256 is said to do, to follow its name.
 *
 * @since 0.1.0
 * @category models
 */
export const withoutSha256 = (offered: ReadonlyArray<string>): string =>
  `does not offer SHA-256 (only ${offered.join(", ") || "none"})`

/**
 * The remote cache, and the runner's `RemoteTier` over it. Its clients (grpc-js, protobufjs) load only here, when a
 * run names a remote: evaluating them is a sizeable share of an edit run, which most runs would pay for nothing.
 *
 * @since 0.1.0
 * @category layers
 */
export const layer = (settings: Settings, options: Options): Layer.Layer<RemoteCache | RemoteTier, never, Store> =>
  Layer.scopedContext(
    Effect.flatMap(
      Effect.promise(() => import("./internal/cache.js")),
      (impl) =>
        Effect.map(
          impl.make(settings, { ...options, cacheContent: options.cacheContent ?? defaultCacheContent }),
          ({ service, tier }) => Context.make(RemoteCache, service).pipe(Context.add(RemoteTier, tier))
        )
    )
  )
