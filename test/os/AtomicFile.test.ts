/**
 * Replacing a file atomically, and writing whole buffers, on a real file system in a temp directory.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"
import * as AtomicFile from "../../src/os/AtomicFile.js"
import { writeAll } from "../../src/os/WriteAll.js"
import { tempDir } from "../utils/temp.js"

describe("AtomicFile", () => {
  it.scoped("replaces a file whole, leaving no temp file", () =>
    Effect.gen(function*() {
      const dir = yield* tempDir("kiln-atomic-")
      const file = path.join(dir, "f.json")
      fs.writeFileSync(file, "old, and longer than what replaces it")
      AtomicFile.write(file, "new")
      assert.strictEqual(fs.readFileSync(file, "utf8"), "new")
      AtomicFile.write(file, Buffer.from([1, 2, 3]), { fsync: true })
      assert.deepStrictEqual([...fs.readFileSync(file)], [1, 2, 3])
      assert.deepStrictEqual(fs.readdirSync(dir), ["f.json"])
    }))

  it.scoped("sets the mode exactly, whatever the umask", () =>
    Effect.gen(function*() {
      const dir = yield* tempDir("kiln-atomic-")
      const file = path.join(dir, "ro")
      const umask = process.umask(0o077)
      try {
        AtomicFile.write(file, "x", { mode: 0o444 })
      } finally {
        process.umask(umask)
      }
      assert.strictEqual(fs.statSync(file).mode & 0o777, 0o444)
    }))

  it.scoped("runs beforeRename on the whole temp file while the old file is still in place", () =>
    Effect.gen(function*() {
      const dir = yield* tempDir("kiln-atomic-")
      const file = path.join(dir, "f")
      fs.writeFileSync(file, "old")
      let seen: { readonly tmp: string; readonly old: string } | undefined
      AtomicFile.write(file, "new", {
        beforeRename: (tmp) => (seen = { tmp: fs.readFileSync(tmp, "utf8"), old: fs.readFileSync(file, "utf8") })
      })
      assert.deepStrictEqual(seen, { tmp: "new", old: "old" })
    }))

  it.scoped("a failed write leaves the old file and no temp file, and says why", () =>
    Effect.gen(function*() {
      const dir = yield* tempDir("kiln-atomic-")
      const file = path.join(dir, "f")
      fs.writeFileSync(file, "old")
      assert.throws(() =>
        AtomicFile.write(file, "new", {
          beforeRename: () => {
            throw new Error("disk full")
          }
        }), "disk full")
      assert.strictEqual(fs.readFileSync(file, "utf8"), "old")
      assert.deepStrictEqual(fs.readdirSync(dir), ["f"])
    }))

  it.scoped("replace changes nothing when make declines, and uses the temp path it is given", () =>
    Effect.gen(function*() {
      const dir = yield* tempDir("kiln-atomic-")
      const file = path.join(dir, "f")
      fs.writeFileSync(file, "old")
      assert.isFalse(AtomicFile.replace(file, () => false))
      assert.strictEqual(fs.readFileSync(file, "utf8"), "old")
      const hidden = path.join(dir, ".f.tmp")
      assert.isTrue(AtomicFile.replace(file, (tmp) => fs.symlinkSync("target", tmp), hidden))
      assert.strictEqual(fs.readlinkSync(file), "target")
      assert.deepStrictEqual(fs.readdirSync(dir), ["f"])
    }))

  it("temp paths sit beside the file, end in .tmp, and differ each time", () => {
    const a = AtomicFile.tempPathOf("/x/y/f")
    assert.match(a, new RegExp(`^/x/y/f\\.${process.pid}\\.[0-9a-f]{8}\\.tmp$`))
    assert.notStrictEqual(a, AtomicFile.tempPathOf("/x/y/f"))
  })
})

describe("writeAll", () => {
  it.scoped("writes the given length at the offset, or at a position", () =>
    Effect.gen(function*() {
      const dir = yield* tempDir("kiln-writeall-")
      const file = path.join(dir, "f")
      const big = Buffer.alloc(3 * 1024 * 1024, 7)
      const fd = fs.openSync(file, "w")
      try {
        writeAll(fd, big)
        writeAll(fd, Buffer.from("abcdef"), 3)
        writeAll(fd, Buffer.from("XY"), 2, 1)
      } finally {
        fs.closeSync(fd)
      }
      const back = fs.readFileSync(file)
      assert.strictEqual(back.length, big.length + 3)
      assert.strictEqual(back.subarray(0, 4).toString("latin1"), "\x07XY\x07")
      assert.strictEqual(back.subarray(big.length).toString(), "abc")
    }))
})
