import { assert, describe, it } from "@effect/vitest"
import { Context, Effect, Exit, Layer, Option, Scope } from "effect"
import { spawnSync } from "node:child_process"
import * as path from "node:path"
import * as Digest from "../../src/domain/Digest.js"
import { Process } from "../../src/domain/Process.js"
import * as Kiln from "../../src/layers/kiln/Kiln.js"
import { HelperLifetime } from "../../src/layers/lifetime/HelperLifetime.js"
import { ProcessRunner } from "../../src/layers/runner/ProcessRunner.js"
import { Sandboxer } from "../../src/layers/sandboxer/Sandboxer.js"
import { isAlive } from "../../src/os/Proc.js"
import { childrenOf, eventually } from "../utils/child.js"
import { cli } from "../utils/stack.js"
import { tempDir } from "../utils/temp.js"

describe("examples/library", () => {
  it("composes the layers into a program that runs two processes and prints their results", () => {
    const r = spawnSync(process.execPath, ["examples/library/main.mjs"], { encoding: "utf8" })
    assert.strictEqual(r.status, 0, r.stderr)
    const lines = r.stdout.trim().split("\n")
    assert.strictEqual(lines.length, 2)
    assert.match(lines[0]!, /^one: exit 0, (ran|cache-hit), action [0-9a-f]{64}\/\d+$/)
    assert.match(lines[1]!, /^two: exit 3, (ran|cache-hit), action [0-9a-f]{64}\/\d+$/)
  })
})

/** The LMDB environments this process holds open under `root` (the store's registry, see `lmdb/envs.ts`). */
const openEnvsUnder = (root: string): ReadonlyArray<string> =>
  [...((globalThis as any)[Symbol.for("kiln/lmdbEnvs")] as Map<string, { readonly path: string }> ?? new Map())
    .values()]
    .map((e) => e.path)
    .filter((p) => p.startsWith(`${root}/`))

describe("Kiln.layer", () => {
  it.scopedLive("tears down as the CLI's stack does: the helpers outlive every layer above them, then end", () =>
    Effect.gen(function*() {
      const dir = yield* tempDir("kiln-library-")
      const spawnersBefore = new Set(childrenOf(process.pid, "kiln-spawner"))
      const scope = yield* Scope.make()
      const context = yield* Layer.buildWithScope(
        Kiln.layer({
          store: { root: path.join(dir, "store") },
          sandboxer: { command: [process.execPath, cli], socketDir: path.join(dir, "sock") },
          sandboxes: { root: path.join(dir, "sandboxes"), sweepOnStart: false },
          runner: { namedCachesDir: path.join(dir, "named") }
        }),
        scope
      )
      const runner = Context.get(context, ProcessRunner)
      const sandboxer = Context.get(context, Sandboxer)
      const result = yield* runner.run(
        new Process({ argv: ["/bin/true"], inputDigest: Digest.empty, cache: "never" })
      )
      assert.strictEqual(result.exitCode, 0)
      yield* sandboxer.ensureRunning
      const sandboxerPid = Option.getOrThrow(yield* sandboxer.pid)
      const spawners = childrenOf(process.pid, "kiln-spawner").filter((p) => !spawnersBefore.has(p))
      assert.strictEqual(spawners.length, 1)
      const helpers = [sandboxerPid, spawners[0]!]
      // The lifetime is the layer's bottom: its finalizers run once the Store and everything on it are released.
      // One added now runs before the helpers' own, so it sees whether they outlived those layers.
      let aliveWhenTheLayersAbove: ReadonlyArray<boolean> = []
      let storeEnvsThen: ReadonlyArray<string> | undefined
      const storeRoot = path.join(dir, "store")
      assert.isNotEmpty(openEnvsUnder(storeRoot))
      yield* Context.get(context, HelperLifetime).addFinalizer(
        Effect.sync(() => {
          aliveWhenTheLayersAbove = helpers.map(isAlive)
          storeEnvsThen = openEnvsUnder(storeRoot)
        })
      )
      yield* Scope.close(scope, Exit.void)
      assert.deepStrictEqual(aliveWhenTheLayersAbove, [true, true], "the helpers ended before the Store was released")
      assert.deepStrictEqual(storeEnvsThen, [], "the lifetime ended while the Store still held environments")
      yield* eventually(
        "the sandboxer and the spawner exit once the layer is gone",
        () => !helpers.some(isAlive),
        "20 seconds"
      )
    }))
})
