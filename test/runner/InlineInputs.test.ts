/**
 * Who writes a sandbox's inputs: the engine, up to a shared tree's size (1,000 files, 16 MiB), executables included;
 * the sandboxer, a Node process of its own, only beyond. A run whose trees are all small starts no sandboxer, and
 * its memory beside the tools is one process less. Real sandboxer process, real store and processes.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer, Option, type Scope } from "effect"
import { Process } from "../../src/domain/Process.js"
import { ProcessRunner } from "../../src/layers/runner/ProcessRunner.js"
import { SandboxMode } from "../../src/layers/runner/SandboxMode.js"
import { Sandboxer } from "../../src/layers/sandboxer/Sandboxer.js"
import { Store } from "../../src/layers/store/Store.js"
import { stack } from "../utils/stack.js"
import { tempDir, writeTree } from "../utils/temp.js"

const PATH = "/usr/bin:/bin"

/** A workspace of `files` small files beside an executable `tool.sh` that counts them. */
const workspace = (files: number) =>
  Effect.map(tempDir("kiln-inline-ws-"), (ws) => {
    const tree: Record<string, string | { content: string; mode: number }> = {
      "tool.sh": { content: "#!/bin/sh\nls data | wc -l\n", mode: 0o755 }
    }
    for (let i = 0; i < files; i++) tree[`data/f${i}.txt`] = `${i}\n`
    writeTree(ws, tree)
    return ws
  })

const runTool = (ws: string) =>
  Effect.gen(function*() {
    const store = yield* Store
    const input = yield* store.snapshot(ws)
    const result = yield* Effect.flatMap(ProcessRunner, (r) =>
      r.run(new Process({ argv: ["./tool.sh"], env: { PATH }, inputDigest: input, cache: "never" })))
    assert.strictEqual(result.exitCode, 0)
    return Buffer.from(yield* store.getFile(result.stdoutDigest)).toString().trim()
  })

/** A fresh stack of its own (its sandboxer's use is the test's alone), sharing no tree: every tree is written. */
const withStack = <A, E>(effect: Effect.Effect<A, E, ProcessRunner | Store | Sandboxer | Scope.Scope>) =>
  Effect.flatMap(tempDir("kiln-inline-"), (root) =>
    Effect.provide(
      effect.pipe(Effect.provideService(SandboxMode, "off")),
      Layer.fresh(stack({ root, runner: { sharedTreeMinFiles: 0 } }))
    ))

describe("inputs written by the engine", () => {
  it.scopedLive("a tree of 300 files and an executable is written by the engine: no sandboxer starts", () =>
    withStack(Effect.gen(function*() {
      const ws = yield* workspace(300)
      assert.strictEqual(yield* runTool(ws), "300")
      const sandboxer = yield* Sandboxer
      assert.isFalse(yield* sandboxer.used)
      assert.isTrue(Option.isNone(yield* sandboxer.pid))
    })))

  it.scopedLive("a tree past 1,000 files is the sandboxer's", () =>
    withStack(Effect.gen(function*() {
      const ws = yield* workspace(1001)
      assert.strictEqual(yield* runTool(ws), "1001")
      assert.isTrue(yield* (yield* Sandboxer).used)
    })))
})
