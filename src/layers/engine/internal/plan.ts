/**
 * `Engine.plan`: the dry run. For each process, whether a run would take it from the cache or run it, found as a
 * run's lookup finds it (its run memo, then its action key in the action cache), with nothing run and nothing
 * written into the workspace. A process is keyed on its deps' outputs, so one whose dep would run would run too: its
 * key is not known until the dep has run.
 *
 * @internal
 */
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Option from "effect/Option"
import * as path from "node:path"
import { actionDigest } from "../../../domain/ActionKey.js"
import type { Config } from "../../../domain/config/Config.js"
import * as Digest from "../../../domain/Digest.js"
import * as GraphOrder from "../../../domain/GraphOrder.js"
import type { ProcessRunner } from "../../runner/ProcessRunner.js"
import type { Store } from "../../store/Store.js"
import type { Planned } from "../Engine.js"
import { mergeInputs, processOf, snapshotOwn } from "./inputs.js"
import { consult, rememberedResult } from "./memo/memoConsult.js"

/** @internal */
export interface PlanOptions {
  readonly workspace: string
  readonly config: Config
  /** The processes to plan; their deps are looked at, not listed. */
  readonly names: ReadonlyArray<string>
  readonly configName?: string
}

/** @internal */
export const plan = (store: Store["Type"], runner: ProcessRunner["Type"], options: PlanOptions) =>
  Effect.gen(function*() {
    const { config } = options
    const workspace = path.resolve(options.workspace)
    const depsOf = (name: string) => config.processes[name]!.deps ?? []
    const ordered = GraphOrder.depsFirst(depsOf, GraphOrder.closure(depsOf, options.names))
    const memo = consult({ root: store.options.root, workspace, config, ordered, depsOf, use: true })
    const session = yield* store.snapshotSession(workspace)
    const outputs = new Map<string, Digest.Digest>()
    const found = new Map<string, Planned>()
    const set = (name: string, status: Planned["status"], reason: string, key: string | null) =>
      found.set(name, { name, deps: depsOf(name), status, reason, actionDigest: key })
    for (const name of ordered) {
      const pc = config.processes[name]!
      const remembered = memo.remembered.get(name) ?? memo.restored.get(name)
      if (remembered !== undefined) {
        outputs.set(name, rememberedResult(remembered).outputDigest)
        const why = memo.remembered.has(name)
          ? "nothing changed since its last run"
          : "its inputs are unchanged: its outputs would be written back"
        set(name, "hit", why, remembered.action)
        continue
      }
      const waiting = depsOf(name).find((d) => !outputs.has(d))
      if (waiting !== undefined) {
        set(name, "run", `dep ${waiting} would run first`, null)
        continue
      }
      const own = yield* Effect.either(
        snapshotOwn(store, workspace, name, pc, session, options.configName ?? "kiln.json")
      )
      if (Either.isLeft(own)) {
        set(name, "run", `its inputs cannot be read: ${own.left.message}`, null)
        continue
      }
      const deps = Object.fromEntries(depsOf(name).map((d) => [d, outputs.get(d)!]))
      const p = processOf(name, pc, yield* mergeInputs(store, config, own.right.digest, deps), config)
      const key = Digest.format(actionDigest(p))
      if (pc.cache === "never") {
        set(name, "run", "never cached", key)
        continue
      }
      const [hit] = yield* runner.lookup([p])
      if (hit !== undefined && Option.isSome(hit)) {
        outputs.set(name, hit.value.outputDigest)
        set(name, "hit", "in the cache", key)
      } else {
        set(name, "run", "not in the cache", key)
      }
    }
    return options.names.map((name) => found.get(name)!)
  })
