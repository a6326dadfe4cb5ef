/**
 * The runner across OS processes: an engine SIGKILLed mid-run, its whole process group with it, leaves nothing
 * behind (its spawner kills the group it started and starts the post-mortem, which removes the sandbox and clears
 * the engine's reader slots), and two engines that need the same uncached action run it once.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"
import * as SandboxDir from "../../src/layers/sandbox/internal/sandboxDir.js"
import * as Store from "../../src/layers/store/Store.js"
import * as StoreMaintenance from "../../src/layers/store/StoreMaintenance.js"
import {
  childrenOf,
  eventually,
  exitOf,
  firstLine,
  groupAlive,
  helpersOf,
  pidAlive,
  spawnScoped
} from "../utils/child.js"
import { cli } from "../utils/stack.js"
import { tempDir } from "../utils/temp.js"

const runnerWorker = path.resolve(".kiln-test/fixtures/runnerWorker.mjs")

/**
 * The workers' environment: without the strict view. Their processes and this test signal each other through files
 * of the host (a pid, a counter, a marker), which the view rightly hides; what is tested is the engines' lifetime and
 * locks, and the view's own ending of a process's descendants is tested in test/sandbox/StrictView.test.ts.
 */
const viewOff = { ...process.env, KILN_STRICT_VIEW: "0" }

describe("ProcessRunner across processes", () => {
  it.scopedLive("an engine's group SIGKILLed mid-run: the process group, the sandbox and the spawner go on their own", () =>
    Effect.gen(function*() {
      const root = yield* tempDir("kiln-rp-")
      const marker = path.join(root, "pgid")
      const engine = yield* spawnScoped(process.execPath, [
        runnerWorker,
        JSON.stringify({
          root,
          storeRoot: path.join(root, "store"),
          cli,
          script:
            `echo $$ > ${marker}.tmp && mv ${marker}.tmp ${marker}; sh -c 'trap "" TERM; while :; do sleep 1; done' & wait`
        })
      ], { detached: true, env: viewOff })
      yield* eventually("the process started", () => fs.existsSync(marker))
      const pgid = Number(fs.readFileSync(marker, "utf8"))
      yield* Effect.addFinalizer(() => Effect.sync(() => groupAlive(pgid) && process.kill(-pgid, "SIGKILL")))
      // The sandbox, and beside it its owner file and the files its process writes stdout and stderr to.
      const entries = () => fs.readdirSync(path.join(root, "sandboxes"))
      assert.strictEqual(new Set(entries().map(SandboxDir.sandboxNameOf)).size, 1)
      const spawners = childrenOf(engine.pid!, "kiln-spawner")
      assert.strictEqual(spawners.length, 1)
      // Opened before the kill (opening runs LMDB's reader check itself): every shard, through stats.
      const store = yield* Store.make({ root: path.join(root, "store") })
      assert.strictEqual((yield* StoreMaintenance.make(store).stats).readers.stale, 0)
      // The engine's whole process group, as a job control or CI runner would: the spawner is in a session of its own.
      process.kill(-engine.pid!, "SIGKILL")
      yield* exitOf(engine)
      yield* eventually("the group is gone", () => !groupAlive(pgid), "20 seconds")
      yield* eventually("the sandbox and its files are gone", () => entries().length === 0, "20 seconds")
      yield* eventually("the engine's spawner is gone", () => !pidAlive(spawners[0]!), "20 seconds")
      yield* eventually(
        "its reader slots are cleared",
        () => Effect.runSync(StoreMaintenance.make(store).stats).readers.stale === 0,
        "5 seconds"
      )
      // The post-mortem (a sandboxer for the dead engine) removed the sandbox; it must end too, or it opens the store
      // again after this test removed it (a CI run left one so).
      yield* eventually("the post-mortem has ended", () => helpersOf("--parent-pid", engine.pid!).length === 0)
    }))

  it.scopedLive("two engines needing the same uncached action run it once and get the same result", () =>
    Effect.gen(function*() {
      const root = yield* tempDir("kiln-rp-")
      const counter = path.join(root, "ran")
      // The holder of the lock finishes only once the other engine has found the lock held (its worker creates the
      // marker then): the lock is contended in every run of this test, not just when the two happen to overlap.
      const waiting = path.join(root, "waiting")
      const script = `echo ran >> ${counter}; until [ -e ${waiting} ]; do sleep 0.05; done; echo result`
      const start = (name: string) =>
        spawnScoped(process.execPath, [
          runnerWorker,
          JSON.stringify({
            root: path.join(root, name),
            storeRoot: path.join(root, "store"),
            cli,
            script,
            waitingMarker: waiting
          })
        ], { env: viewOff })
      const [a, b] = yield* Effect.all([start("a"), start("b")])
      const [ra, rb] = yield* Effect.all([firstLine(a), firstLine(b)], { concurrency: 2 })
      const [x, y] = [JSON.parse(ra), JSON.parse(rb)]
      assert.strictEqual(fs.readFileSync(counter, "utf8"), "ran\n", "the action ran more than once")
      assert.strictEqual(x.stdout, y.stdout)
      assert.strictEqual(x.output, y.output)
      assert.sameMembers([x.source, y.source], ["ran", "cache-hit"])
    }))
})
