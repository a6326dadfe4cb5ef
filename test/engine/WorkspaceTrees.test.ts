/**
 * A workspace's own large input tree (a node_modules of 1,200 files here, over a threshold of 1,000) mounted into
 * sandboxes as it is, with no copy in the store; its digests are the snapshot's; a change made to it while a process
 * runs (through its real path, which the sandbox does not hide) means that process's result is not cached, so the
 * next run runs it again rather than hitting an entry made from other bytes.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Either, Layer } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"
import { parse } from "../../src/domain/config/Config.js"
import * as Digest from "../../src/domain/Digest.js"
import * as Engine from "../../src/layers/engine/Engine.js"
import * as Store from "../../src/layers/store/Store.js"
import { stack } from "../utils/stack.js"
import { tempDir } from "../utils/temp.js"

const PATH = "/usr/bin:/bin"

const workspaceOf = (processes: (ws: string) => Record<string, unknown>) =>
  Effect.gen(function*() {
    const root = yield* tempDir("kiln-workspace-trees-")
    const ws = path.join(root, "ws")
    for (let i = 0; i < 12; i++) {
      const d = path.join(ws, "node_modules", `pkg${i}`)
      fs.mkdirSync(d, { recursive: true })
      for (let j = 0; j < 100; j++) fs.writeFileSync(path.join(d, `f${j}.js`), `module.exports = ${i * 100 + j}\n`)
    }
    fs.mkdirSync(path.join(ws, "src"))
    fs.writeFileSync(path.join(ws, "src", "a.txt"), "a\n")
    fs.mkdirSync(path.join(root, "sandboxes"))
    const config = Either.getOrThrow(parse("kiln.json", JSON.stringify({ processes: processes(ws) })))
    return { root, ws, config }
  })

const runOn = (
  root: string,
  ws: string,
  config: Engine.RunOptions["config"],
  onEvent?: Engine.RunOptions["onEvent"],
  sharedTreeMinFiles = 1000
) =>
  Effect.flatMap(
    Engine.Engine,
    (engine) => engine.run({ workspace: ws, config, memo: false, ...(onEvent !== undefined ? { onEvent } : {}) })
  ).pipe(
    Effect.provide(
      Engine.layer.pipe(Layer.provideMerge(stack({ root, inProcess: true, runner: { sharedTreeMinFiles } })))
    )
  )

const treesIn = (root: string) => {
  const dir = path.join(root, "store", "immutable", "trees")
  return fs.existsSync(dir) ? fs.readdirSync(dir).filter((n) => /^[0-9a-f]{64}$/.test(n)) : []
}

/** Whether the store under `root` holds a file of these bytes. */
const storedAt = (root: string, text: string) =>
  Effect.scoped(Effect.flatMap(
    Store.make({ root: path.join(root, "store") }),
    (store) => store.hasFile(Digest.ofBytes(Buffer.from(text)))
  ))

describe("Engine.run: workspace trees", () => {
  it.scopedLive("a tree written into sandboxes rather than mounted gets the workspace's bytes, stored once", () =>
    Effect.gen(function*() {
      const { config, root, ws } = yield* workspaceOf(() => ({
        read: {
          argv: ["/bin/sh", "-c", "cat node_modules/pkg3/f7.js node_modules/pkg11/f99.js > out.txt"],
          env: { PATH },
          inputs: ["src/**", "node_modules/**"],
          outputs: ["out.txt"]
        }
      }))
      // Nothing shared: every tree is written into the sandbox from the store, which the snapshot left the files of
      // node_modules out of.
      const report = yield* runOn(root, ws, config, undefined, 0)
      assert.strictEqual(report.failed, 0, JSON.stringify(report.processes))
      assert.strictEqual(
        fs.readFileSync(path.join(ws, "out.txt"), "utf8"),
        "module.exports = 307\nmodule.exports = 1199\n"
      )
      assert.isTrue(yield* storedAt(root, "module.exports = 307\n"))
    }))

  it.scopedLive("the workspace's node_modules is mounted as it is: read-only, and nothing is copied into the store", () =>
    Effect.gen(function*() {
      const { config, root, ws } = yield* workspaceOf(() => ({
        read: {
          argv: [
            "/bin/sh",
            "-c",
            "{ cat node_modules/pkg3/f7.js; touch node_modules/pkg3/f7.js; echo rc=$?; } > out.txt 2>&1"
          ],
          env: { PATH },
          inputs: ["src/**", "node_modules/**"],
          outputs: ["out.txt"]
        }
      }))
      const report = yield* runOn(root, ws, config)
      assert.strictEqual(report.failed, 0, JSON.stringify(report.processes))
      const said = fs.readFileSync(path.join(ws, "out.txt"), "utf8")
      assert.match(said, /^module\.exports = 307\n/)
      assert.match(said, /Read-only file system/)
      assert.match(said, /rc=1/)
      assert.deepStrictEqual(treesIn(root), [])
      // Hashed, not copied: the store holds the tree's directories, not its files.
      assert.isFalse(yield* storedAt(root, "module.exports = 307\n"))
      // The workspace itself is untouched and writable.
      assert.strictEqual(fs.readFileSync(path.join(ws, "node_modules/pkg3/f7.js"), "utf8"), "module.exports = 307\n")
      const again = yield* runOn(root, ws, config)
      assert.strictEqual(again.cacheHits, 1)
    }))

  it.scopedLive("a change to the mounted tree while the process runs: its result is not cached, the next run runs it", () =>
    Effect.gen(function*() {
      const { config, root, ws } = yield* workspaceOf(() => ({
        change: {
          argv: [
            "/bin/sh",
            "-c",
            // The change comes from outside (the test, once the process has started): the process sees nothing of
            // the workspace but through its mounts.
            `until grep -q changed node_modules/pkg5/f1.js; do sleep 0.01; done; cat node_modules/pkg5/f1.js > out.txt`
          ],
          env: { PATH },
          inputs: ["src/**", "node_modules/**"],
          outputs: ["out.txt"]
        }
      }))
      const change: Engine.RunOptions["onEvent"] = (e) =>
        e._tag === "Started" && e.name === "change"
          ? Effect.sync(() => fs.writeFileSync(path.join(ws, "node_modules/pkg5/f1.js"), "changed\n"))
          : Effect.void
      const first = yield* runOn(root, ws, config, change)
      assert.strictEqual(first.failed, 0, JSON.stringify(first.processes))
      assert.strictEqual(first.ran, 1)
      // The mount shows the workspace as it is now.
      assert.strictEqual(fs.readFileSync(path.join(ws, "out.txt"), "utf8"), "changed\n")
      // Its input tree was the one before the change: a cache entry under it would be a wrong hit for that tree.
      fs.writeFileSync(path.join(ws, "node_modules/pkg5/f1.js"), "module.exports = 501\n")
      const second = yield* runOn(root, ws, config, change)
      assert.strictEqual(second.cacheHits, 0)
      assert.strictEqual(second.ran, 1)
    }))
})
