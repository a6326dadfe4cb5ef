/**
 * `Engine.run`: the phases in order over one `RunState`. Memo consult → own inputs and cache lookup (waves) →
 * the graph (execute with backtracking, write-back, reports) → record.
 *
 * @internal
 */
import * as Effect from "effect/Effect"
import * as path from "node:path"
import { InvalidConfig } from "../../../domain/config/Config.js"
import * as GraphOrder from "../../../domain/GraphOrder.js"
import type { ProcessRunner } from "../../runner/ProcessRunner.js"
import * as Layout from "../../store/Layout.js"
import type { Store } from "../../store/Store.js"
import type { Workspace } from "../../workspace/Workspace.js"
import type { RunOptions, RunReport } from "../Engine.js"
import { missingInputs, symlinkedPaths } from "./inputs.js"
import { findHits } from "./lookup.js"
import { consult, sandboxModeNow } from "./memo/memoConsult.js"
import { record, reportOf } from "./record.js"
import * as RunState from "./runState.js"
import { runGraph } from "./settle.js"
import * as WorkspaceLock from "./workspaceLock.js"

/** @internal */
export const run = (
  store: Store["Type"],
  runner: ProcessRunner["Type"],
  workspaceWriter: Workspace["Type"],
  options: RunOptions
) =>
  Effect.gen(function*() {
    const started = Date.now()
    const { config } = options
    if (config.tasks !== undefined) {
      // A library caller's config as parsed: its processes' deps may name processes only the tasks give.
      return yield* new InvalidConfig({
        file: options.configName ?? "kiln.json",
        path: "tasks",
        detail: "the engine runs processes: expand the tasks first (TaskExpansion.expand)"
      })
    }
    if (config.defaults !== undefined || Object.values(config.processes).some((pc) => pc.passEnv !== undefined)) {
      // A library caller's config as parsed: its processes would run without what the defaults or passEnv give.
      return yield* new InvalidConfig({
        file: options.configName ?? "kiln.json",
        path: config.defaults !== undefined ? "defaults" : "processes",
        detail: "the engine runs processes: resolve the defaults and passEnv first (TaskExpansion.expand)"
      })
    }
    const workspace = path.resolve(options.workspace)
    const depsOf = (name: string) => config.processes[name]!.deps ?? []
    const names = GraphOrder.closure(depsOf, options.targets ?? Object.keys(config.processes))
    const ordered = GraphOrder.depsFirst(depsOf, names)
    const symlinked = symlinkedPaths(workspace, config, names, options.configName ?? "kiln.json")
    if (symlinked !== undefined) return yield* symlinked
    const missing = missingInputs(workspace, config, names, options.configName ?? "kiln.json")
    if (missing !== undefined) return yield* missing
    const memo = consult({
      root: store.options.root,
      workspace,
      config,
      ordered,
      depsOf,
      use: RunState.policyOf(options.cache ?? "read-write").read && options.memo !== false,
      sandbox: yield* sandboxModeNow
    })
    // A process the memo knew whose inputs no longer hold will most likely run: its helpers start now, beside the
    // snapshot, rather than once the snapshot has hashed what changed. The sandboxer (a Node start) only if the last
    // run that recorded needed it: a workspace whose sandboxes are all small never does.
    if (memo.previous !== undefined && names.some((n) => !memo.remembered.has(n) && !memo.restored.has(n))) {
      yield* runner.warmUp
      if (memo.previous.sandboxer === true) yield* runner.warmUpSandboxer
    }
    // What the memo vouches for is not looked at again: the few files of the rest are hashed rather than the whole
    // workspace's stat index read (and rewritten), unless there turn out to be more than a few.
    const session = yield* store.snapshotSession(workspace, {
      lazy: memo.remembered.size + memo.restored.size > 0,
      vouched: memo.vouched,
      ...(options.onHashing !== undefined ? { progress: options.onHashing } : {})
    })
    // Released when the run's scope closes; taken only if something is written back.
    const inStore = path.join(Layout.ownedDirectory(store.options.root, "engine"), "workspace-locks")
    const lock = yield* WorkspaceLock.make(workspace, options.lockDir ?? inStore, inStore)
    const state = RunState.make({
      lock,
      store,
      runner,
      workspaceWriter,
      options,
      config,
      names,
      ordered,
      session,
      remembered: memo.remembered,
      restored: memo.restored,
      started
    })
    yield* findHits(state)
    yield* runGraph(state)
    yield* record(state, memo)
    return reportOf(state) satisfies RunReport
  })
