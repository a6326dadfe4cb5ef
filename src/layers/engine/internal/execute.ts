/**
 * Running one process, with backtracking: when bytes it needs are gone from the store, the process of this run that
 * produced them is re-run with cache reads off (its fresh result replaces the stale entry), and this one is retried.
 * A directory of its own merged inputs that is gone is made again instead: the engine produced it.
 *
 * @internal
 */
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import { actionDigest } from "../../../domain/ActionKey.js"
import * as Digest from "../../../domain/Digest.js"
import type { Process, ProcessResult } from "../../../domain/Process.js"
import { BacktrackLimit, NoProducer } from "../../../domain/RunErrors.js"
import { skippedWriteAt } from "../../store/Store.js"
import type { ProcessFailure } from "../Engine.js"
import { inputOf, processOf, remadeWarning, remake, restoreOwn, workspaceTreesOf } from "./inputs.js"
import { indexAll } from "./producers.js"
import { depOutputs, emit, resultOf, type RunState } from "./runState.js"

/** @internal */
export interface Executed {
  readonly result: ProcessResult
  readonly process: Process
}

/** The process the lookups made for `name` and missed, if its deps' outputs are still those; once. */
const lookedUp = (state: RunState, name: string): Process | undefined => {
  const miss = state.misses.get(name)
  if (miss === undefined) return undefined
  state.misses.delete(name)
  const deps = depOutputs(state, name)
  return Object.entries(miss.deps).every(([d, digest]) => deps[d]?.hash === digest.hash) ? miss.process : undefined
}

/**
 * Told when `name`'s tool starts (it has a slot): its `Started` event, once, and where its report's span starts.
 *
 * @internal
 */
export const started = (state: RunState, name: string): Effect.Effect<void> =>
  Effect.suspend(() => {
    const node = state.nodes.get(name)!
    if (node.startedAt !== undefined) return Effect.void
    node.startedAt = Date.now()
    return emit(state, { _tag: "Started", name })
  })

/** Told when `name`'s tool ended, its slot free: its `Exited` event. @internal */
export const exited = (state: RunState, name: string): Effect.Effect<void> => emit(state, { _tag: "Exited", name })

/** One attempt: the process (the lookup's, or made from its inputs now) through the runner. */
const attempt = (
  state: RunState,
  name: string,
  cache: { read: boolean; write: boolean },
  announce: boolean,
  awaited: boolean
) => {
  const missed = lookedUp(state, name)
  const pc = state.config.processes[name]!
  return Effect.flatMap(
    missed !== undefined
      ? Effect.succeed(missed)
      : Effect.map(inputOf(state, name), (input) => processOf(name, pc, input, state.config)),
    (p) => {
      state.records.get(name)!.actionDigest = Digest.format(actionDigest(p))
      return Effect.zipRight(
        state.options.beforeAttempt?.(name, p.inputDigest, (n) => resultOf(state, n)) ?? Effect.void,
        Effect.map(
          state.runner.run(p, {
            cache: missed === p && cache.read ? { ...cache, missed: true } : cache,
            workspaceTrees: workspaceTreesOf(state, name),
            ...(awaited ? { awaited } : {}),
            ...(announce ? { onStart: started(state, name), onEnd: exited(state, name) } : {}),
            ...(announce && state.options.followOutput === true
              ? { onOutput: (stream, bytes) => emit(state, { _tag: "Output", name, stream, bytes }) }
              : {})
          }),
          (result): Executed => ({ result, process: p })
        )
      )
    }
  )
}

/** Why nothing can re-make `missing`: a second look tells a blob that is gone from one misread. */
const noProducer = (state: RunState, name: string, missing: Digest.MissingDigest) =>
  Effect.gen(function*() {
    const { store } = state
    const look = missing.kind === "directory"
      ? store.hasDirectory(missing.digest)
      : missing.kind === "file"
      ? store.hasFile(missing.digest)
      : Effect.zipWith(store.hasFile(missing.digest), store.hasDirectory(missing.digest), (f, d) => f || d)
    // The second look is advice for the message: a store that cannot answer it leaves it out.
    const presentNow = yield* Effect.orElseSucceed(look, () => undefined)
    const skipped = skippedWriteAt(missing.digest)
    const hashedAt = presentNow === true ? undefined : store.hashedAt(missing.digest)
    return new NoProducer({
      digest: Digest.format(missing.digest),
      consumer: name,
      kind: missing.kind,
      ...(presentNow !== undefined ? { presentNow } : {}),
      ...(skipped !== undefined ? { skippedWriteAt: skipped.toISOString() } : {}),
      ...(hashedAt !== undefined ? { hashedAt } : {})
    })
  })

/**
 * Runs `name` under `cache` until it has a result, backtracking on missing bytes at most `maxBacktracks` times.
 * `announce`: `name` is the process being settled, whose start is told (a producer re-run for it is part of its
 * turn, not a process of its own). `awaited`: a dependent waits for its result alone (see `ProcessRunner.run`).
 *
 * @internal
 */
export const execute = (
  state: RunState,
  name: string,
  cache: { read: boolean; write: boolean },
  announce = false,
  awaited = false
): Effect.Effect<Executed, NoProducer | ProcessFailure> =>
  Effect.gen(function*() {
    const node = state.nodes.get(name)!
    for (;;) {
      const tried = yield* Effect.either(attempt(state, name, cache, announce, awaited))
      if (Either.isRight(tried)) return tried.right
      const e = tried.left
      if (e._tag !== "MissingDigest") return yield* Effect.fail(e)
      yield* indexAll(state)
      const producer = state.producers.get(e.digest.hash)
      if (producer === undefined && e.kind === "directory" && !(node.remade?.has(e.digest.hash) ?? false)) {
        if (node.backtracks < state.maxBacktracks && (yield* remake(state, name, e.digest))) {
          node.backtracks++
          ;(node.remade ??= new Set()).add(e.digest.hash)
          yield* Effect.logWarning(remadeWarning(name, e.digest))
          continue
        }
      }
      // A file of its own inputs gone from the store: stored again from the workspace, once.
      if (producer === undefined && e.kind !== "directory" && !(node.remade?.has(e.digest.hash) ?? false)) {
        if (node.backtracks < state.maxBacktracks && (yield* restoreOwn(state, name, e.digest))) {
          node.backtracks++
          ;(node.remade ??= new Set()).add(e.digest.hash)
          yield* Effect.logWarning(
            `${name}: ${Digest.format(e.digest)}, one of its inputs, was missing from the store: stored it again`
          )
          continue
        }
      }
      if (producer === undefined) return yield* Effect.flip(noProducer(state, name, e))
      // Outputs of a remote hit not fetched yet (validate, defer): fetched now, once, if the remote has them.
      const made = state.nodes.get(producer)!
      if (made.result !== undefined && !(node.fetched?.has(producer) ?? false)) {
        ;(node.fetched ??= new Set()).add(producer)
        if (yield* state.runner.fetchTree(made.result.outputDigest)) continue
      }
      if (node.backtracks >= state.maxBacktracks) {
        return yield* new BacktrackLimit({ attempts: state.maxBacktracks, digest: Digest.format(e.digest) })
      }
      node.backtracks++
      yield* Effect.logWarning(
        `${name}: ${Digest.format(e.digest)} is missing from the store: re-running \`${producer}\`, which produced it`
      )
      // Writes stay on even under --cache read: the fresh result must replace the stale entry.
      const fresh = yield* execute(state, producer, { read: false, write: true })
      state.nodes.get(producer)!.result = fresh.result
      state.unindexed.push([producer, fresh.result])
    }
  })
