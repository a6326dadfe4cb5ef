/**
 * The run's last phase: what it leaves for the next one (run records for `kiln explain`, the run memo for the no-op
 * check), and its report. Failing to record costs the next run time, never a build: it is a warning.
 *
 * @internal
 */
import * as Effect from "effect/Effect"
import type { RunReport } from "../Engine.js"
import { keyOf, type MemoConsulted } from "./memo/memoConsult.js"
import * as MemoRecord from "./memo/memoRecord.js"
import * as RunRecords from "./runRecords.js"
import type { RunState } from "./runState.js"

/**
 * The processes the memo may vouch for next time, with the evidence this run gathered for each. `inputsChanged`: the
 * tickets of processes whose mounted directories changed while they ran (their results are not cached).
 */
const memoCandidates = (state: RunState, inputsChanged: ReadonlySet<number>): Array<MemoRecord.Candidate> =>
  state.reports.flatMap((r) => {
    const result = state.nodes.get(r.name)!.result
    const out = state.outputsSeen.get(r.name)
    // Only a result that is the one written back, of a process that may be cached, and that the action cache holds
    // (a run with cache writes off leaves what it ran out of it): the memo answers as the cache would.
    if (!r.ok || state.remembered.has(r.name) || result === undefined || out?.result !== result) return []
    if (state.config.processes[r.name]!.cache === "never" || !result.reproducible) return []
    if (result.inputsCheck !== undefined && inputsChanged.has(result.inputsCheck)) return []
    if (result.source === "ran" && !state.policy.write) return []
    // Written back again from the memo's result: the inputs its entry vouched for at the start carry over.
    const carried = state.owned.has(r.name) ? undefined : state.restored.get(r.name)
    if (carried !== undefined) {
      return [{
        name: r.name,
        result,
        files: {},
        inputs: [],
        wholes: [],
        outputs: out.seen,
        deps: carried.deps,
        carried
      }]
    }
    return [{
      name: r.name,
      result,
      files: state.owned.get(r.name)?.files ?? {},
      inputs: state.inputsSeen.get(r.name) ?? [],
      wholes: state.wholeSeen.get(r.name) ?? [],
      outputs: out.seen,
      deps: state.records.get(r.name)?.deps
    }]
  })

/** @internal */
export const record = (state: RunState, memo: MemoConsulted) =>
  Effect.gen(function*() {
    // The check of what processes mounted, made now for those still waiting: its warnings come before the run's
    // last line, and the memo holds only what the action cache will.
    const inputsChanged = yield* state.runner.settleInputs
    const root = state.store.options.root
    yield* Effect.try(() => RunRecords.write(root, state.workspace, state.records)).pipe(
      Effect.catchAll((e) => Effect.logWarning(`could not record the run for \`kiln explain\`: ${e.error}`))
    )
    // Whether the next run that runs something should start the sandboxer at once: this run's answer, or, when
    // nothing ran here, the last one's.
    const ranHere = state.reports.some((p) => p.source === "ran")
    const sandboxer = (yield* state.runner.sandboxerUsed) || (!ranHere && memo.previous?.sandboxer === true)
    yield* MemoRecord.record({
      root,
      sandboxer,
      workspace: state.workspace,
      config: state.config,
      configHash: state.options.configHash ?? "",
      configText: state.options.configText,
      generation: memo.generation,
      previous: memo.previous,
      sandbox: memo.sandbox,
      startedNs: BigInt(state.started) * 1_000_000n,
      names: new Set(state.names),
      remembered: new Set(state.remembered.keys()),
      candidates: memoCandidates(state, inputsChanged),
      keyOf: (name) => keyOf(state.config, name)
    }).pipe(
      Effect.catchAll((e) =>
        Effect.logWarning(`could not write the run memo (the next run checks every input again): ${e.message}`)
      )
    )
    // The entries that waited for that check, committed meanwhile, are in before the run ends (as those of the
    // processes that mounted nothing mostly were by then): a store copied when kiln exits (a CI cache) holds them.
    yield* state.store.actionsWritten
  })

/** The run's report: processes in the order they started. @internal */
export const reportOf = (state: RunState): RunReport => {
  const order = new Map(state.names.map((n, i) => [n, i]))
  const processes = [...state.reports].sort((a, b) => a.startMs - b.startMs || order.get(a.name)! - order.get(b.name)!)
  return {
    processes,
    ran: processes.filter((p) => p.source === "ran" || p.source === "remote").length,
    remoteExecuted: processes.filter((p) => p.source === "remote").length,
    cacheHits: processes.filter((p) => p.source === "cache-hit" || p.source === "remote-cache").length,
    remoteCacheHits: processes.filter((p) => p.source === "remote-cache").length,
    failed: processes.filter((p) => !p.ok && p.source !== "skipped").length,
    backtracks: processes.reduce((n, p) => n + p.backtracks, 0),
    wallMs: Date.now() - state.started
  }
}
