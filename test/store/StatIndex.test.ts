/**
 * Snapshots reuse the digests of unchanged files (the stat index), and never trust it where it could be wrong.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"
import * as Digest from "../../src/domain/Digest.js"
import * as StoreMaintenance from "../../src/layers/store/StoreMaintenance.js"
import * as RawStat from "../../src/os/RawStat.js"
import { eventually } from "../utils/child.js"
import { tempDir, tempStore, writeTree } from "../utils/temp.js"

const contentOf = (store: Effect.Effect.Success<ReturnType<typeof tempStore>>, root: Digest.Digest, file: string) =>
  Effect.gen(function*() {
    const entry = (yield* store.listTree(root)).find((e) => e.path === file)!
    return Buffer.from(yield* store.getFile(entry.digest!)).toString()
  })

describe("stat index", () => {
  it.scoped("an edit that keeps size and mtime is still seen (ctime changes), and so is one right after a save", () =>
    Effect.gen(function*() {
      const store = yield* tempStore()
      const ws = yield* tempDir()
      writeTree(ws, { "a.txt": "aaaa", "b.txt": "bbbb" })
      const old = new Date(Date.now() - 60_000)
      fs.utimesSync(path.join(ws, "a.txt"), old, old)
      const first = yield* Effect.scoped(
        Effect.flatMap(store.snapshotSession(ws), (s) => store.snapshot(ws, ["*.txt"], s))
      )
      // Same size, mtime put back: only ctime tells.
      fs.writeFileSync(path.join(ws, "a.txt"), "AAAA")
      fs.utimesSync(path.join(ws, "a.txt"), old, old)
      // Modified just now: racily clean against the index saved a moment ago, so hashed again.
      fs.writeFileSync(path.join(ws, "b.txt"), "BBBB")
      const second = yield* Effect.scoped(
        Effect.flatMap(store.snapshotSession(ws), (s) => store.snapshot(ws, ["*.txt"], s))
      )
      assert.notStrictEqual(Digest.format(second), Digest.format(first))
      assert.strictEqual(yield* contentOf(store, second, "a.txt"), "AAAA")
      assert.strictEqual(yield* contentOf(store, second, "b.txt"), "BBBB")
    }))

  // Live: whether a file is racily clean is a matter of the wall clock.
  it.scopedLive("a lazy session reads the index only once more than a few files had to be hashed without it", () =>
    Effect.gen(function*() {
      const store = yield* tempStore()
      const ws = yield* tempDir()
      const old = new Date(Date.now() - 60_000)
      const names = Array.from({ length: 40 }, (_, i) => `f${String(i).padStart(2, "0")}.txt`)
      for (const name of names) {
        fs.writeFileSync(path.join(ws, name), name)
        fs.utimesSync(path.join(ws, name), old, old)
      }
      // Their ctimes are now: an index saved within a timestamp tick of them could not vouch for them (racily clean),
      // and the later session would hash them again. The index below is saved once that tick has passed.
      yield* eventually("no file is racily clean any more", () => {
        const nowNs = BigInt(Date.now()) * 1_000_000n
        return names.every((name) => !RawStat.racyAt(fs.statSync(path.join(ws, name), { bigint: true }), nowNs))
      })
      const full = yield* Effect.scoped(
        Effect.flatMap(store.snapshotSession(ws), (s) => store.snapshot(ws, ["*.txt"], s))
      )
      const indexFile = path.join(
        store.options.root,
        "stat-index",
        fs.readdirSync(path.join(store.options.root, "stat-index"))[0]!
      )
      const saved = fs.readFileSync(indexFile, "utf8")
      // A few files (an edit run's): hashed, the index neither read nor rewritten, nothing counted as changed.
      const few = yield* Effect.scoped(Effect.gen(function*() {
        const session = yield* store.snapshotSession(ws, { lazy: true })
        const d = yield* store.snapshot(ws, ["f0*.txt"], session)
        assert.strictEqual(session.hashed, 0)
        return d
      }))
      assert.strictEqual(yield* contentOf(store, few, "f03.txt"), "f03.txt")
      assert.strictEqual(fs.readFileSync(indexFile, "utf8"), saved)
      // Many files, one of them changed past the first few: the index is read, the change found and recorded.
      fs.writeFileSync(path.join(ws, "f39.txt"), "changed")
      fs.utimesSync(path.join(ws, "f39.txt"), old, old)
      const many = yield* Effect.scoped(Effect.gen(function*() {
        const session = yield* store.snapshotSession(ws, { lazy: true })
        const d = yield* store.snapshot(ws, ["*.txt"], session)
        assert.strictEqual(session.hashed, 1)
        return d
      }))
      assert.notStrictEqual(Digest.format(many), Digest.format(full))
      assert.strictEqual(yield* contentOf(store, many, "f39.txt"), "changed")
      assert.notStrictEqual(fs.readFileSync(indexFile, "utf8"), saved)
    }))

  it.scoped("a file the index vouches for but whose blob left the store is read again", () =>
    Effect.gen(function*() {
      const store = yield* tempStore()
      const ws = yield* tempDir()
      writeTree(ws, { "keep.txt": "kept bytes" })
      const old = new Date(Date.now() - 60_000)
      fs.utimesSync(path.join(ws, "keep.txt"), old, old)
      const snap = () =>
        Effect.scoped(Effect.flatMap(store.snapshotSession(ws), (s) => store.snapshot(ws, ["keep.txt"], s)))
      const first = yield* snap()
      yield* StoreMaintenance.make(store).remove(Digest.ofBytes(Buffer.from("kept bytes")))
      const second = yield* snap()
      assert.strictEqual(Digest.format(second), Digest.format(first))
      yield* store.ensureTree(second, { complete: true })
    }))
})
