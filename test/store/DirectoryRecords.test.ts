/**
 * Which directory a record names, read from its edge only, and whether that directory is gone: what `kiln store gc`
 * decides on before it removes a record. A record it cannot read a directory from is kept.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { spawnSync } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"
import * as Records from "../../src/layers/store/DirectoryRecords.js"
import { tempDir } from "../utils/temp.js"

describe("DirectoryRecords", () => {
  it.scoped("names the directory among a file's first fields, or as its last; else nothing", () =>
    Effect.gen(function*() {
      const dir = yield* tempDir("kiln-records-")
      const file = (name: string, value: unknown) => {
        const f = path.join(dir, name)
        fs.writeFileSync(f, JSON.stringify(value))
        return f
      }
      const odd = "/tmp/a \"quoted\" dir/\\x"
      const big = "x".repeat(10_000)
      assert.strictEqual(Records.directoryNamedIn(file("head", { v: 4, abs: odd, rest: big }), "abs", "head"), odd)
      assert.strictEqual(
        Records.directoryNamedIn(file("tail", { rest: big, workspace: odd }), "workspace", "tail"),
        odd
      )
      // Past the edge read, under another name, not absolute, not the last field, not JSON, not there: nothing.
      assert.isUndefined(Records.directoryNamedIn(file("far", { rest: big, abs: odd }), "abs", "head"))
      assert.isUndefined(Records.directoryNamedIn(file("other", { v: 4, dir: odd }), "abs", "head"))
      assert.isUndefined(Records.directoryNamedIn(file("relative", { abs: "ws/x" }), "abs", "head"))
      assert.isUndefined(Records.directoryNamedIn(file("notLast", { workspace: odd, rest: 1 }), "workspace", "tail"))
      fs.writeFileSync(path.join(dir, "junk"), "abs: /x")
      assert.isUndefined(Records.directoryNamedIn(path.join(dir, "junk"), "abs", "head"))
      assert.isUndefined(Records.directoryNamedIn(path.join(dir, "missing"), "abs", "head"))
    }))

  it.scoped("a record that is a symlink or a FIFO is not read: neither followed out of the store nor waited on", () =>
    Effect.gen(function*() {
      const dir = yield* tempDir("kiln-records-")
      const outside = path.join(dir, "outside.json")
      fs.writeFileSync(outside, JSON.stringify({ abs: "/gone/elsewhere" }))
      const link = path.join(dir, "link.json")
      fs.symlinkSync(outside, link)
      assert.isUndefined(Records.directoryNamedIn(link, "abs", "head"))
      const fifo = path.join(dir, "fifo.json")
      assert.strictEqual(spawnSync("mkfifo", [fifo]).status, 0)
      assert.isUndefined(Records.directoryNamedIn(fifo, "abs", "head"))
      assert.isUndefined(Records.directoryNamedIn(fifo, "workspace", "tail"))
      // Removing the link removes the link.
      assert.isNumber(Records.remove(link))
      assert.isTrue(fs.existsSync(outside))
    }))

  it.scoped("a directory is gone when nothing is there or a file is in its path; one that is there is not", () =>
    Effect.gen(function*() {
      const dir = yield* tempDir("kiln-records-")
      fs.writeFileSync(path.join(dir, "file"), "")
      assert.isFalse(Records.isGone(dir))
      assert.isFalse(Records.isGone(path.join(dir, "file")))
      assert.isTrue(Records.isGone(path.join(dir, "missing")))
      assert.isTrue(Records.isGone(path.join(dir, "file", "below")))
      assert.isUndefined(Records.remove(path.join(dir, "missing")))
      assert.strictEqual(Records.remove(path.join(dir, "file")), 0)
      assert.isFalse(fs.existsSync(path.join(dir, "file")))
    }))
})
