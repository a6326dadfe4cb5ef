/**
 * The check that a workspace directory processes mounted held while they ran, made for many processes at once (a
 * `node_modules` of 60,000 paths checked after each process was O(files × processes)), through the whole runner
 * stack on a workspace of its own: one check for every process that ended before it, their action cache entries
 * written once it held and never when it did not, the check made by itself after its delay, and by the runner's
 * closing when nobody settled.
 */
import { afterAll, assert, describe, it } from "@effect/vitest"
import { Deferred, type Duration, Effect, Option } from "effect"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import type * as Digest from "../../src/domain/Digest.js"
import { Process } from "../../src/domain/Process.js"
import { ProcessRunner, type WorkspaceTree } from "../../src/layers/runner/ProcessRunner.js"
import * as Store from "../../src/layers/store/Store.js"
import * as MountNamespace from "../../src/os/mounts/MountNamespace.js"
import { removeTree } from "../../src/os/RemoveTree.js"
import { stack } from "../utils/stack.js"

const ws = fs.mkdtempSync(path.join(os.tmpdir(), "kiln-tree-checks-ws-"))
const roots: Array<string> = []
afterAll(() => {
  for (const r of roots) removeTree(r)
  removeTree(ws)
})
for (let f = 0; f < 120; f++) {
  const dir = path.join(ws, "node_modules", `pkg${f % 6}`)
  fs.mkdirSync(dir, { recursive: true })
  fs.writeFileSync(path.join(dir, `f${f}.js`), `module.exports = ${f}\n`)
}

const PATH = "/usr/bin:/bin:/usr/local/bin"
const mounts = MountNamespace.probe()

const freshRoot = () => {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), "kiln-tree-checks-"))
  roots.push(root)
  return root
}

/** The runner stack on a store of its own, its trees checked `delay` after a process ends (an hour: never by itself). */
const runnerAt = (delay: Duration.DurationInput, root = freshRoot()) =>
  stack({ root, runner: { sharedTreeMinFiles: 100, inputsCheckDelay: delay } })

/** The input root and the workspace's `node_modules` as a tree to mount, its check counted (and told, once asked). */
const setUp = (holds: boolean, asked?: Deferred.Deferred<void>) =>
  Effect.gen(function*() {
    const store = yield* Store.Store
    const input = yield* store.snapshot(ws, ["node_modules/**"])
    const modules = (yield* store.getDirectory(input)).directories.find((d) => d.name === "node_modules")!.digest
    const checks = { count: 0 }
    const tree: WorkspaceTree = {
      path: "node_modules",
      abs: path.join(ws, "node_modules"),
      digest: modules,
      files: 120,
      unchanged: () => {
        checks.count++
        if (asked !== undefined) Effect.runSync(Deferred.succeed(asked, undefined))
        return holds
      }
    }
    return { input, tree, checks }
  })

/** A process of its own (`n`) that reads the mounted tree. */
const reader = (input: Digest.Digest, n: number) =>
  new Process({
    argv: ["/bin/sh", "-c", `cat node_modules/pkg${n % 6}/f${n}.js > out.txt`],
    env: { PATH },
    inputDigest: input,
    outputFiles: ["out.txt"]
  })

const entriesOf = (results: ReadonlyArray<{ readonly actionDigest: Digest.Digest }>) =>
  Effect.flatMap(Store.Store, (store) => store.getActionResults(results.map((r) => r.actionDigest)))

