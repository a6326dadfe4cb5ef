/**
 * Recording the run memo costs a directory taken whole once per run, however many processes took it (issue #36: the
 * react-email restore, 39 processes over a 52k-path `node_modules`, spent most of its recording comparing every
 * path of the tree with the directory's, once per process). Counted, not timed: how often the whole directory's
 * observations are read.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"
import type { Config } from "../../src/domain/config/Config.js"
import * as Digest from "../../src/domain/Digest.js"
import type { ProcessResult } from "../../src/domain/Process.js"
import * as MemoRecord from "../../src/layers/engine/internal/memo/memoRecord.js"
import * as RunMemo from "../../src/layers/engine/RunMemo.js"
import type * as SnapshotObservation from "../../src/layers/store/SnapshotObservation.js"
import { tempDir } from "../utils/temp.js"

const PATHS = 200

/** A settled observation (its stat long past), whose path counts its reads. */
const counted = (abs: string, kind: "f" | "d", reads: { n: number }): SnapshotObservation.Present => {
  const o = { kind, evidence: "e", dev: 1n, ino: 2n, mode: 0o100644n, size: 1n, mtimeNs: 1n, ctimeNs: 1n }
  return Object.defineProperty(o, "abs", {
    get: () => {
      reads.n++
      return abs
    },
    enumerable: true
  }) as SnapshotObservation.Present
}

const result = {
  actionDigest: Digest.empty,
  outputDigest: Digest.empty,
  stdoutDigest: Digest.empty,
  stderrDigest: Digest.empty
} as unknown as ProcessResult

/** Records `names` over `previous`, each candidate with its own file and the whole directories given. */
const recordAll = (o: {
  readonly root: string
  readonly workspace: string
  readonly names: ReadonlyArray<string>
  readonly previous: RunMemo.Memo | undefined
  readonly wholes: ReadonlyArray<SnapshotObservation.WholeDirectory>
  /** The processes that ran (default: all of `names`); the others' entries stay as `previous` has them. */
  readonly ran?: ReadonlyArray<string>
}) =>
  MemoRecord.record({
    root: o.root,
    workspace: o.workspace,
    config: { processes: Object.fromEntries(o.names.map((n) => [n, { argv: ["true"] }])) } as unknown as Config,
    configHash: "c",
    configText: undefined,
    generation: "g",
    previous: o.previous,
    sandbox: "auto",
    sandboxer: false,
    startedNs: BigInt(Date.now()) * 1_000_000n,
    names: new Set(o.names),
    remembered: new Set(o.names.filter((n) => !(o.ran ?? o.names).includes(n))),
    candidates: (o.ran ?? o.names).map((name): MemoRecord.Candidate => ({
      name,
      result,
      files: { [`${name}.ts`]: "d", ...(o.wholes.length > 0 ? { "node_modules/": "tree d" } : {}) },
      // As a snapshot gives them: its own paths, and the whole directory's among them.
      inputs: [
        counted(path.join(o.workspace, `${name}.ts`), "f", { n: 0 }),
        ...o.wholes.flatMap((w) => w.observations)
      ],
      wholes: o.wholes,
      outputs: [],
      deps: {}
    })),
    keyOf: (name) => `key-${name}`
  })

/** Records `processes` candidates that all took one whole directory; how often its observations' paths were read. */
const readsFor = (
  processes: number,
  saved?: {
    readonly savedWalk: string
    readonly previousGroups?: Record<string, NonNullable<RunMemo.Memo["groups"]>[string]>
  }
) =>
  Effect.gen(function*() {
    const root = yield* tempDir("kiln-store-")
    const workspace = yield* tempDir()
    const modules = path.join(workspace, "node_modules")
    const reads = { n: 0 }
    const observations = [
      counted(modules, "d", reads),
      ...Array.from({ length: PATHS }, (_, i) => counted(path.join(modules, `f${i}.js`), "f", reads))
    ]
    const whole: SnapshotObservation.WholeDirectory = {
      abs: modules,
      digest: Digest.empty,
      observations,
      unchanged: () => true,
      ...(saved !== undefined ? { savedWalk: saved.savedWalk } : {})
    }
    const names = Array.from({ length: processes }, (_, i) => `p${i}`)
    const previous = saved?.previousGroups === undefined ? undefined : {
      v: RunMemo.FORMAT,
      build: RunMemo.buildId("auto"),
      generation: "g",
      config: "c",
      store: [],
      workspace,
      processes: {},
      groups: saved.previousGroups
    } as unknown as RunMemo.Memo
    yield* recordAll({ root, workspace, names, previous, wholes: [whole] })
    const memo = RunMemo.read(root, workspace)
    return { reads: reads.n, recorded: Object.keys(memo?.processes ?? {}).length, memo }
  }).pipe(Effect.scoped)

