/**
 * The run records `kiln explain` reads: a few records are appended to a journal, many are merged into the records
 * with the journal; reading gives the latest record of every process either way, and a journal line cut short
 * (a crash, a full disk) costs that line only.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { spawnSync } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"
import * as RunRecords from "../../src/layers/engine/internal/runRecords.js"
import { tempDir } from "../utils/temp.js"

const record = (action: string): RunRecords.RunRecord => ({
  argv: ["true"],
  env: {},
  workingDirectory: "",
  inputs: {},
  deps: {},
  actionDigest: action
})

const many = (n: number, tag: string) =>
  new Map(Array.from({ length: n }, (_, i) => [`p${i}`, record(`${tag}${i}`)] as const))

describe("run records", () => {
  it.scoped("a few records are appended, many merged; reading sees the latest of each", () =>
    Effect.gen(function*() {
      const store = yield* tempDir()
      const ws = yield* tempDir()
      const runs = path.dirname(RunRecords.fileOf(store, ws))
      RunRecords.write(store, ws, many(100, "a"))
      assert.deepStrictEqual(fs.readdirSync(runs).filter((f) => f.endsWith(".journal")), [])
      RunRecords.write(store, ws, new Map([["p1", record("b1")]]))
      RunRecords.write(store, ws, new Map([["p2", record("b2")], ["new", record("n")]]))
      RunRecords.write(store, ws, new Map([["p1", record("c1")]]))
      const journal = fs.readdirSync(runs).filter((f) => f.endsWith(".journal"))
      assert.strictEqual(journal.length, 1)
      const read = RunRecords.read(store, ws)
      assert.strictEqual(Object.keys(read).length, 101)
      assert.strictEqual(read.p0!.actionDigest, "a0")
      assert.strictEqual(read.p1!.actionDigest, "c1")
      assert.strictEqual(read.p2!.actionDigest, "b2")
      assert.strictEqual(read.new!.actionDigest, "n")
      // A large run merges the journal in and leaves none.
      RunRecords.write(store, ws, many(50, "d"))
      assert.deepStrictEqual(fs.readdirSync(runs).filter((f) => !f.endsWith(".json")), [])
      const merged = RunRecords.read(store, ws)
      assert.strictEqual(merged.p1!.actionDigest, "d1")
      assert.strictEqual(merged.p60!.actionDigest, "a60")
      assert.strictEqual(merged.new!.actionDigest, "n")
    }))

  it.scoped("a journal line cut short is skipped, and the lines after it are read", () =>
    Effect.gen(function*() {
      const store = yield* tempDir()
      const ws = yield* tempDir()
      RunRecords.write(store, ws, new Map([["a", record("a1")]]))
      const runs = path.dirname(RunRecords.fileOf(store, ws))
      const journal = path.join(runs, fs.readdirSync(runs).find((f) => f.endsWith(".journal"))!)
      fs.appendFileSync(journal, `{"processes":{"b":{"argv":["tru`)
      RunRecords.write(store, ws, new Map([["c", record("c1")]]))
      const read = RunRecords.read(store, ws)
      assert.deepStrictEqual(Object.keys(read).sort(), ["a", "c"])
    }))
})

describe("run records planted as links, FIFOs or devices", () => {
  it.scoped("are read as none, at once; a journal that is a link is not written through", () =>
    Effect.gen(function*() {
      const store = yield* tempDir()
      const ws = yield* tempDir()
      const outside = path.join(yield* tempDir(), "victim")
      fs.writeFileSync(outside, "keep\n")
      const file = RunRecords.fileOf(store, ws)
      const journal = file.replace(/\.json$/, ".journal")
      fs.mkdirSync(path.dirname(file), { recursive: true })
      fs.symlinkSync("/dev/zero", file)
      spawnSync("mkfifo", [journal])
      assert.deepStrictEqual(RunRecords.read(store, ws), {})
      fs.rmSync(journal)
      fs.symlinkSync(outside, journal)
      assert.throws(() => RunRecords.write(store, ws, new Map([["p", record("x")]])))
      assert.strictEqual(fs.readFileSync(outside, "utf8"), "keep\n")
    }))
})
