/**
 * The remote cache's probe: `GetCapabilities` asked while the run starts, and whether the remote can be used now
 * (its answer, and the breaker). A remote that cannot be used is said once, and the run goes on locally.
 *
 * @internal
 */
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import type { Capabilities } from "../Capabilities.js"
import { probeFailure, withoutSha256 } from "../RemoteCache.js"
import { type CacheState, failed } from "./cacheState.js"
import type { BreakerClass } from "./calls.js"

/** Starts the probe in the layer's scope (the layer then waits for its answer, see `cache.ts`). @internal */
export const start = (state: CacheState) =>
  Effect.forkScoped(Effect.intoDeferred(state.transport.capabilities, state.probed))

/**
 * What the server offers, once the probe has answered; undefined when it cannot be used (the probe failed, it has no
 * action cache, or the breaker of `cls`, the calls the caller means to make, is open after repeated failures). @internal
 */
export const usable = (state: CacheState, cls: BreakerClass): Effect.Effect<Capabilities | undefined> =>
  Effect.gen(function*() {
    const caps = yield* Effect.either(Deferred.await(state.probed))
    if (Either.isLeft(caps)) {
      if (state.unusable === undefined) {
        state.unusable = probeFailure(caps.left)
        yield* failed(state, caps.left)
        yield* Effect.logWarning(`remote cache ${state.endpoint} ${state.unusable}: running locally`)
      }
      return undefined
    }
    if (caps.right.withoutSha256 !== undefined) {
      if (state.unusable === undefined) {
        state.unusable = withoutSha256(caps.right.withoutSha256)
        yield* Effect.logWarning(
          `remote cache ${state.endpoint} ${state.unusable}: kiln's digests are SHA-256; running locally`
        )
      }
      return undefined
    }
    if (caps.right.actionCache === "none") {
      if (state.unusable === undefined) {
        state.unusable = "has no action cache (a CAS-only server)"
        yield* Effect.logWarning(
          `remote cache ${state.endpoint} has no action cache (a CAS-only server): kiln cannot keep results there; running locally`
        )
      }
      return undefined
    }
    return state.calls.open(cls) ? caps.right : undefined
  })
