/**
 * The cache hits of a run, found before anything is scheduled. A process's key holds its deps' outputs, so the graph
 * is looked up wave by wave: a process joins a wave once all its deps are hits, and every key of a wave is read
 * together (one read transaction per store shard). Misses, and anything whose inputs cannot be read, go on to the
 * graph (`settle.ts`), which runs or reports them.
 *
 * Anything that will run needs the runner's helpers, so the first sign of a miss warms them up: their start-up then
 * overlaps the rest of the lookups.
 *
 * @internal
 */
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Digest from "../../../domain/Digest.js"
import type { Process } from "../../../domain/Process.js"
import { inputOf, ownOf, ownOfMany, processOf } from "./inputs.js"
import { rememberedResult } from "./memo/memoConsult.js"
import { depOutputs, depsOf, type RunState } from "./runState.js"

/**
 * Processes whose own inputs are snapshotted together once inputs are new: their contents and directories are stored
 * in one commit per shard. (The contents flush on their own every 32 MiB, so the memory held stays bounded.)
 */
const SNAPSHOT_CHUNK = 256

/** Processes looked up together (one read transaction per store shard each time). */
const LOOKUP_CHUNK = 64

/** Chunks of a wave looked up at once. */
const LOOKUP_CHUNKS_AT_ONCE = 4

/**
 * Every process's own inputs first: a file that had to be hashed (new or changed) or inputs that cannot be read mean
 * something will run. One after another while nothing is new (a fiber each would cost more than such a snapshot);
 * from the first new file on, in chunks stored together, so that the new files' commits (fsyncs) are shared instead
 * of taken in turn. A process whose inputs fail here reports it when the graph reaches it.
 */
const snapshotAll = (state: RunState, unknown: ReadonlyArray<string>) =>
  Effect.gen(function*() {
    let next = 0
    yield* Effect.whileLoop({
      while: () => next < unknown.length && state.session.hashed === 0,
      body: () => Effect.catchAll(ownOf(state, unknown[next++]!), () => state.runner.warmUp),
      step: () => undefined
    })
    if (state.session.hashed > 0) yield* state.runner.warmUp
    if (next < unknown.length) {
      const rest = unknown.slice(next)
      const chunks = Array.from({ length: Math.ceil(rest.length / SNAPSHOT_CHUNK) }, (_, i) => i * SNAPSHOT_CHUNK)
      yield* Effect.forEach(chunks, (i) => ownOfMany(state, rest.slice(i, i + SNAPSHOT_CHUNK)), { discard: true })
    }
  })

/** Looks up one chunk of a wave; says the dependents whose last dep it found a hit. */
const lookUpChunk = (
  state: RunState,
  chunk: ReadonlyArray<string>,
  waiting: Map<string, number>,
  dependents: ReadonlyMap<string, ReadonlyArray<string>>
) =>
  Effect.gen(function*() {
    const candidates: Array<{ name: string; process: Process }> = []
    let unknown = 0
    yield* Effect.forEach(chunk, (name) => {
      const pc = state.config.processes[name]!
      if (pc.cache === "never") return Effect.sync(() => unknown++)
      // A process whose inputs cannot be made here is not a hit; the graph makes them again and reports why.
      return Effect.match(inputOf(state, name), {
        onFailure: () => unknown++,
        onSuccess: (input) => candidates.push({ name, process: processOf(name, pc, input, state.config) })
      })
    }, { discard: true })
    // What misses runs next: a remote executor's processes are looked up remotely beside that, each execution waiting
    // for its own lookup only, not for the whole wave's.
    const found = yield* state.runner.lookup(candidates.map((c) => c.process), { aheadOfExecution: true })
    if (unknown > 0 || found.some(Option.isNone)) yield* state.runner.warmUp
    const ready: Array<string> = []
    candidates.forEach(({ name, process }, i) => {
      const hit = found[i]!
      if (Option.isNone(hit)) {
        state.misses.set(name, { process, deps: depOutputs(state, name) })
        return
      }
      state.hits.set(name, { result: hit.value, process })
      state.hitOrder.push(name)
      // Dependents read it while computing their own inputs.
      state.nodes.get(name)!.result = hit.value
      state.records.get(name)!.actionDigest = Digest.format(hit.value.actionDigest)
      for (const d of dependents.get(name) ?? []) {
        const left = waiting.get(d)! - 1
        waiting.set(d, left)
        if (left === 0) ready.push(d)
      }
    })
    return ready
  })

/** @internal */
export const findHits = (state: RunState) =>
  Effect.gen(function*() {
    const { remembered, restored } = state
    state.hitOrder.push(...state.ordered.filter((n) => remembered.has(n)))
    for (const [name, entry] of remembered) state.nodes.get(name)!.remembered = entry
    if (!state.policy.read) return yield* state.runner.warmUp
    for (const name of state.ordered) {
      const entry = restored.get(name)
      if (entry === undefined) continue
      const result = rememberedResult(entry)
      // Its input root is not made: write-back reads only where its outputs go, and a backtrack makes it afresh.
      const pc = state.config.processes[name]!
      state.hits.set(name, { result, process: processOf(name, pc, Digest.empty, state.config) })
      state.hitOrder.push(name)
      state.nodes.get(name)!.result = result
    }
    const unknown = state.names.filter((n) => !remembered.has(n) && !restored.has(n))
    yield* snapshotAll(state, unknown)
    const waiting = new Map<string, number>()
    const dependents = new Map<string, Array<string>>()
    for (const n of unknown) {
      const deps = depsOf(state, n).filter((d) => !remembered.has(d) && !restored.has(d))
      waiting.set(n, deps.length)
      for (const d of deps) {
        const list = dependents.get(d)
        if (list === undefined) dependents.set(d, [n])
        else list.push(n)
      }
    }
    let wave = unknown.filter((n) => waiting.get(n) === 0)
    while (wave.length > 0) {
      // A wave is looked up in chunks, so that a miss is known early enough to warm the runner up meanwhile.
      const chunks = Array.from({ length: Math.ceil(wave.length / LOOKUP_CHUNK) }, (_, i) => i * LOOKUP_CHUNK)
      const current = wave
      // A few chunks at once: a remote cache's lookups are bound by its latency, not this process's CPU.
      const next = yield* Effect.forEach(
        chunks,
        (start) => lookUpChunk(state, current.slice(start, start + LOOKUP_CHUNK), waiting, dependents),
        { concurrency: LOOKUP_CHUNKS_AT_ONCE }
      )
      wave = next.flat()
    }
  })
