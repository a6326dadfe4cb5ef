/**
 * The execution stack the commands share: Store → Sandboxer and Sandboxes → ProcessRunner (→ Engine).
 */
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import type { InvalidConfig } from "../domain/Config.js"
import type { KeepSandboxes } from "../domain/Sandbox.js"
import * as Engine from "../engine/Engine.js"
import * as HelperLifetime from "../os/HelperLifetime.js"
import * as ProcessRunner from "../runner/ProcessRunner.js"
import * as Sandboxes from "../sandbox/Sandboxes.js"
import * as Sandboxer from "../sandboxer/Sandboxer.js"
import * as Store from "../store/Store.js"

export interface StackOptions {
  readonly store: Partial<Store.Options>
  readonly sandboxRoot: Option.Option<string>
  readonly namedCachesDir: Option.Option<string>
  readonly keepSandboxes?: KeepSandboxes
  readonly reuseSandboxes?: boolean
  readonly sweepOnStart?: boolean
  readonly runner?: ProcessRunner.Options
}

const some = <K extends string, A>(key: K, o: Option.Option<A>) =>
  Option.match(o, { onNone: () => ({}), onSome: (value) => ({ [key]: value }) as Record<K, A> })

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
        })
      )
    ),
    Layer.provideMerge(Store.layer(o.store)),
    Layer.provideMerge(HelperLifetime.layer)
  )

export const engineStack = (o: StackOptions) => Engine.layer.pipe(Layer.provideMerge(runnerStack(o)))

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
