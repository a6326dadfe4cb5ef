/**
 * kiln's whole execution stack as one layer, composed as the `kiln` CLI composes it: the Store, then the Sandboxer,
 * Sandboxes and (when asked) the remote cache over it, then the ProcessRunner, then the Workspace and the Engine,
 * with the helpers' lifetime (`HelperLifetime`) beneath them all. An embedding app gets the CLI's teardown order with
 * it: the Store releases its LMDB environments before the spawner and the sandboxer (the watchdogs of what this
 * process holds open) are stopped.
 *
 * @since 0.1.0
 */
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as ExecutionStrategy from "effect/ExecutionStrategy"
import * as Layer from "effect/Layer"
import * as Scope from "effect/Scope"
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
 * Builds the runner's services in one scope, each constructor given the context of those before it: the order
 * `runnerLayer` documents, without a layer per service. Composed as layers (`provideMerge`, `mergeAll`), each service
 * was built through the memo map in a scope and fibers of its own, a cost every run's start paid again
 * (docs/bench-log.md). The scope's finalizers run in reverse: the ProcessRunner closes first, the
 * Store after the Sandboxes and the Sandboxer; the helpers' lifetime is a scope forked before them all, so it ends
 * last (`test/examples/library.test.ts` holds that order).
 */
const buildRunner = (options: Options) =>
  Effect.gen(function*() {
    const scope = yield* Effect.scope
    const helpers = yield* Scope.fork(scope, ExecutionStrategy.sequential)
    const beneath = Context.make(SandboxMode.SandboxMode, options.sandbox ?? "auto").pipe(
      Context.add(HelperLifetime.HelperLifetime, yield* Scope.extend(HelperLifetime.make, helpers))
    )
    const withStore = Context.add(beneath, Store.Store, yield* Store.make(options.store))
    const sandboxer = yield* Effect.provide(Sandboxer.make(options.sandboxer), withStore)
    const withSandboxes = withStore.pipe(
      Context.add(Sandboxer.Sandboxer, sandboxer),
      Context.add(Sandboxes.Sandboxes, yield* Sandboxes.make(options.sandboxes))
    )
    const withRemote: Context.Context<Exclude<Services, ProcessRunner.ProcessRunner>> = options.remote === undefined ?
      withSandboxes :
      Context.merge(
        withSandboxes,
        yield* Effect.provide(
          Layer.buildWithScope(
            remoteLayer(options.remote, {
              ...(options.runner?.cacheContent !== undefined ? { cacheContent: options.runner.cacheContent } : {})
            }),
            scope
          ),
          withSandboxes
        )
      )
    const runner = yield* Effect.provide(ProcessRunner.make(options.runner), withRemote)
    return Context.add(withRemote, ProcessRunner.ProcessRunner, runner)
  })

/**
 * Store → Sandboxer, Sandboxes (and the remote cache) → ProcessRunner, with the helpers' lifetime beneath the Store:
 * they end after it has released its environments (see `HelperLifetime`).
 *
 * @since 0.1.0
 * @category layers
 */
export const runnerLayer = (options: Options = {}): Layer.Layer<Services, BuildError> =>
  Layer.scopedContext(buildRunner(options))

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
  Layer.scopedContext(Effect.gen(function*() {
    const runner = yield* buildRunner(options)
    const workspace = yield* Effect.provide(Workspace.make, runner)
    const withWorkspace = Context.add(runner, Workspace.Workspace, workspace)
    return Context.add(withWorkspace, Engine.Engine, yield* Effect.provide(Engine.make, withWorkspace))
  }))
