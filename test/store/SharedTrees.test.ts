/**
 * Shared trees on a real store with a generated tree of 10,000 files: placed once per digest, read-only and exactly
 * its digest (the golden vectors too); split at large subtrees; two processes racing to make one; a writer killed
 * with SIGKILL before its rename; gc with and without a live user; check of a tampered tree.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Scope } from "effect"
import type { ChildProcess } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import * as readline from "node:readline"
import { afterAll, beforeAll } from "vitest"
import * as Digest from "../../src/domain/Digest.js"
import * as SharedTrees from "../../src/layers/store/SharedTrees.js"
import * as Store from "../../src/layers/store/Store.js"
import * as StoreMaintenance from "../../src/layers/store/StoreMaintenance.js"
import { removeTree } from "../../src/os/RemoveTree.js"
import { Golden, writeGoldenTree } from "../fixtures/golden.js"
import { exitOf, spawnScoped } from "../utils/child.js"
import { tempDir } from "../utils/temp.js"

const worker = path.resolve(".kiln-test/fixtures/treeWorker.mjs")

/** 100 directories of 100 files, an executable and a symlink: 10,002 entries. */
const writeLargeTree = (dir: string) => {
  for (let i = 0; i < 100; i++) {
    const d = path.join(dir, `pkg${i}`)
    fs.mkdirSync(d, { recursive: true })
    for (let j = 0; j < 100; j++) fs.writeFileSync(path.join(d, `f${j}.js`), `module.exports = ${i * 100 + j}\n`)
  }
  fs.writeFileSync(path.join(dir, "tool.sh"), "#!/bin/sh\necho tool\n", { mode: 0o755 })
  fs.symlinkSync("pkg0/f0.js", path.join(dir, "main.js"))
}

const treesRoot = (store: Store.Service) => path.join(store.options.root, "immutable", "trees")
const tempsIn = (store: Store.Service) => fs.readdirSync(treesRoot(store)).filter((n) => n.startsWith(".tmp-"))

const write = (store: Store.Service): SharedTrees.Write<unknown> => (digest, into) =>
  store.materialize(digest, into, { createDestination: false })

/** The workspace of every test (writing 10,000 files takes seconds on a slow disk: once is enough). */
let ws = ""
beforeAll(() => {
  ws = fs.mkdtempSync(path.join(os.tmpdir(), "kiln-shared-trees-ws-"))
  writeLargeTree(path.join(ws, "node_modules"))
  fs.mkdirSync(path.join(ws, "src"))
  fs.writeFileSync(path.join(ws, "src", "a.txt"), "a\n")
})
afterAll(() => removeTree(ws))

/** A store of its own with the workspace snapshotted: `root`, and `tree`, its `node_modules`. */
const setUp = Effect.gen(function*() {
  const dir = yield* tempDir("kiln-shared-trees-")
  const store = yield* Store.make({ root: path.join(dir, "store") })
  const root = yield* store.snapshot(ws)
  const tree = (yield* store.getDirectory(root)).directories.find((d) => d.name === "node_modules")!.digest
  return { dir, store, tree, root }
})

/** Lines of a child's stdout, waited on by prefix. */
const linesOf = (child: ChildProcess) => {
  const seen: Array<string> = []
  const waiting: Array<() => void> = []
  readline.createInterface({ input: child.stdout! }).on("line", (line) => {
    seen.push(line)
    waiting.splice(0).forEach((wake) => wake())
  })
  let stderr = ""
  child.stderr!.on("data", (d) => (stderr += d))
  const waitFor = (prefix: string): Effect.Effect<string, Error> =>
    Effect.async<string, Error>((resume) => {
      const look = () => {
        const line = seen.find((l) => l.startsWith(prefix) || l.startsWith("FAIL"))
        if (line === undefined) return false
        if (line.startsWith("FAIL")) resume(Effect.fail(new Error(`${line} ${stderr}`)))
        else resume(Effect.succeed(line))
        return true
      }
      if (look()) return
      const again = () => {
        if (!look()) waiting.push(again)
      }
      waiting.push(again)
      child.once("exit", (code) => resume(Effect.fail(new Error(`exited with ${code} before ${prefix}: ${stderr}`))))
    })
  return { waitFor }
}

