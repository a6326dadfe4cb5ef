/**
 * A store's environments opened ahead of a run (`store/OpenAhead.ts`, as a standby engine does while it waits), on
 * real LMDB in temp dirs: the next store takes them as its own and closes them with itself; one that asks for other
 * settings still opens (the waiting environment is closed first); nothing is made where no environment is, even when
 * the store is removed while it is being opened; and what a standby is told to open is refused unless it is a plain
 * list of absolute paths and LMDB's settings.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"
import * as Digest from "../../src/domain/Digest.js"
import { registrySize, warm } from "../../src/layers/store/internal/lmdb/envs.js"
import * as OpenAhead from "../../src/layers/store/OpenAhead.js"
import * as OpenedEnvs from "../../src/layers/store/OpenedEnvs.js"
import * as Store from "../../src/layers/store/Store.js"
import { tempDir } from "../utils/temp.js"

/** What this process has opened under `root`, as a run's end tells its standby. */
const openedUnder = (root: string) => OpenedEnvs.openedHere().filter((e) => e.dir.startsWith(`${root}/`))

/** A store under `root` with one file in it, opened and closed again: the environments it opened. */
const storeWithAFile = (root: string) =>
  Effect.gen(function*() {
    const digest = yield* Effect.scoped(Effect.flatMap(Store.make({ root }), (s) => s.putFile(Buffer.from("kept\n"))))
    return { digest, opened: openedUnder(root) }
  })

