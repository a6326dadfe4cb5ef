/**
 * A run ends with its action cache entries committed, not only queued: the entries of processes that mounted a
 * workspace tree wait for the check of that tree (made once for them all, at the run's end at the latest), and a
 * store copied or removed as soon as kiln exits (a CI job saving it, a benchmark emptying it) must find them in. The
 * store's background write of each entry is held shut here: the run must not end until it is let through.
 */
import { assert, describe, it } from "@effect/vitest"
import { Deferred, Effect, Either, Fiber, Layer, Option } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"
import { parse } from "../../src/domain/config/Config.js"
import * as Engine from "../../src/layers/engine/Engine.js"
import * as ProcessRunner from "../../src/layers/runner/ProcessRunner.js"
import * as Sandboxes from "../../src/layers/sandbox/Sandboxes.js"
import * as Sandboxer from "../../src/layers/sandboxer/Sandboxer.js"
import * as Store from "../../src/layers/store/Store.js"
import * as Workspace from "../../src/layers/workspace/Workspace.js"
import { tempDir } from "../utils/temp.js"

const PATH = "/usr/bin:/bin"

/** The store, with every entry's background write waiting for `gate` once it has said so on `entered`. */
const gatedStore = (root: string, entered: Deferred.Deferred<void>, gate: Deferred.Deferred<void>) =>
  Layer.effect(
    Store.Store,
    Effect.map(Store.Store, (s): Store.Service => ({
      ...s,
      withActionLock: (action, whileWaiting, run, store) =>
        s.withActionLock(
          action,
          whileWaiting,
          run,
          store === undefined
            ? undefined
            : (a) =>
              Effect.zipRight(Effect.zipRight(Deferred.succeed(entered, undefined), Deferred.await(gate)), store(a))
        )
    }))
  ).pipe(Layer.provide(Store.layer({ root: path.join(root, "store") })))

describe("Engine.run: the action cache entries of a run", () => {
  it.scopedLive("the run ends only once its entries are committed", () =>
    Effect.gen(function*() {
      const root = yield* tempDir("kiln-action-writes-")
      const ws = path.join(root, "ws")
      fs.mkdirSync(path.join(ws, "node_modules", "pkg"), { recursive: true })
      fs.writeFileSync(path.join(ws, "node_modules", "pkg", "index.js"), "module.exports = 1\n")
      fs.mkdirSync(path.join(root, "sandboxes"))
      const config = Either.getOrThrow(parse(
        "kiln.json",
        JSON.stringify({
          processes: {
            read: {
              argv: ["/bin/sh", "-c", "cat node_modules/pkg/index.js > out.txt"],
              env: { PATH },
              inputs: ["node_modules/**"],
              outputs: ["out.txt"]
            }
          }
        })
      ))
      const entered = yield* Deferred.make<void>()
      const gate = yield* Deferred.make<void>()
      const layer = Engine.layer.pipe(
        Layer.provideMerge(
          Layer.merge(
            ProcessRunner.layer({ namedCachesDir: path.join(root, "named_caches"), grace: "1 second" }),
            Workspace.layer
          )
        ),
        Layer.provideMerge(
          Layer.merge(
            Sandboxer.layerInProcess,
            Sandboxes.layer({ root: path.join(root, "sandboxes"), keep: "never", sweepOnStart: false })
          )
        ),
        Layer.provideMerge(gatedStore(root, entered, gate))
      )
      // Said as the engine returns, before the stack closes (whose store waits for its writes anyway).
      const returned = yield* Deferred.make<Engine.RunReport>()
      const run = yield* Effect.flatMap(Engine.Engine, (engine) => engine.run({ workspace: ws, config, memo: false }))
        .pipe(Effect.tap((report) => Deferred.succeed(returned, report)), Effect.provide(layer), Effect.forkScoped)
      // Whatever the test finds, the held write is let through first as it ends, so that the stack can close.
      yield* Effect.addFinalizer(() => Deferred.succeed(gate, undefined))
      yield* Deferred.await(entered)
      // The entry is being stored, and held: the run must wait for it (it would end within milliseconds if not).
      const early = yield* Deferred.await(returned).pipe(Effect.timeout("2 seconds"), Effect.option)
      assert.isTrue(Option.isNone(early), "the run ended with its entry not yet written")
      yield* Deferred.succeed(gate, undefined)
      const report = yield* Fiber.join(run)
      assert.strictEqual(report.failed, 0)
      assert.strictEqual(report.ran, 1)
      assert.strictEqual(fs.readFileSync(path.join(ws, "out.txt"), "utf8"), "module.exports = 1\n")
    }))
})