const startWorker = (store: Store.Service, digest: Digest.Digest, hold = false) =>
  Effect.gen(function*() {
    const child = yield* spawnScoped(process.execPath, [
      worker,
      JSON.stringify({ store: store.options.root, digest: Digest.format(digest), hold })
    ], { stdio: ["pipe", "pipe", "pipe"] })
    const lines = linesOf(child)
    yield* lines.waitFor("READY")
    return { child, ...lines }
  })

describe("SharedTrees", () => {
  it.scoped("places a tree once per digest, read-only, holding exactly its digest", () =>
    Effect.gen(function*() {
      const { store, tree } = yield* setUp
      const trees = yield* SharedTrees.make(store, { minFiles: 1000 })
      let writes = 0
      const counted: SharedTrees.Write<unknown> = (d, into) =>
        Effect.zipRight(Effect.sync(() => writes++), write(store)(d, into))
      const first = yield* trees.place(tree, counted)
      const second = yield* trees.place(tree, counted)
      assert.strictEqual(first, second)
      assert.strictEqual(writes, 1)
      assert.strictEqual(first, path.join(treesRoot(store), tree.hash))
      assert.deepStrictEqual(tempsIn(store), [])
      assert.strictEqual(fs.statSync(first).mode & 0o777, 0o555)
      assert.strictEqual(fs.statSync(path.join(first, "pkg1", "f2.js")).mode & 0o777, 0o444)
      assert.strictEqual(fs.statSync(path.join(first, "tool.sh")).mode & 0o777, 0o555)
      assert.strictEqual(fs.readlinkSync(path.join(first, "main.js")), "pkg0/f0.js")
      // However it was laid out, the directory on disk is the tree it was made from, digest for digest.
      assert.deepStrictEqual(yield* store.snapshot(first), tree)
      const report = yield* StoreMaintenance.make(store).check()
      assert.deepStrictEqual(report.problems, [])
    }))

  it.scoped("a placed golden tree snapshots to the golden REAPI digest", () =>
    Effect.gen(function*() {
      const dir = yield* tempDir("kiln-shared-golden-")
      writeGoldenTree(path.join(dir, "golden"))
      const store = yield* Store.make({ root: path.join(dir, "store") })
      const v4 = yield* store.snapshot(path.join(dir, "golden"))
      assert.strictEqual(Digest.format(v4), Golden.v4)
      const trees = yield* SharedTrees.make(store, { minFiles: 1 })
      const placed = yield* trees.place(v4, write(store))
      assert.strictEqual(Digest.format(yield* store.snapshot(placed)), Golden.v4)
    }))

  it.scoped("splits an input root at its large subtrees, unless the sandbox writes into one", () =>
    Effect.gen(function*() {
      const { store, tree, root } = yield* setUp
      const trees = yield* SharedTrees.make(store, { minFiles: 1000 })
      const split = yield* trees.split(root, { at: [], within: ["out"] })
      assert.deepStrictEqual(split.shared, [{ path: "node_modules", digest: tree }])
      const rest = yield* store.getDirectory(split.rest)
      assert.deepStrictEqual(rest.directories.map((d) => [d.name, d.digest]), [
        ["node_modules", Digest.empty],
        ["src", (yield* store.getDirectory(root)).directories[1]!.digest]
      ])
      // An output inside the tree: it is written, not shared (its packages are each below the threshold).
      const writing = yield* trees.split(root, { at: [], within: ["node_modules/.cache"] })
      assert.deepStrictEqual(writing.shared, [])
      assert.deepStrictEqual(writing.rest, root)
      assert.deepStrictEqual(
        (yield* SharedTrees.make(store, { minFiles: 20_000 }).pipe(
          Effect.flatMap((t) => t.split(root, { at: [], within: [] }))
        )).shared,
        []
      )
    }))

  it.scoped("two processes racing to make one tree both get it, and it is made once", () =>
    Effect.gen(function*() {
      const { store, tree } = yield* setUp
      const a = yield* startWorker(store, tree)
      const b = yield* startWorker(store, tree)
      a.child.stdin!.write("GO\n")
      b.child.stdin!.write("GO\n")
      const [pa, pb] = yield* Effect.all([a.waitFor("PLACED"), b.waitFor("PLACED")], { concurrency: 2 })
      assert.strictEqual(pa, `PLACED ${path.join(treesRoot(store), tree.hash)}`)
      assert.strictEqual(pb, pa)
      assert.deepStrictEqual(tempsIn(store), [])
      assert.deepStrictEqual(yield* store.snapshot(path.join(treesRoot(store), tree.hash)), tree)
    }))

  it.scoped("a writer killed before its rename leaves nothing a later run uses, and gc removes what it left", () =>
    Effect.gen(function*() {
      const { store, tree } = yield* setUp
      const w = yield* startWorker(store, tree, true)
      w.child.stdin!.write("GO\n")
      yield* w.waitFor("WRITTEN")
      assert.strictEqual(tempsIn(store).length, 1)
      w.child.kill("SIGKILL")
      yield* exitOf(w.child)
      assert.isFalse(fs.existsSync(path.join(treesRoot(store), tree.hash)))
      const trees = yield* SharedTrees.make(store, { minFiles: 1000 })
      const placed = yield* trees.place(tree, write(store))
      assert.deepStrictEqual(yield* store.snapshot(placed), tree)
      const maintenance = StoreMaintenance.make(store)
      assert.deepStrictEqual((yield* maintenance.check()).problems, [])
      const gc = yield* maintenance.gc()
      assert.strictEqual(gc.strayFilesRemoved, 1)
      assert.strictEqual(gc.sharedTreesRemoved, 0)
      assert.deepStrictEqual(tempsIn(store), [])
    }))

  it.scoped("gc keeps a tree a live process uses, whatever its lease, and removes it once released", () =>
    Effect.gen(function*() {
      const { store, tree } = yield* setUp
      const scope = yield* Scope.make()
      const trees = yield* SharedTrees.make(store, { minFiles: 1000 }).pipe(Scope.extend(scope))
      const placed = yield* trees.place(tree, write(store))
      const expired = new Date(Date.now() - 60_000)
      fs.utimesSync(placed, expired, expired)
      const maintenance = StoreMaintenance.make(store)
      const kept = yield* maintenance.gc()
      assert.strictEqual(kept.sharedTreesRemoved, 0)
      assert.strictEqual(kept.sharedTreesInUse, 1)
      assert.isTrue(fs.existsSync(placed))
      yield* Scope.close(scope, { _tag: "Success", value: undefined } as never)
      const collected = yield* maintenance.gc()
      assert.strictEqual(collected.sharedTreesRemoved, 1)
      assert.isFalse(fs.existsSync(placed))
      assert.isFalse(fs.existsSync(`${placed}.made`))
    }))

  it.scoped("check finds a tampered tree, and --repair removes it", () =>
    Effect.gen(function*() {
      const { store, tree } = yield* setUp
      const trees = yield* SharedTrees.make(store, { minFiles: 1000 })
      const placed = yield* trees.place(tree, write(store))
      const victim = path.join(placed, "pkg3", "f4.js")
      fs.chmodSync(path.dirname(victim), 0o755)
      fs.chmodSync(victim, 0o644)
      fs.writeFileSync(victim, "tampered\n")
      const maintenance = StoreMaintenance.make(store)
      const found = yield* maintenance.check()
      assert.strictEqual(found.problems.length, 1)
      assert.strictEqual(found.problems[0]!.store, "shared-trees")
      assert.strictEqual(found.problems[0]!.key, tree.hash)
      const repaired = yield* maintenance.check({ repair: true })
      assert.strictEqual(repaired.repaired, 1)
      assert.isFalse(fs.existsSync(placed))
      // The next use makes it again, from the store.
      const again = yield* SharedTrees.make(store, { minFiles: 1000 }).pipe(
        Effect.flatMap((t) => t.place(tree, write(store)))
      )
      assert.deepStrictEqual(yield* store.snapshot(again), tree)
    }))
})