describe("MemoRecord", () => {
  it.effect("reads a whole directory's observations as often for ten processes as for one", () =>
    Effect.gen(function*() {
      const one = yield* readsFor(1)
      const ten = yield* readsFor(10)
      // Every process is recorded, its own file by itself and the directory as one group reference.
      assert.strictEqual(one.recorded, 1)
      assert.strictEqual(ten.recorded, 10)
      const entry = ten.memo!.processes["p3"]!
      assert.deepStrictEqual(entry.inputs.map((o) => o[0]), ["p3.ts", "node_modules/"])
      assert.strictEqual(entry.inputs[1]![1], RunMemo.GROUP)
      assert.strictEqual(Object.keys(ten.memo!.groups ?? {}).length, 1)
      assert.isAbove(one.reads, 0)
      assert.strictEqual(ten.reads, one.reads)
    }))

  it.effect("a directory taken from a saved walk is kept under the walk's key, and not made again once the memo has it", () =>
    Effect.gen(function*() {
      const first = yield* readsFor(3, { savedWalk: "5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a" })
      assert.deepStrictEqual(Object.keys(first.memo!.groups ?? {}), ["5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a"])
      assert.strictEqual(first.memo!.processes["p1"]!.inputs[1]![2], "5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a")
      assert.isAbove(first.reads, 0)
      // The next run took the same walk: its group is the one the memo holds, and no path of it is read.
      const again = yield* readsFor(3, {
        savedWalk: "5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a",
        previousGroups: first.memo!.groups!
      })
      assert.strictEqual(again.reads, 0)
      assert.deepStrictEqual(again.memo!.groups, first.memo!.groups)
    }))

  it.effect("a directory recorded under a new key takes the other entries with it: one group, or theirs are dropped", () =>
    Effect.gen(function*() {
      const root = yield* tempDir("kiln-store-")
      const workspace = yield* tempDir()
      const modules = path.join(workspace, "node_modules")
      const observations = Array.from({ length: 20 }, (_, i) => counted(path.join(modules, `f${i}.js`), "f", { n: 0 }))
      const whole = (obs: ReadonlyArray<SnapshotObservation.Present>, savedWalk?: string) => ({
        abs: modules,
        digest: Digest.empty,
        observations: obs,
        unchanged: () => true,
        ...(savedWalk !== undefined ? { savedWalk } : {})
      })
      const names = ["p0", "p1", "p2"]
      // The cold run walked the directory: its group is keyed by what was seen.
      yield* recordAll({ root, workspace, names, previous: undefined, wholes: [whole(observations)] })
      const cold = RunMemo.read(root, workspace)!
      assert.strictEqual(Object.keys(cold.groups ?? {}).length, 1)
      // An edit ran p0 alone, over the same walk taken from its saved file: the others follow it to the walk's key.
      const walk = "5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a"
      yield* recordAll({ root, workspace, names, previous: cold, wholes: [whole(observations, walk)], ran: ["p0"] })
      const edited = RunMemo.read(root, workspace)!
      assert.deepStrictEqual(Object.keys(edited.processes).sort(), names)
      for (const name of names) assert.strictEqual(edited.processes[name]!.inputs[1]![2], walk, name)
      // A walk made again of a changed directory: entries still on the old group could not hold, and are dropped.
      const changed = observations.map((o, i) => i === 3 ? { ...o, abs: o.abs, mtimeNs: 2n } : o)
      yield* recordAll({ root, workspace, names, previous: edited, wholes: [whole(changed)], ran: ["p1"] })
      const after = RunMemo.read(root, workspace)!
      assert.deepStrictEqual(Object.keys(after.processes), ["p1"])
      yield* recordAll({ root, workspace, names, previous: after, wholes: [whole(changed)], ran: ["p2"] })
      const last = RunMemo.read(root, workspace)!
      const referenced = new Set(Object.values(last.processes).map((e) => e.inputs[1]![2]))
      assert.strictEqual(referenced.size, 1, "every entry refers to the one group of the directory as it is")
    }).pipe(Effect.scoped))

  it.effect("a run that records every process again (a restore of 40) appends to the journal, not the whole memo", () =>
    Effect.gen(function*() {
      const root = yield* tempDir("kiln-store-")
      const workspace = yield* tempDir()
      const names = Array.from({ length: 40 }, (_, i) => `p${i}`)
      const recordOnce = (previous: RunMemo.Memo | undefined) =>
        recordAll({ root, workspace, names, previous, wholes: [] })
      yield* recordOnce(undefined)
      const file = path.join(root, "engine", "memo", fs.readdirSync(path.join(root, "engine", "memo"))[0]!)
      const before = fs.readFileSync(file)
      yield* recordOnce(RunMemo.read(root, workspace))
      assert.deepStrictEqual(fs.readFileSync(file), before, "the memo was rewritten")
      assert.isTrue(fs.existsSync(file.replace(/\.json$/, ".journal")))
      assert.strictEqual(Object.keys(RunMemo.read(root, workspace)!.processes).length, 40)
    }).pipe(Effect.scoped))
})
