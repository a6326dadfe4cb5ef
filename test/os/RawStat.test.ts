/**
 * The run memo's raw `lstat`: Node's fs binding read without a `Stats` object must give exactly what `fs.lstatSync`
 * gives, for every kind of path, and see every change a `Stats` would.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"
import * as RawStat from "../../src/os/RawStat.js"
import { tempDir } from "../utils/temp.js"

const fresh = (): RawStat.RawStat => ({ dev: -1, ino: -1, mode: -1, size: -1, mtimeMs: -1, ctimeMs: -1 })

const viaFs = (p: string): RawStat.RawStat => {
  const st = fs.lstatSync(p)
  return { dev: st.dev, ino: st.ino, mode: st.mode, size: st.size, mtimeMs: st.mtimeMs, ctimeMs: st.ctimeMs }
}

const raw = (p: string, probe: string): RawStat.RawStat | undefined => {
  const out = fresh()
  return RawStat.lstatInto(p, out, probe) ? out : undefined
}

describe("raw lstat", () => {
  it.scoped("reads Node's binding on Node 20, and answers as fs.lstatSync for files, directories and symlinks", () =>
    Effect.gen(function*() {
      const dir = yield* tempDir("kiln-rawstat-")
      if (process.versions.node.startsWith("20.")) assert.isTrue(RawStat.usesBinding(dir))
      const file = path.join(dir, "f.txt")
      fs.writeFileSync(file, "some bytes\n")
      fs.chmodSync(file, 0o640)
      fs.symlinkSync("f.txt", path.join(dir, "link"))
      fs.symlinkSync("nowhere", path.join(dir, "dangling"))
      fs.mkdirSync(path.join(dir, "sub"))
      for (const name of ["f.txt", "link", "dangling", "sub", "."]) {
        const p = path.join(dir, name)
        assert.deepStrictEqual(raw(p, dir), viaFs(p), name)
      }
      // Fractional milliseconds survive as Node computes them.
      fs.utimesSync(file, 1_700_000_000.123456, 1_700_000_000.987654)
      assert.deepStrictEqual(raw(file, dir), viaFs(file))
      assert.notStrictEqual(raw(file, dir)!.mtimeMs % 1, 0)
    }))

  it.scoped("an absent path is false; a path through a file throws, as fs.lstatSync does", () =>
    Effect.gen(function*() {
      const dir = yield* tempDir("kiln-rawstat-")
      fs.writeFileSync(path.join(dir, "f"), "")
      assert.isUndefined(raw(path.join(dir, "missing"), dir))
      assert.isUndefined(raw(path.join(dir, "missing", "deeper"), dir))
      assert.throws(() => raw(path.join(dir, "f", "under-a-file"), dir), /ENOTDIR/)
    }))

  it.scoped("every change moves what it reads: content, size, mode, replacement", () =>
    Effect.gen(function*() {
      const dir = yield* tempDir("kiln-rawstat-")
      const file = path.join(dir, "f")
      fs.writeFileSync(file, "one")
      const hourAgo = new Date(Date.now() - 3600_000)
      fs.utimesSync(file, hourAgo, hourAgo)
      const before = raw(file, dir)!
      fs.writeFileSync(file, "two")
      const rewritten = raw(file, dir)!
      assert.strictEqual(rewritten.size, before.size)
      assert.notStrictEqual(rewritten.mtimeMs, before.mtimeMs)
      fs.chmodSync(file, 0o600)
      assert.notStrictEqual(raw(file, dir)!.mode, rewritten.mode)
      fs.writeFileSync(path.join(dir, "g"), "other")
      fs.renameSync(path.join(dir, "g"), file)
      assert.notStrictEqual(raw(file, dir)!.ino, before.ino)
      assert.deepStrictEqual(raw(file, dir), viaFs(file))
    }))
})

describe("racily clean", () => {
  const S = 1_000_000_000n
  it("the tick is told by the ctime: an mtime on a whole second (as tar leaves it) is not a coarse file system", () => {
    const ctimeNs = 1_700_000_000n * S + 123_456_789n
    const unpacked = { mtimeNs: 1_600_000_000n * S, ctimeNs }
    assert.isTrue(RawStat.racyAt(unpacked, ctimeNs + 5_000_000n))
    assert.isFalse(RawStat.racyAt(unpacked, ctimeNs + 100_000_000n))
    // A ctime on a whole second: timestamps of whole seconds, where a change up to a second later is not seen.
    const coarse = { mtimeNs: 1_700_000_000n * S, ctimeNs: 1_700_000_000n * S }
    assert.isTrue(RawStat.racyAt(coarse, coarse.ctimeNs + S + 500_000_000n))
    assert.isFalse(RawStat.racyAt(coarse, coarse.ctimeNs + 3n * S))
    // An mtime set ahead of now is racy until it has passed, whatever the ctime.
    assert.isTrue(RawStat.racyAt({ mtimeNs: ctimeNs + 5n * S, ctimeNs }, ctimeNs + S))
  })
})
