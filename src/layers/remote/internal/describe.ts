/**
 * What the remote cache says of an action for `kiln explain`: whether it has the entry, and every blob the entry
 * names. Never fails: a remote that cannot say is said to.
 *
 * @internal
 */
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Digest from "../../../domain/Digest.js"
import type { RemoteTier } from "../../../domain/RemoteTier.js"
import type { CacheState } from "./cacheState.js"
import { usable } from "./probe.js"
import * as Results from "./results.js"

/** @internal */
export const describeAction = (state: CacheState): RemoteTier["Type"]["describe"] => (key) =>
  Effect.gen(function*() {
    const { endpoint, transport } = state
    if ((yield* usable(state, "lookup")) === undefined) {
      return `remote cache ${endpoint} ${
        state.unusable ?? "is not in use (its breaker is open after repeated failures)"
      }`
    }
    const raw = yield* transport.getActionResult(key)
    if (Option.isNone(raw)) return `remote cache ${endpoint}: does not have it`
    const missing = yield* transport.findMissing(Results.blobsOf(raw.value))
    return missing.length === 0
      ? `remote cache ${endpoint}: has it, with every blob it names`
      : `remote cache ${endpoint}: has it, but ${missing.length} of its blobs are gone (e.g. ${
        Digest.format(missing[0]!)
      }): it would run again`
  }).pipe(Effect.catchAll((e) => Effect.succeed(`remote cache ${state.endpoint}: cannot say (${e.message})`)))
