/**
 * The store's cap and its record of what it holds (`StoreMaintenance.capOf`, `usageOf`): where the cap comes from
 * (the option, the store's own, a tenth of its disk up to 20 GiB), what each process that adds to the store records
 * when it closes it, and what a collection records (the measure the next estimate starts from).
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Either } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"
import * as Store from "../../src/layers/store/Store.js"
import * as StoreMaintenance from "../../src/layers/store/StoreMaintenance.js"
import { tempDir } from "../utils/temp.js"
import { isRoot, tmpfs } from "../utils/tmpfs.js"

const MiB = 1024 * 1024

describe("the store's cap", () => {
  it.effect("is the option, else the store's own, else the default; `default` goes back to it", () =>
    Effect.gen(function*() {
      const root = yield* tempDir("kiln-cap-")
      const byDefault = yield* StoreMaintenance.capOf(root)
      assert.strictEqual(byDefault.source, "default")
      assert.isAtMost(byDefault.bytes, 20 * 1024 * MiB)
      yield* StoreMaintenance.setCap(root, 5 * MiB)
      assert.deepStrictEqual(yield* StoreMaintenance.capOf(root), { bytes: 5 * MiB, source: "store" })
      assert.deepStrictEqual(yield* StoreMaintenance.capOf(root, 7 * MiB), { bytes: 7 * MiB, source: "option" })
      yield* StoreMaintenance.setCap(root, undefined)
      assert.deepStrictEqual(yield* StoreMaintenance.capOf(root), byDefault)
    }).pipe(Effect.scoped))

  it.scoped.skipIf(!isRoot)("without one of its own, it is a tenth of a small disk", () =>
    Effect.gen(function*() {
      const disk = yield* tmpfs(path.join(yield* tempDir("kiln-cap-disk-"), "disk"), "64m")
      const cap = yield* StoreMaintenance.capOf(disk)
      assert.deepStrictEqual(cap, { bytes: Math.floor(64 * MiB * 0.1), source: "default" })
    }))

  it.effect("a cap file that is not one is an error naming it, and the store does not open over it", () =>
    Effect.gen(function*() {
      const root = yield* tempDir("kiln-cap-bad-")
      fs.writeFileSync(path.join(root, "cap.json"), JSON.stringify({ maxSizeBytes: "lots" }))
      const read = yield* Effect.either(StoreMaintenance.capOf(root))
      assert.isTrue(Either.isLeft(read))
      if (Either.isLeft(read)) assert.include(read.left.message, "cap.json")
      const opened = yield* Effect.either(Effect.scoped(Store.make({ root })))
      assert.isTrue(Either.isLeft(opened))
    }).pipe(Effect.scoped))
})

describe("the store's record of what it holds", () => {
  it.effect("each process that adds to the store records how much when it closes it; a collection measures it", () =>
    Effect.gen(function*() {
      const root = yield* tempDir("kiln-usage-")
      const blob = Buffer.alloc(100_000, 7)
      const added = (bytes: Buffer) =>
        Effect.scoped(Effect.flatMap(Store.make({ root }), (store) => store.putFile(bytes)))
      yield* added(blob)
      const first = yield* StoreMaintenance.usageOf(root)
      // A new store's record starts from nothing.
      assert.strictEqual(first.measuredBytes, 0)
      assert.strictEqual(first.addedBytes, blob.length)
      assert.isFalse(StoreMaintenance.collectionDue(first, { bytes: 20 * 1024 * MiB, source: "default" }))
      // A store made before it kept one (no measure) that something was added to: a collection is due, to measure it.
      fs.writeFileSync(path.join(root, "usage"), `added ${blob.length}\n`)
      const unmeasured = yield* StoreMaintenance.usageOf(root)
      assert.strictEqual(unmeasured.measuredBytes, undefined)
      assert.isTrue(StoreMaintenance.collectionDue(unmeasured, { bytes: 20 * 1024 * MiB, source: "default" }))
      // The same bytes again add nothing; other bytes add theirs.
      yield* added(blob)
      yield* added(Buffer.alloc(5_000, 8))
      assert.strictEqual((yield* StoreMaintenance.usageOf(root)).addedBytes, blob.length + 5_000)

      const report = yield* Effect.scoped(Effect.flatMap(
        Effect.map(Store.make({ root }), StoreMaintenance.make),
        (maintenance) => maintenance.gc({ targetSizeBytes: 10 * 1024 * MiB })
      ))
      const measured = yield* StoreMaintenance.usageOf(root)
      assert.strictEqual(measured.measuredBytes, report.afterBytes)
      assert.isAtLeast(report.afterBytes, blob.length + 5_000)
      assert.strictEqual(measured.addedBytes, 0)
      assert.isFalse(StoreMaintenance.collectionDue(measured, { bytes: 20 * 1024 * MiB, source: "default" }))
      assert.isTrue(StoreMaintenance.collectionDue(measured, { bytes: 50_000, source: "store" }))
    }).pipe(Effect.scoped))

  it.effect("a torn line counts for nothing, and the open store's options hold the cap in force", () =>
    Effect.gen(function*() {
      const root = yield* tempDir("kiln-usage-torn-")
      fs.mkdirSync(root, { recursive: true })
      fs.writeFileSync(path.join(root, "usage"), "measured 1000 5\nadded 20\nadd")
      const usage = yield* StoreMaintenance.usageOf(root)
      assert.strictEqual(usage.estimateBytes, 1020)
      yield* StoreMaintenance.setCap(root, 3 * MiB)
      const capInForce = yield* Effect.scoped(Effect.map(Store.make({ root }), (store) => store.options.maxSizeBytes))
      assert.strictEqual(capInForce, 3 * MiB)
    }).pipe(Effect.scoped))
})
