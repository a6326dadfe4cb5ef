/**
 * Shared input trees through the whole runner stack (real sandboxer, sandboxes, spawner, mount namespaces), on the
 * real `npm ci` output of this project (its node_modules: 11,000+ files): a real tool (esbuild) runs from the shared
 * tree; a write into it fails with the operating system's error and changes nothing for the next process; a
 * process that declares the tree writable gets a private copy; the input root's digest is the action's, however
 * the sandbox is laid out.
 */
import { afterAll, assert, layer } from "@effect/vitest"
import { Effect, Layer } from "effect"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import type * as Digest from "../../src/domain/Digest.js"
import { Process } from "../../src/domain/Process.js"
import { ProcessRunner } from "../../src/layers/runner/ProcessRunner.js"
import { Store } from "../../src/layers/store/Store.js"
import * as StoreMaintenance from "../../src/layers/store/StoreMaintenance.js"
import * as MountNamespace from "../../src/os/mounts/MountNamespace.js"
import { removeTree } from "../../src/os/RemoveTree.js"
import { sandboxesLeft } from "../utils/sandboxes.js"
import { stack } from "../utils/stack.js"

const root = fs.mkdtempSync(path.join(os.tmpdir(), "kiln-shared-inputs-"))
const src = fs.mkdtempSync(path.join(os.tmpdir(), "kiln-shared-src-"))
afterAll(() => {
  removeTree(root)
  removeTree(src)
})
fs.mkdirSync(path.join(src, "src"))
fs.writeFileSync(path.join(src, "src", "a.ts"), `import { Either } from "effect"\nconsole.log(Either.right(1))\n`)

const PATH = "/usr/bin:/bin:/usr/local/bin"
const node = process.execPath

const text = (digest: Digest.Digest) =>
  Effect.flatMap(Store, (s) => Effect.map(s.getFile(digest), (b) => Buffer.from(b).toString("utf8")))
const outputText = (outputs: Digest.Digest, file: string) =>
  Effect.flatMap(
    Store,
    (s) => Effect.flatMap(s.listTree(outputs), (entries) => text(entries.find((e) => e.path === file)!.digest!))
  )

/** The input root: this project's node_modules with `src/a.ts` beside it. */
const inputRoot = Effect.gen(function*() {
  const store = yield* Store
  const modules = yield* store.snapshot(path.resolve("."), ["node_modules/**"])
  const sources = yield* store.snapshot(src, ["src/**"])
  return yield* store.mergeTrees([{ digest: modules, at: [] }, { digest: sources, at: [] }])
})

const sh = (
  inputDigest: Digest.Digest,
  script: string,
  extra: Partial<ConstructorParameters<typeof Process>[0]> = {}
) =>
  new Process({
    argv: ["/bin/sh", "-c", script],
    env: { PATH },
    inputDigest,
    outputFiles: ["out.txt"],
    ...extra
  })

const treesIn = () =>
  fs.readdirSync(path.join(root, "store", "immutable", "trees")).filter((n) => /^[0-9a-f]{64}$/.test(n))

const mounts = MountNamespace.probe()

layer(Layer.fresh(stack({ root, runner: { sharedTreeMinFiles: 1000 } })), { timeout: "240 seconds" })(
  "ProcessRunner: shared input trees",
  (it) => {
    it.effect("this machine can mount shared trees (root or user namespaces)", () =>
      Effect.sync(() => assert.isDefined(mounts.mode, `cannot mount: ${mounts.why}`)))

    it.effect("a real tool runs from the shared node_modules; a write into it fails and changes nothing", () =>
      Effect.gen(function*() {
        const runner = yield* ProcessRunner
        const input = yield* inputRoot
        const bundle = yield* runner.run(
          new Process({
            argv: [
              node,
              "node_modules/esbuild/bin/esbuild",
              "--bundle",
              "src/a.ts",
              "--outfile=out/a.js",
              "--log-level=warning"
            ],
            env: { PATH },
            inputDigest: input,
            outputFiles: ["out/a.js"]
          })
        )
        assert.strictEqual(bundle.exitCode, 0, yield* text(bundle.stderrDigest))
        const bundled = yield* outputText(bundle.outputDigest, "out/a.js")
        // Paths in the bundle are the sandbox's own (a mount, not a symlink into the store).
        assert.include(bundled, "node_modules/effect/dist/esm/Either.js")
        assert.notInclude(bundled, "immutable/trees")
        assert.strictEqual(treesIn().length, 1)

        const write = yield* runner.run(sh(
          input,
          `{ touch node_modules/effect/package.json; echo "rc=$?"; echo new > node_modules/new.txt; echo "rc=$?"; ` +
            `stat -c %a node_modules/effect/package.json; } > out.txt 2>&1`
        ))
        assert.strictEqual(write.exitCode, 0)
        const said = yield* outputText(write.outputDigest, "out.txt")
        assert.match(said, /Read-only file system/)
        assert.match(said, /rc=1\n[^]*rc=[12]\n/)
        assert.match(said, /^444$/m)

        const after = yield* runner.run(sh(input, `ls node_modules/new.txt > out.txt 2>&1; echo "rc=$?" >> out.txt`))
        assert.match(yield* outputText(after.outputDigest, "out.txt"), /rc=2/)
        assert.strictEqual(treesIn().length, 1)
        const check = yield* StoreMaintenance.make(yield* Store).check()
        assert.deepStrictEqual(check.problems, [])
        assert.deepStrictEqual(sandboxesLeft(path.join(root, "sandboxes")), [])
      }))

    it.effect("a process that declares an input writable gets a private copy; the next one sees the tree unchanged", () =>
      Effect.gen(function*() {
        const runner = yield* ProcessRunner
        const input = yield* inputRoot
        const writer = yield* runner.run(sh(
          input,
          `echo changed > node_modules/effect/package.json && echo new > node_modules/effect/new.txt && echo ok > out.txt`,
          { writablePaths: ["node_modules/effect"] }
        ))
        assert.strictEqual(writer.exitCode, 0, yield* text(writer.stderrDigest))
        const reader = yield* runner.run(sh(
          input,
          `head -c 1 node_modules/effect/package.json > out.txt; ls node_modules/effect/new.txt 2>/dev/null >> out.txt; :`
        ))
        assert.strictEqual(yield* outputText(reader.outputDigest, "out.txt"), "{")
      }))
  }
)
