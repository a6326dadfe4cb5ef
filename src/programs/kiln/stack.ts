/**
 * The execution stack the commands share: Store → Sandboxer and Sandboxes → ProcessRunner (→ Workspace → Engine).
 */
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import type { InvalidConfig } from "../../domain/Config.js"
import type { KeepSandboxes } from "../../domain/Sandbox.js"
import * as Engine from "../../layers/engine/Engine.js"
import * as HelperLifetime from "../../layers/lifetime/HelperLifetime.js"
import * as RemoteCache from "../../layers/remote/RemoteCache.js"
import type { Settings as RemoteSettings } from "../../layers/remote/RemoteSettings.js"
import * as ProcessRunner from "../../layers/runner/ProcessRunner.js"
import * as Sandboxes from "../../layers/sandbox/Sandboxes.js"
import * as Sandboxer from "../../layers/sandboxer/Sandboxer.js"
import * as Store from "../../layers/store/Store.js"
import * as Workspace from "../../layers/workspace/Workspace.js"
import { VERSION } from "./version.js"

export interface StackOptions {
  readonly store: Partial<Store.Options>
  readonly sandboxRoot: Option.Option<string>
  readonly namedCachesDir: Option.Option<string>
  readonly keepSandboxes?: KeepSandboxes
  readonly reuseSandboxes?: boolean
  readonly sweepOnStart?: boolean
  readonly runner?: ProcessRunner.Options
  /** A remote cache behind the store (the runner asks it after the local cache). */
  readonly remote?: RemoteSettings
}

const some = <K extends string, A>(key: K, o: Option.Option<A>) =>
  Option.match(o, { onNone: () => ({}), onSome: (value) => ({ [key]: value }) as Record<K, A> })

/** The remote cache over the store, for the runner (its `RemoteTier`) and the command (its stats and flush). */
export const remoteLayer = (
  settings: RemoteSettings,
  cacheContent?: ProcessRunner.CacheContent,
  options: { readonly drain?: boolean } = {}
) =>
  RemoteCache.layer(settings, {
    version: VERSION,
    ...options,
    ...(cacheContent !== undefined ? { cacheContent } : {})
  })

/** The helpers' lifetime is beneath the Store: they end after it has released its environments. */
export const runnerStack = (o: StackOptions) =>
  ProcessRunner.layer({ ...o.runner, ...some("namedCachesDir", o.namedCachesDir) }).pipe(
    Layer.provideMerge(
      Layer.mergeAll(
        Sandboxer.layer(),
        Sandboxes.layer({
          keep: o.keepSandboxes ?? "never",
          reuse: o.reuseSandboxes ?? true,
          sweepOnStart: o.sweepOnStart ?? true,
          ...some("root", o.sandboxRoot)
        }),
        o.remote !== undefined ? remoteLayer(o.remote, o.runner?.cacheContent) : Layer.empty
      )
    ),
    Layer.provideMerge(Store.layer(o.store)),
    Layer.provideMerge(HelperLifetime.layer)
  )

export const engineStack = (o: StackOptions) =>
  Engine.layer.pipe(Layer.provideMerge(Workspace.layer), Layer.provideMerge(runnerStack(o)))

/** A config error: its one line on stderr, exit code 2. */
export const exitOnInvalidConfig = <A, E, R>(effect: Effect.Effect<A, E | InvalidConfig, R>) =>
  Effect.catchIf(
    effect,
    (e): e is InvalidConfig => typeof e === "object" && e !== null && "_tag" in e && e._tag === "InvalidConfig",
    (e) =>
      Effect.sync(() => {
        process.stderr.write(`kiln: ${e.message}\n`)
        process.exitCode = 2
      })
  )
