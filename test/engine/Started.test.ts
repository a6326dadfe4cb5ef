/**
 * `Started` means a process's tool started: it had one of the `concurrency` slots, not that it was ready and waited
 * for one. The status line's running count, the trace's spans and the summary's durations start there.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"
import type { Config } from "../../src/domain/config/Config.js"
import * as Engine from "../../src/layers/engine/Engine.js"
import { stack } from "../utils/stack.js"
import { tempDir } from "../utils/temp.js"

describe("Engine: Started events", () => {
  it.scoped("at --concurrency 1, one process at a time has started and not finished; a hit never starts", () =>
    Effect.gen(function*() {
      const root = yield* tempDir("kiln-started-")
      const workspace = path.join(root, "ws")
      fs.mkdirSync(workspace)
      fs.mkdirSync(path.join(root, "sandboxes"))
      const config = {
        processes: Object.fromEntries(
          [0, 1, 2, 3, 4].map((
            i
          ) => [`p${i}`, { argv: ["/bin/sh", "-c", `echo ${i}`], env: { PATH: "/usr/bin:/bin" } }])
        )
      } as unknown as Config
      const events: Array<Engine.Event> = []
      const onEvent = (e: Engine.Event) => Effect.sync(() => void events.push(e))
      const run = Effect.flatMap(Engine.Engine, (engine) => engine.run({ workspace, config, onEvent, memo: false }))
      const layer = Engine.layer.pipe(
        Layer.provideMerge(stack({ root, inProcess: true, runner: { concurrency: 1 } }))
      )
      const report = yield* Effect.provide(run, layer)
      assert.strictEqual(report.ran, 5)
      const running = new Set<string>()
      for (const e of events) {
        if (e._tag === "Started") {
          running.add(e.name)
          assert.isAtMost(running.size, 1, JSON.stringify(events))
        } else if (e._tag === "Exited") {
          assert.isTrue(running.delete(e.name), `${e.name} exited without starting`)
        } else if (e._tag === "Finished") {
          assert.isFalse(running.has(e.report.name), `${e.report.name} finished before its tool exited`)
        }
      }
      // Each span starts when its tool did: at one at a time, none starts before the one before it started.
      const byStart = [...report.processes].sort((a, b) => a.startMs - b.startMs)
      for (const p of byStart) assert.isAtLeast(p.durationMs, p.timings.run ?? 0, p.name)
      events.length = 0
      const again = yield* Effect.provide(run, layer)
      assert.strictEqual(again.cacheHits, 5)
      assert.deepStrictEqual(events.map((e) => e._tag), ["Finished", "Finished", "Finished", "Finished", "Finished"])
    }))
})
