/**
 * kiln's whole execution stack as one layer, composed as the `kiln` CLI composes it: the Store, then the Sandboxer,
 * Sandboxes and (when asked) the remote cache over it, then the ProcessRunner, then the Workspace and the Engine,
 * with the helpers' lifetime (`HelperLifetime`) beneath them all. An embedding app gets the CLI's teardown order with
 * it: the Store releases its LMDB environments before the spawner and the sandboxer (the watchdogs of what this
 * process holds open) are stopped.
 *
 * @since 0.1.0
 */
import * as Layer from "effect/Layer"
import type { StoreConfigConflict, StoreError } from "../../domain/StoreErrors.js"
import type { UnsafeDirectory } from "../../domain/UnsafeDirectory.js"
import { VERSION } from "../../domain/Version.js"
import * as Engine from "../engine/Engine.js"
import * as HelperLifetime from "../lifetime/HelperLifetime.js"
import * as RemoteCache from "../remote/RemoteCache.js"
import type { Settings as RemoteSettings } from "../remote/RemoteSettings.js"
import * as ProcessRunner from "../runner/ProcessRunner.js"
import * as SandboxMode from "../runner/SandboxMode.js"
import * as Sandboxes from "../sandbox/Sandboxes.js"
import * as Sandboxer from "../sandboxer/Sandboxer.js"
import * as Store from "../store/Store.js"
import * as Workspace from "../workspace/Workspace.js"

/**
 * Each service's options, as its own `layer` takes them; every one may be left out.
 *
 * @since 0.1.0
 * @category models
 */
export interface Options {
  readonly store?: Partial<Store.Options>
  readonly sandboxer?: Sandboxer.Options
  readonly sandboxes?: Sandboxes.Options
  /** Its `cacheContent` is the remote cache's too. */
  readonly runner?: ProcessRunner.Options
  /**
   * A remote cache behind the store (see `RemoteSettings.resolve`): the runner asks it after the local action cache,
   * and the `RemoteCache` service (its stats, its `flush`) is in the layer's context beside the others.
   */
  readonly remote?: RemoteSettings
  /** How local processes are sandboxed (see `SandboxMode`); default `auto`. */
  readonly sandbox?: SandboxMode.Mode
}

/**
 * What the runner's layer provides. With `remote`, `RemoteCache` is there too (look it up with
 * `Effect.serviceOption`).
 *
 * @since 0.1.0
 * @category models
 */
export type Services =
  | Store.Store
  | Sandboxer.Sandboxer
  | Sandboxes.Sandboxes
  | ProcessRunner.ProcessRunner
  | HelperLifetime.HelperLifetime
  | SandboxMode.SandboxMode

/**
 * What building the stack can fail with: a store that cannot be opened as asked, or a root that is not the user's
 * own.
 *
 * @since 0.1.0
 * @category models
 */
export type BuildError = StoreError | StoreConfigConflict | UnsafeDirectory

/**
 * The remote cache over the store, as kiln's commands use it: its `cacheContent` is the runner's (see
 * `ProcessRunner.CacheContent`), and `drain: false` only probes.
 *
 * @since 0.1.0
 * @category layers
 */
export const remoteLayer = (
  settings: RemoteSettings,
  options: { readonly cacheContent?: ProcessRunner.CacheContent; readonly drain?: boolean } = {}
) => RemoteCache.layer(settings, { version: VERSION, ...options })

/**
 * Store → Sandboxer, Sandboxes (and the remote cache) → ProcessRunner, with the helpers' lifetime beneath the Store:
 * they end after it has released its environments (see `HelperLifetime`).
 *
 * @since 0.1.0
 * @category layers
 */
export const runnerLayer = (options: Options = {}): Layer.Layer<Services, BuildError> =>
  ProcessRunner.layer(options.runner).pipe(
    Layer.provideMerge(
      Layer.mergeAll(
        Sandboxer.layer(options.sandboxer),
        Sandboxes.layer(options.sandboxes),
        options.remote !== undefined
          ? remoteLayer(options.remote, {
            ...(options.runner?.cacheContent !== undefined ? { cacheContent: options.runner.cacheContent } : {})
          })
          : Layer.empty
      )
    ),
    Layer.provideMerge(Store.layer(options.store)),
    Layer.provideMerge(HelperLifetime.layer),
    Layer.provideMerge(SandboxMode.layer(options.sandbox ?? "auto"))
  )

/**
 * The whole stack: {@link runnerLayer}, the Workspace (which writes results into the workspace) and the Engine on
 * them, to run a `kiln.json` graph (`Engine.run`) as well as single processes (`ProcessRunner.run`).
 *
 * @since 0.1.0
 * @category layers
 */
export const layer = (
  options: Options = {}
): Layer.Layer<Services | Workspace.Workspace | Engine.Engine, BuildError> =>
  Engine.layer.pipe(Layer.provideMerge(Workspace.layer), Layer.provideMerge(runnerLayer(options)))
