/**
 * A store stays under its cap without anyone running `kiln store gc`: a run that takes it over starts a collection
 * (detached by default; `KILN_STORE_GC=wait` waits for it, `off` starts none), which never removes what a live run
 * leases. `kiln store cap` sets the store's own cap; `kiln store stats` says it and what the store holds.
 */
import { assert, describe, it } from "@effect/vitest"
import { Duration, Effect } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"
import { runCli } from "../utils/cliRun.js"
import { tempDir } from "../utils/temp.js"

const OUTPUT_BYTES = 300_000

const workspace = Effect.gen(function*() {
  const root = yield* tempDir("kiln-store-cap-")
  const ws = path.join(root, "ws")
  const store = path.join(root, "store")
  fs.mkdirSync(ws)
  fs.mkdirSync(path.join(root, "sandboxes"))
  fs.writeFileSync(path.join(ws, "seed.txt"), "1\n")
  fs.writeFileSync(
    path.join(ws, "kiln.json"),
    JSON.stringify({
      processes: {
        big: {
          // Bytes that differ with the seed: each run with a new seed adds as many to the store.
          argv: ["/bin/sh", "-c", `{ cat seed.txt; head -c ${OUTPUT_BYTES} /dev/zero; } > big.bin`],
          inputs: ["seed.txt"],
          outputs: ["big.bin"],
          env: { PATH: "/usr/bin:/bin" }
        }
      }
    })
  )
  const env = (gc: string) => ({
    ...process.env,
    KILN_STORE_DIR: store,
    KILN_SANDBOX_ROOT: path.join(root, "sandboxes"),
    KILN_NAMED_CACHES_DIR: path.join(root, "named"),
    KILN_STORE_GC: gc
  })
  const kiln = (args: ReadonlyArray<string>, gc = "wait") => runCli(args, { cwd: ws, env: env(gc) })
  const stats = Effect.map(kiln(["store", "stats", "--json"]), (r) => {
    assert.strictEqual(r.code, 0, r.stderr)
    return JSON.parse(r.stdout) as {
      readonly cap: { readonly bytes: number; readonly source: string }
      readonly usage: { readonly measuredBytes?: number; readonly estimateBytes: number }
      readonly largeFiles: { readonly bytes: number }
      readonly files: { readonly bytes: number }
    }
  })
  const seed = (n: number) => fs.writeFileSync(path.join(ws, "seed.txt"), `${n}\n`)
  return { kiln, stats, seed, store, ws }
})

/** Whether the store's record holds additions: a collection starts it again from its measure. */
const additionsRecorded = (store: string) => fs.readFileSync(path.join(store, "usage"), "utf8").includes("\nadded ")

/** Waits until the record in `store` is a collection's measure alone: the mark a collection leaves when it ends. */
const collected = (store: string) =>
  Effect.async<void>((resume) => {
    const measured = () => {
      try {
        return !additionsRecorded(store)
      } catch {
        return false
      }
    }
    const watcher = fs.watch(store, () => {
      if (measured()) {
        watcher.close()
        resume(Effect.void)
      }
    })
    if (measured()) {
      watcher.close()
      resume(Effect.void)
    }
    return Effect.sync(() => watcher.close())
  }).pipe(Effect.timeoutFail({ duration: Duration.minutes(2), onTimeout: () => new Error("no collection ended") }))

describe("a store kept under its cap", () => {
  it.scoped("`kiln store cap` sets the store's own cap, and `default` goes back to the default", () =>
    Effect.gen(function*() {
      const { kiln, stats } = yield* workspace
      const set = yield* kiln(["store", "cap", "1M"])
      assert.strictEqual(set.code, 0, set.stderr)
      assert.match(set.stdout, /^1(\.0+)? MiB \(the store's own/)
      assert.deepStrictEqual((yield* stats).cap, { bytes: 1024 * 1024, source: "store" })
      const bad = yield* kiln(["store", "cap", "lots"])
      assert.strictEqual(bad.code, 2)
      assert.match(bad.stderr, /^kiln store cap: .*a size such as 50G/)
      const back = yield* kiln(["store", "cap", "default"])
      assert.strictEqual(back.code, 0, back.stderr)
      assert.strictEqual((yield* stats).cap.source, "default")
    }))

  it.scoped("a run that takes the store over its cap collects what no live run leases, and keeps its result", () =>
    Effect.gen(function*() {
      const { kiln, seed, stats, ws } = yield* workspace
      // A lease of a millisecond: what a run stored is unleased as soon as it ends, so a collection may take it.
      const lease = ["--store-lease-time", "1ms"]
      const first = yield* kiln(["run", ...lease])
      assert.strictEqual(first.code, 0, first.stderr)
      // A new store's record starts from nothing, and counts what the run added: the cap is then set below it.
      const usage = (yield* stats).usage
      assert.strictEqual(usage.measuredBytes, 0)
      assert.isAtLeast(usage.estimateBytes, OUTPUT_BYTES)
      assert.strictEqual((yield* kiln(["store", "cap", "100K"])).code, 0)
      seed(2)
      const over = yield* kiln(["run", ...lease])
      assert.strictEqual(over.code, 0, over.stderr)
      assert.match(over.stderr, /kiln: the store holds about .*, over its cap of 100(\.0+)? KiB: collecting/)
      const after = yield* stats
      assert.isAtMost(after.usage.measuredBytes!, 100 * 1024)
      assert.isAtMost(after.files.bytes + after.largeFiles.bytes, 100 * 1024)
      // The run's own result is in the workspace, whatever the store let go of.
      assert.strictEqual(fs.statSync(path.join(ws, "big.bin")).size, OUTPUT_BYTES + 2)
    }))

  it.scoped("what a run leases is kept, however far over its cap the store is", () =>
    Effect.gen(function*() {
      const { kiln, seed, stats } = yield* workspace
      assert.strictEqual((yield* kiln(["store", "cap", "1K"])).code, 0)
      seed(3)
      const run = yield* kiln(["run"])
      assert.strictEqual(run.code, 0, run.stderr)
      const after = yield* stats
      assert.isAtLeast(after.usage.measuredBytes!, OUTPUT_BYTES)
      assert.isAtLeast(after.files.bytes + after.largeFiles.bytes, OUTPUT_BYTES)
    }))

  it.scoped("by default the collection runs detached, after the run has exited; `off` starts none", () =>
    Effect.gen(function*() {
      const { kiln, seed, store } = yield* workspace
      assert.strictEqual((yield* kiln(["store", "cap", "1K"])).code, 0)
      const off = yield* kiln(["run"], "off")
      assert.strictEqual(off.code, 0, off.stderr)
      assert.notMatch(off.stderr, /collecting/)
      assert.isTrue(additionsRecorded(store))
      seed(4)
      const detached = yield* kiln(["run"], "background")
      assert.strictEqual(detached.code, 0, detached.stderr)
      yield* collected(store)
    }))
})
