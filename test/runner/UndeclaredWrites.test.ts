/**
 * What a process wrote in its sandbox beyond its declared outputs (`ProcessResult.undeclaredWrites`, #38 §5), through
 * the whole runner stack: a `node_modules` of a few hundred files shared from 100 (mounted read-only where this
 * machine can), a writable path laid over it, a named cache and a writable input are the process's to write and not
 * reported; a symlink it made is one file, never followed; a cache hit carries nothing.
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
import { removeTree } from "../../src/os/RemoveTree.js"
import { stack } from "../utils/stack.js"

const root = fs.mkdtempSync(path.join(os.tmpdir(), "kiln-undeclared-"))
const ws = fs.mkdtempSync(path.join(os.tmpdir(), "kiln-undeclared-ws-"))
const outside = fs.mkdtempSync(path.join(os.tmpdir(), "kiln-undeclared-outside-"))
afterAll(() => {
  removeTree(root)
  removeTree(ws)
  removeTree(outside)
})
for (let p = 0; p < 6; p++) {
  for (let f = 0; f < 40; f++) {
    const dir = path.join(ws, "node_modules", `pkg${p}`, `d${f % 4}`)
    fs.mkdirSync(dir, { recursive: true })
    fs.writeFileSync(path.join(dir, `f${f}.js`), `module.exports = ${p * 100 + f}\n`)
  }
}
fs.mkdirSync(path.join(ws, "src"))
fs.writeFileSync(path.join(ws, "src", "a.txt"), "a\n")
fs.mkdirSync(path.join(ws, "data"))
fs.writeFileSync(path.join(ws, "data", "state.txt"), "0\n")
for (let i = 0; i < 50; i++) fs.writeFileSync(path.join(outside, `o${i}.txt`), "")

const text = (digest: Digest.Digest) =>
  Effect.flatMap(Store, (s) => Effect.map(s.getFile(digest), (b) => Buffer.from(b).toString("utf8")))

const sh = (inputDigest: Digest.Digest, script: string, fields: Partial<ConstructorParameters<typeof Process>[0]>) =>
  new Process({
    argv: ["/bin/sh", "-c", script],
    env: { PATH: "/usr/bin:/bin" },
    inputDigest,
    outputFiles: ["out.txt"],
    ...fields
  })

layer(Layer.fresh(stack({ root, runner: { sharedTreeMinFiles: 100 } })), { timeout: "120 seconds" })(
  "ProcessRunner: files written outside the declared outputs",
  (it) => {
    it.effect("only what it wrote where nothing is declared, in name order; a hit carries nothing", () =>
      Effect.gen(function*() {
        const runner = yield* ProcessRunner
        const store = yield* Store
        const input = yield* store.snapshot(ws, ["node_modules/**", "src/**", "data/**"])
        const proc = sh(
          input,
          "mkdir -p node_modules/.vite-temp dist/deep && echo v > node_modules/.vite-temp/v.mjs && " +
            "echo c > .cache/c && echo s > data/state.txt && echo n > data/new.txt && echo d > dist/deep/d && " +
            `echo o > out.txt && echo z > zz.txt && mkdir -p sub/empty && echo x > sub/x.txt && ln -s ${outside} link`,
          {
            outputDirectories: ["dist"],
            writablePaths: ["node_modules/.vite-temp", "data"],
            namedCaches: { undeclared_test: ".cache" }
          }
        )
        const ran = yield* runner.run(proc)
        assert.strictEqual(ran.exitCode, 0, yield* text(ran.stderrDigest))
        assert.deepStrictEqual(ran.undeclaredWrites, { count: 3, sample: ["link", "sub/x.txt", "zz.txt"] })
        const hit = yield* runner.run(proc)
        assert.strictEqual(hit.source, "cache-hit")
        assert.strictEqual(hit.undeclaredWrites, undefined)
      }))

    it.effect("a process that writes only its outputs: nothing", () =>
      Effect.gen(function*() {
        const runner = yield* ProcessRunner
        const store = yield* Store
        const input = yield* store.snapshot(ws, ["src/**"])
        const ran = yield* runner.run(sh(input, "cp src/a.txt out.txt", {}))
        assert.strictEqual(ran.exitCode, 0, yield* text(ran.stderrDigest))
        assert.strictEqual(ran.undeclaredWrites, undefined)
      }))
  }
)