describe("ProcessRunner: the check of mounted workspace directories", () => {
  it.scoped.skipIf(mounts.mode === undefined)(
    "three processes that mounted one tree: one check after them all; their entries written once it held",
    () =>
      Effect.gen(function*() {
        const runner = yield* ProcessRunner
        const { checks, input, tree } = yield* setUp(true)
        const results = yield* Effect.forEach(
          [0, 1, 2],
          (n) => runner.run(reader(input, n), { workspaceTrees: [tree] }),
          { concurrency: 2 }
        )
        for (const r of results) {
          assert.strictEqual(r.exitCode, 0)
          assert.isDefined(r.inputsCheck, "each waits for the check")
        }
        // The delay is an hour: nothing has been checked yet, nor written.
        assert.strictEqual(checks.count, 0)
        const changed = yield* runner.settleInputs
        assert.strictEqual(checks.count, 1, "one check for the three")
        assert.strictEqual(changed.size, 0)
        const entries = yield* entriesOf(results)
        assert.isTrue(entries.every(Option.isSome), "each entry written once the tree held")
        // Nothing waits any more: settling again checks nothing.
        yield* runner.settleInputs
        assert.strictEqual(checks.count, 1)
      }).pipe(
        Effect.provide(runnerAt("1 hour"))
      )
  )

  it.scoped.skipIf(mounts.mode === undefined)(
    "a tree that changed: every process that waited on it is named changed, and none of their entries is written",
    () =>
      Effect.gen(function*() {
        const runner = yield* ProcessRunner
        const { checks, input, tree } = yield* setUp(false)
        const results = yield* Effect.forEach([3, 4], (n) => runner.run(reader(input, n), { workspaceTrees: [tree] }))
        const changed = yield* runner.settleInputs
        assert.strictEqual(checks.count, 1)
        assert.deepStrictEqual([...changed].sort(), results.map((r) => r.inputsCheck!).sort())
        // The results are this run's all the same (their outputs are what ran).
        assert.isTrue(results.every((r) => r.exitCode === 0))
        const entries = yield* entriesOf(results)
        assert.isTrue(entries.every(Option.isNone), "no entry for a result its tree may not compute")
      }).pipe(
        Effect.provide(runnerAt("1 hour"))
      )
  )

  it.scoped.skipIf(mounts.mode === undefined)(
    "a check that cannot be made (it throws) counts as changed: its processes are answered, and nothing hangs",
    () =>
      Effect.gen(function*() {
        const runner = yield* ProcessRunner
        const { input, tree } = yield* setUp(true)
        const failing: WorkspaceTree = {
          ...tree,
          unchanged: () => {
            throw new Error("out of memory")
          }
        }
        const result = yield* runner.run(reader(input, 7), { workspaceTrees: [failing] })
        const changed = yield* runner.settleInputs
        assert.isTrue(changed.has(result.inputsCheck!))
        const [entry] = yield* entriesOf([result])
        assert.isTrue(Option.isNone(entry!))
      }).pipe(
        Effect.provide(runnerAt("1 hour"))
      )
  )

  it.scoped.skipIf(mounts.mode === undefined)(
    "the check comes by itself after its delay, nobody settling",
    () =>
      Effect.gen(function*() {
        const runner = yield* ProcessRunner
        const asked = yield* Deferred.make<void>()
        const { checks, input, tree } = yield* setUp(true, asked)
        const result = yield* runner.run(reader(input, 5), { workspaceTrees: [tree] })
        yield* Deferred.await(asked)
        assert.strictEqual(checks.count, 1)
        // Its entry is written after the check: a read of the action waits for it.
        const [entry] = yield* entriesOf([result])
        assert.isTrue(Option.isSome(entry!))
      }).pipe(Effect.provide(runnerAt(0)))
  )

  it.scoped.skipIf(mounts.mode === undefined)(
    "a runner closed with processes waiting checks them first: the entry is in the store for the next run",
    () =>
      Effect.gen(function*() {
        const root = freshRoot()
        const { checks, result } = yield* Effect.gen(function*() {
          const runner = yield* ProcessRunner
          const { checks, input, tree } = yield* setUp(true)
          const r = yield* runner.run(reader(input, 6), { workspaceTrees: [tree] })
          assert.strictEqual(checks.count, 0)
          return { checks, result: r }
        }).pipe(Effect.provide(runnerAt("1 hour", root)), Effect.scoped)
        assert.strictEqual(checks.count, 1, "checked as the runner closed")
        const store = yield* Store.make({ root: path.join(root, "store") })
        const [entry] = yield* store.getActionResults([result.actionDigest])
        assert.isTrue(Option.isSome(entry!))
      })
  )
})
