/**
 * Files of a directory taken whole are hashed and left in the workspace, not copied into the store (see
 * workspaceSources.ts): the store reads them from there when a reader needs them, and only while they still are what
 * was hashed. A file changed or swapped for a link since is missing, never taken under the old digest.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Either } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"
import * as Digest from "../../src/domain/Digest.js"
import * as WorkspaceSources from "../../src/layers/store/internal/workspaceSources.js"
import * as SharedTrees from "../../src/layers/store/SharedTrees.js"
import * as Store from "../../src/layers/store/Store.js"
import { settleTimes, tempDir, writeTree } from "../utils/temp.js"

const GLOBS = ["node_modules/**", "src/**"]
/** Past the large-file threshold (512 KiB): stored outside LMDB, linked into sandboxes. */
const LARGE = Buffer.alloc(600 * 1024, 7)

const snapshotInSession = (store: Store.Service, ws: string) =>
  Effect.scoped(Effect.gen(function*() {
    const session = yield* store.snapshotSession(ws)
    const [taken] = yield* store.snapshotMany(ws, [{ globs: GLOBS, observe: true }], session)
    return yield* taken!
  }))

/** A workspace whose node_modules is as large as a shared tree (mounted, not written), and a small src. */
const workspace = Effect.map(tempDir("kiln-sources-"), (ws) => {
  const files: Record<string, string | Uint8Array> = {
    "src/a.txt": "a\n",
    "node_modules/p/index.js": "module.exports = 1\n",
    "node_modules/p/other.js": "module.exports = 2\n",
    "node_modules/big/blob.bin": LARGE
  }
  for (let i = 0; i < WorkspaceSources.LEFT_MIN_FILES; i++) files[`node_modules/q${i % 10}/f${i}.js`] = `${i}\n`
  writeTree(ws, files)
  settleTimes(path.join(ws, "node_modules"))
  return ws
})

const digestAt = (store: Store.Service, root: Digest.Digest, rel: string) =>
  Effect.map(store.listTree(root), (entries) => entries.find((e) => e.path === rel)!.digest!)

describe("files left in the workspace", () => {
  it.scoped("a directory taken whole is hashed, not copied; its files are read from the workspace, then stored", () =>
    Effect.gen(function*() {
      const ws = yield* workspace
      const store = yield* Store.make({ root: yield* tempDir("kiln-store-") })
      const taken = yield* snapshotInSession(store, ws)
      const small = yield* digestAt(store, taken.digest, "node_modules/p/index.js")
      const large = yield* digestAt(store, taken.digest, "node_modules/big/blob.bin")
      const own = yield* digestAt(store, taken.digest, "src/a.txt")
      // The tree is whole in the store; the files of node_modules are not, those of the small src are (below the size
      // of a shared tree, which sandboxes mount: a small one is written into them from the store).
      assert.strictEqual(WorkspaceSources.LEFT_MIN_FILES, SharedTrees.DEFAULT_MIN_FILES)
      assert.isFalse(yield* store.hasFile(small))
      assert.isFalse(yield* store.hasFile(large))
      assert.isTrue(yield* store.hasFile(own))
      assert.strictEqual(Buffer.from(yield* store.getFile(small)).toString(), "module.exports = 1\n")
      assert.isTrue(Buffer.from(yield* store.getFile(large)).equals(LARGE))
      // Read, not stored: a reader that needs the store to hold them has ensureTree store them.
      assert.isFalse(yield* store.hasFile(small))
      yield* store.ensureTree(taken.digest, { complete: true })
      assert.isTrue(yield* store.hasFile(small))
      assert.isTrue(yield* store.hasFile(large))
      // And what it stored is what was hashed: a sandbox written from the store gets the workspace's bytes.
      const out = path.join(yield* tempDir("kiln-sources-out-"), "tree")
      yield* store.materialize(taken.digest, out)
      assert.isTrue(fs.readFileSync(path.join(out, "node_modules/big/blob.bin")).equals(LARGE))
      assert.strictEqual(fs.readFileSync(path.join(out, "node_modules/p/other.js"), "utf8"), "module.exports = 2\n")
    }))

  it.scoped("a file changed, or swapped for a link to the same bytes, since it was hashed is missing, not taken", () =>
    Effect.gen(function*() {
      const ws = yield* workspace
      const outside = yield* tempDir("kiln-sources-outside-")
      const store = yield* Store.make({ root: yield* tempDir("kiln-store-") })
      const taken = yield* snapshotInSession(store, ws)
      const changed = yield* digestAt(store, taken.digest, "node_modules/p/index.js")
      const linked = yield* digestAt(store, taken.digest, "node_modules/p/other.js")
      const large = yield* digestAt(store, taken.digest, "node_modules/big/blob.bin")
      // The same size, other bytes; and a link to a file outside holding exactly the bytes hashed.
      fs.writeFileSync(path.join(ws, "node_modules/p/index.js"), "module.exports = 9\n")
      fs.writeFileSync(path.join(outside, "other.js"), "module.exports = 2\n")
      fs.rmSync(path.join(ws, "node_modules/p/other.js"))
      fs.symlinkSync(path.join(outside, "other.js"), path.join(ws, "node_modules/p/other.js"))
      const big = Buffer.from(LARGE)
      big[1000] = 8
      fs.writeFileSync(path.join(ws, "node_modules/big/blob.bin"), big)
      for (const d of [changed, linked, large]) {
        const read = yield* Effect.either(store.getFile(d))
        assert.isTrue(Either.isLeft(read) && read.left._tag === "MissingDigest", Digest.format(d))
      }
      const ensured = yield* Effect.either(store.ensureTree(taken.digest, { complete: true }))
      assert.isTrue(Either.isLeft(ensured) && ensured.left._tag === "MissingDigest")
      for (const d of [changed, linked, large]) assert.isFalse(yield* store.hasFile(d))
      // What a run says of such a file names it (see NoProducer).
      assert.strictEqual(store.hashedAt(changed), path.join(ws, "node_modules/p/index.js"))
    }))

  it.scoped("a later process learns where the files are from the saved walk it takes", () =>
    Effect.gen(function*() {
      const ws = yield* workspace
      const root = yield* tempDir("kiln-store-")
      const taken = yield* Effect.scoped(Effect.flatMap(Store.make({ root }), (store) => snapshotInSession(store, ws)))
      yield* Effect.scoped(Effect.gen(function*() {
        const store = yield* Store.make({ root })
        const small = yield* digestAt(store, taken.digest, "node_modules/p/index.js")
        // Before its session takes the directory, this process does not know where the file is.
        assert.isTrue(Either.isLeft(yield* Effect.either(store.getFile(small))))
        const again = yield* Effect.scoped(Effect.gen(function*() {
          const session = yield* store.snapshotSession(ws)
          const [t] = yield* store.snapshotMany(ws, [{ globs: GLOBS }], session)
          const snapshot = yield* t!
          // Taken by its saved walk: nothing hashed again.
          assert.strictEqual(session.hashed, 0)
          return snapshot
        }))
        assert.deepStrictEqual(again.digest, taken.digest)
        assert.strictEqual(Buffer.from(yield* store.getFile(small)).toString(), "module.exports = 1\n")
      }))
    }))
})
