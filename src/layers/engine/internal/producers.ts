/**
 * Which process of this run produced a digest: what backtracking re-runs when bytes are gone. Results are indexed by
 * the digests they hold only when bytes turn out missing, so a run without backtracking (most) never lists its hits'
 * output trees for it.
 *
 * @internal
 */
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Digest from "../../../domain/Digest.js"
import type { ProcessResult } from "../../../domain/Process.js"
import { resultOf, type RunState } from "./runState.js"

/** Indexes every result not indexed yet. @internal */
export const indexAll = (state: RunState) =>
  Effect.suspend(() => {
    const todo = state.unindexed.splice(0)
    return Effect.forEach(todo, ([name, result]) => index(state, name, result ?? resultOf(state, name)!), {
      discard: true
    })
  })

const index = (state: RunState, name: string, result: ProcessResult) =>
  Effect.gen(function*() {
    const { producers, store } = state
    for (const d of [result.outputDigest, result.stdoutDigest, result.stderrDigest]) producers.set(d.hash, name)
    // Every digest of the tree that can still be read. A directory already gone is indexed by its parent's
    // reference to it, so a consumer's MissingDigest naming it (the walk that failed stopped there too) still
    // finds this producer.
    const stack = [result.outputDigest]
    while (stack.length > 0) {
      const dir = yield* store.getDirectory(stack.pop()!).pipe(
        Effect.asSome,
        Effect.catchTag("MissingDigest", () => Effect.succeedNone)
      )
      if (Option.isNone(dir)) continue
      for (const f of dir.value.files) if (!Digest.isEmpty(f.digest)) producers.set(f.digest.hash, name)
      for (const d of dir.value.directories) {
        producers.set(d.digest.hash, name)
        stack.push(d.digest)
      }
    }
  })
