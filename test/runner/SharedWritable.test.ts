/**
 * Writable inputs inside a shared tree, through the whole runner stack (real sandboxer, sandboxes, spawner, mount
 * namespaces), on a workspace of its own (a `node_modules` of a few hundred files, shared from 100): the tree is
 * still mounted whole, with each writable path laid over it writable (vite's `node_modules/.vite-temp`, absent from
 * the tree; a cache that is there; a named cache); nothing of the tree is copied, the workspace's tree is unchanged after, and a
 * write elsewhere in it fails with the operating system's error.
 */
import { afterAll, assert, layer } from "@effect/vitest"
import { Effect, Layer } from "effect"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import type * as Digest from "../../src/domain/Digest.js"
import { Process } from "../../src/domain/Process.js"
import { ProcessRunner, type WorkspaceTree } from "../../src/layers/runner/ProcessRunner.js"
import { Store } from "../../src/layers/store/Store.js"
import * as MountNamespace from "../../src/os/mounts/MountNamespace.js"
import { removeTree } from "../../src/os/RemoveTree.js"
import { sandboxesLeft } from "../utils/sandboxes.js"
import { stack } from "../utils/stack.js"

const root = fs.mkdtempSync(path.join(os.tmpdir(), "kiln-shared-writable-"))
const ws = fs.mkdtempSync(path.join(os.tmpdir(), "kiln-shared-writable-ws-"))
afterAll(() => {
  removeTree(root)
  removeTree(ws)
})
for (let p = 0; p < 6; p++) {
  for (let f = 0; f < 40; f++) {
    const dir = path.join(ws, "node_modules", `pkg${p}`, `d${f % 4}`)
    fs.mkdirSync(dir, { recursive: true })
    fs.writeFileSync(path.join(dir, `f${f}.js`), `module.exports = ${p * 100 + f}\n`)
  }
}
fs.mkdirSync(path.join(ws, "node_modules", ".cache"))
fs.writeFileSync(path.join(ws, "node_modules", ".cache", "old.txt"), "old\n")
fs.mkdirSync(path.join(ws, "src"))
fs.writeFileSync(path.join(ws, "src", "a.txt"), "a\n")

const PATH = "/usr/bin:/bin:/usr/local/bin"

const text = (digest: Digest.Digest) =>
  Effect.flatMap(Store, (s) => Effect.map(s.getFile(digest), (b) => Buffer.from(b).toString("utf8")))
const outputText = (outputs: Digest.Digest, file: string) =>
  Effect.flatMap(
    Store,
    (s) => Effect.flatMap(s.listTree(outputs), (entries) => text(entries.find((e) => e.path === file)!.digest!))
  )

/** The input root (`node_modules/**` and `src/**`) and its `node_modules` tree. */
const inputRoot = Effect.gen(function*() {
  const store = yield* Store
  const input = yield* store.snapshot(ws, ["node_modules/**", "src/**"])
  const modules = (yield* store.getDirectory(input)).directories.find((d) => d.name === "node_modules")!.digest
  return { input, modules }
})

/** How the process's `node_modules` is mounted (its file system type and options), and what it says. */
const sh = (inputDigest: Digest.Digest, script: string, writablePaths: ReadonlyArray<string>) =>
  new Process({
    argv: [
      "/bin/sh",
      "-c",
      `{ awk '$5 ~ /\\/node_modules$/ { print $9, $6 }' /proc/self/mountinfo; ${script}; } > out.txt 2>&1`
    ],
    env: { PATH },
    inputDigest,
    outputFiles: ["out.txt"],
    writablePaths
  })

const treesIn = () => {
  const dir = path.join(root, "store", "immutable", "trees")
  return fs.existsSync(dir) ? fs.readdirSync(dir).filter((n) => /^[0-9a-f]{64}$/.test(n)) : []
}

/** Every file under `dir`, with its content. */
const contents = (dir: string): Record<string, string> => {
  const all: Record<string, string> = {}
  const walk = (rel: string) => {
    for (const e of fs.readdirSync(path.join(dir, rel), { withFileTypes: true })) {
      const p = path.join(rel, e.name)
      if (e.isDirectory()) walk(p)
      else all[p] = fs.readFileSync(path.join(dir, p), "utf8")
    }
  }
  walk("")
  return all
}

const mounts = MountNamespace.probe()

