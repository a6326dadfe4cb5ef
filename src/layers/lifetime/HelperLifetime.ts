/**
 * The lifetime of kiln's helper processes (the spawner, the sandboxer), as a layer of its own. Built beneath the
 * Store, it is released after the Store has released its LMDB environments, and the helpers end with it: while this
 * process holds an environment open, a SIGKILL of it leaves reader slots that only a live watchdog (a helper)
 * clears. Without it in the layer graph, each helper ends with the layer that started it.
 *
 * @since 0.1.0
 */
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Scope from "effect/Scope"

/**
 * @since 0.1.0
 * @category models
 */
export interface Service {
  /** Runs `finalizer` when the lifetime ends (finalizers added later run first). */
  readonly addFinalizer: (finalizer: Effect.Effect<void>) => Effect.Effect<void>
}

/**
 * @since 0.1.0
 * @category tags
 */
export class HelperLifetime extends Context.Tag("kiln/HelperLifetime")<HelperLifetime, Service>() {}

/**
 * The lifetime as the caller's scope: what is added to it ends when that scope closes.
 *
 * @since 0.1.0
 * @category constructors
 */
export const make: Effect.Effect<Service, never, Scope.Scope> = Effect.map(
  Effect.scope,
  (scope): Service => ({ addFinalizer: (f) => Scope.addFinalizer(scope, f) })
)

/**
 * @since 0.1.0
 * @category layers
 */
export const layer: Layer.Layer<HelperLifetime> = Layer.scoped(HelperLifetime, make)

/**
 * Where a helper started now ends: `finalizer` is added to the lifetime when the layer graph has one, else to the
 * caller's scope.
 *
 * @since 0.1.0
 * @category combinators
 */
export const endWith = (finalizer: Effect.Effect<void>): Effect.Effect<void, never, Scope.Scope> =>
  Effect.flatMap(
    Effect.serviceOption(HelperLifetime),
    (lifetime) =>
      lifetime._tag === "Some" ? lifetime.value.addFinalizer(finalizer) : Effect.addFinalizer(() => finalizer)
  )