describe("a store opened ahead of a run", () => {
  it.scoped("the next store takes the environments as its own, reads through them, and closes them with itself", () =>
    Effect.gen(function*() {
      const root = path.join(yield* tempDir("kiln-open-ahead-"), "store")
      const { digest, opened } = yield* storeWithAFile(root)
      // Shard 0 of each kind, and the shard of the file's digest.
      assert.isAtLeast(opened.length, 4)
      const before = registrySize()
      yield* OpenAhead.open(opened)
      assert.strictEqual(registrySize(), before + opened.length, "each is open, waiting")
      yield* Effect.scoped(Effect.gen(function*() {
        const store = yield* Store.make({ root })
        // Taken, not opened beside: LMDB forbids two handles on one environment in a process.
        assert.strictEqual(registrySize(), before + opened.length)
        assert.strictEqual(Buffer.from(yield* store.getFile(digest)).toString(), "kept\n")
        const another = yield* store.putFile(Buffer.from("added through a taken environment\n"))
        assert.isTrue(yield* store.hasFile(another))
      }))
      // The store's end closed what it took; only the shards it never touched still wait.
      const untaken = registrySize() - before
      OpenAhead.closeUntaken()
      assert.isAtMost(untaken, opened.length - 4)
      assert.strictEqual(registrySize(), before)
      // What it added was committed and synced as by any store.
      const again = yield* Effect.scoped(
        Effect.flatMap(
          Store.make({ root }),
          (s) => s.getFile(Digest.ofBytes(Buffer.from("added through a taken environment\n")))
        )
      )
      assert.strictEqual(Buffer.from(again).toString(), "added through a taken environment\n")
    }))

  it.scoped("a store with other settings opens: what waited with the last run's is closed first", () =>
    Effect.gen(function*() {
      const root = path.join(yield* tempDir("kiln-open-ahead-"), "store")
      const { digest, opened } = yield* storeWithAFile(root)
      const before = registrySize()
      yield* OpenAhead.open(opened.map((e) => ({ ...e, maxReaders: e.maxReaders + 1 })))
      assert.strictEqual(registrySize(), before + opened.length)
      const read = yield* Effect.scoped(Effect.flatMap(Store.make({ root }), (s) => s.getFile(digest)))
      assert.strictEqual(Buffer.from(read).toString(), "kept\n")
      OpenAhead.closeUntaken()
      assert.strictEqual(registrySize(), before)
    }))

  it.scoped("a store moved since it was opened ahead is opened where it is now, and nothing is made where it was", () =>
    Effect.gen(function*() {
      const dir = yield* tempDir("kiln-open-ahead-")
      const root = path.join(dir, "store")
      const { digest, opened } = yield* storeWithAFile(root)
      const before = registrySize()
      yield* OpenAhead.open(opened)
      const moved = path.join(dir, "moved")
      fs.renameSync(root, moved)
      yield* Effect.scoped(Effect.gen(function*() {
        const store = yield* Store.make({ root: moved })
        assert.strictEqual(Buffer.from(yield* store.getFile(digest)).toString(), "kept\n")
        yield* store.putFile(Buffer.from("written after the move\n"))
      }))
      // What the run wrote was marked and synced in the store it wrote: the old path was never made again.
      assert.isFalse(fs.existsSync(root), "the store's old path was written to")
      OpenAhead.closeUntaken()
      assert.strictEqual(registrySize(), before)
    }))

  it.scoped("nothing is made where no environment is, and one already open is left as it is", () =>
    Effect.gen(function*() {
      const root = path.join(yield* tempDir("kiln-open-ahead-"), "store")
      const { opened } = yield* storeWithAFile(root)
      const elsewhere = path.join(path.dirname(root), "gone")
      const before = registrySize()
      yield* OpenAhead.open(opened.map((e) => ({ ...e, dir: e.dir.replace(root, elsewhere) })))
      assert.strictEqual(registrySize(), before)
      assert.isFalse(fs.existsSync(elsewhere))
      // A data file LMDB must not map (truncated) is left to the run, which names it.
      const first = opened[0]!
      fs.truncateSync(path.join(first.dir, "data.mdb"), 100)
      yield* OpenAhead.open([first])
      assert.strictEqual(registrySize(), before)
      yield* Effect.scoped(Effect.gen(function*() {
        yield* Store.make({ root: path.join(path.dirname(root), "other") })
        const during = registrySize()
        yield* OpenAhead.open(openedUnder(path.join(path.dirname(root), "other")))
        assert.strictEqual(registrySize(), during, "those the store holds are not opened twice")
      }))
    }))

  it.scoped("a store removed while it is opened ahead is not made again: the removal leaves nothing behind", () =>
    Effect.gen(function*() {
      const root = path.join(yield* tempDir("kiln-open-ahead-"), "store")
      const { opened } = yield* storeWithAFile(root)
      const before = registrySize()
      const [first, second] = opened
      // The whole directory removed between the look and the open (`rm -rf` of the store as a standby opens it).
      yield* warm([first!], () => fs.rmSync(first!.dir, { recursive: true }))
      assert.isFalse(fs.existsSync(first!.dir), "the removed environment's directory was made again")
      // Its files unlinked but not yet its directory (the `rm` between its unlinks and its `rmdir`).
      yield* warm([second!], () => {
        for (const name of fs.readdirSync(second!.dir)) fs.rmSync(path.join(second!.dir, name))
      })
      assert.deepStrictEqual(fs.readdirSync(second!.dir), [], "the open left files where the store was removed")
      fs.rmdirSync(second!.dir)
      assert.strictEqual(registrySize(), before, "an environment was opened where the store was removed")
      // The rest, left alone, still opens ahead.
      yield* OpenAhead.open(opened.slice(2))
      assert.strictEqual(registrySize(), before + opened.length - 2)
      OpenAhead.closeUntaken()
      assert.strictEqual(registrySize(), before)
    }))

  it("a list to open is taken only as absolute, normal paths with LMDB's settings, and no longer than its bound", () => {
    const ok = { dir: "/tmp/s/files/0", mapSize: 1 << 30, maxReaders: 126, lockTable: false }
    assert.deepStrictEqual(OpenedEnvs.parse([ok]), [ok])
    for (
      const bad of [
        undefined,
        "[]",
        {},
        [null],
        [{ ...ok, dir: "relative/files/0" }],
        [{ ...ok, dir: "/tmp/s/../etc" }],
        [{ ...ok, dir: "/tmp/s/files/0/" }],
        [{ ...ok, dir: "/tmp/s\0/files" }],
        [{ ...ok, mapSize: -1 }],
        [{ ...ok, mapSize: 1.5 }],
        [{ ...ok, maxReaders: 0 }],
        [{ ...ok, maxReaders: "126" }],
        [{ ...ok, lockTable: 1 }],
        Array.from({ length: OpenedEnvs.MAX_OPENED + 1 }, (_, i) => ({ ...ok, dir: `/tmp/s/files/${i}` }))
      ]
    ) assert.isUndefined(OpenedEnvs.parse(bad), JSON.stringify(bad)?.slice(0, 80))
  })
})