layer(Layer.fresh(stack({ root, runner: { sharedTreeMinFiles: 100 } })), { timeout: "120 seconds" })(
  "ProcessRunner: writable inputs inside a shared tree",
  (it) => {
    it.effect.skipIf(mounts.mode === undefined)(
      "an absent writable path (vite's .vite-temp): the tree is mounted whole from the store, writable there only",
      () =>
        Effect.gen(function*() {
          const runner = yield* ProcessRunner
          const { input, modules } = yield* inputRoot
          const result = yield* runner.run(sh(
            input,
            `mkdir -p node_modules/.vite-temp && echo config > node_modules/.vite-temp/vite.config.mjs && ` +
              `cat node_modules/.vite-temp/vite.config.mjs node_modules/pkg3/d1/f5.js; ` +
              `( echo x > node_modules/pkg0/new.js ) 2>/dev/null || echo read-only`,
            ["node_modules/.vite-temp"]
          ))
          assert.strictEqual(result.exitCode, 0, yield* text(result.stderrDigest))
          const said = yield* outputText(result.outputDigest, "out.txt")
          // One mount, the whole tree: an overlay, read-only (its writable path is a mount of its own, below it).
          assert.match(said, /^overlay ro[,\n]/)
          assert.include(said, "config\nmodule.exports = 305\nread-only\n")
          // The store holds the tree once, whole: none of its subtrees were copied.
          assert.deepStrictEqual(treesIn(), [modules.hash])

          // The next process sees the tree as it was: the writes were the sandbox's, gone with it.
          const after = yield* runner.run(sh(input, `ls -a node_modules`, ["node_modules/.vite-temp"]))
          assert.notInclude(yield* outputText(after.outputDigest, "out.txt"), "vite.config")
          assert.notMatch(yield* outputText(after.outputDigest, "out.txt"), /new\.js/)
          assert.deepStrictEqual(treesIn(), [modules.hash])
          assert.deepStrictEqual(sandboxesLeft(path.join(root, "sandboxes")), [])
        })
    )

    it.effect.skipIf(mounts.mode === undefined)(
      "a writable path the tree holds: the workspace's own tree is mounted whole, and unchanged after",
      () =>
        Effect.gen(function*() {
          const runner = yield* ProcessRunner
          const { input, modules } = yield* inputRoot
          const abs = path.join(ws, "node_modules")
          const before = contents(abs)
          const own: WorkspaceTree = {
            path: "node_modules",
            abs,
            digest: modules,
            files: Object.keys(before).length,
            unchanged: () => true
          }
          const trees = treesIn()
          const result = yield* runner.run(
            sh(
              input,
              `cat node_modules/.cache/old.txt && echo new > node_modules/.cache/old.txt && ` +
                `echo more > node_modules/.cache/more.txt && cat node_modules/.cache/old.txt`,
              ["node_modules/.cache"]
            ),
            { workspaceTrees: [own] }
          )
          assert.strictEqual(result.exitCode, 0, yield* text(result.stderrDigest))
          assert.match(yield* outputText(result.outputDigest, "out.txt"), /^overlay ro[,\n][^]*old\nnew\n$/)
          // Mounted from the workspace: the store made no tree, and the workspace's tree is as it was.
          assert.deepStrictEqual(treesIn(), trees)
          assert.deepStrictEqual(contents(abs), before)
        })
    )

    it.effect.skipIf(mounts.mode === undefined)(
      "a named cache inside the tree: the tree is mounted whole, the cache kept from one process to the next",
      () =>
        Effect.gen(function*() {
          const runner = yield* ProcessRunner
          const { input, modules } = yield* inputRoot
          const cached = (script: string) =>
            new Process({
              ...sh(input, script, []),
              namedCaches: { vite_cache: "node_modules/.vite" }
            })
          const first = yield* runner.run(cached(`echo kept > node_modules/.vite/deps.json`))
          assert.strictEqual(first.exitCode, 0, yield* text(first.stderrDigest))
          const second = yield* runner.run(cached(`cat node_modules/.vite/deps.json`))
          assert.match(yield* outputText(second.outputDigest, "out.txt"), /^overlay ro[,\n][^]*kept\n$/)
          assert.strictEqual(
            fs.readFileSync(path.join(root, "named_caches", "vite_cache", "deps.json"), "utf8"),
            "kept\n"
          )
          assert.deepStrictEqual(treesIn(), [modules.hash])
        })
    )

    it.effect.skipIf(mounts.mode === undefined)(
      "without the declaration, a tool that makes a directory in the tree fails with EROFS, and the tree is plain",
      () =>
        Effect.gen(function*() {
          const runner = yield* ProcessRunner
          const { input } = yield* inputRoot
          const result = yield* runner.run(sh(input, `mkdir node_modules/.vite-temp`, []))
          const said = yield* outputText(result.outputDigest, "out.txt")
          // A read-only bind (of the store's tree, a file system of its own type), no overlay.
          assert.notMatch(said, /^overlay/)
          assert.match(said, /Read-only file system/)
        })
    )
  }
)
