/**
 * Which named databases each environment of a store holds: `content` and `leases` in the shards of files, directories
 * and actions, and the action locks only in the lock environment (lmdb-js builds a handle for each database opened,
 * which is most of what opening an environment costs). Checked on disk, through lmdb-js, once the store has closed.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"
import * as Digest from "../../src/domain/Digest.js"
import * as Store from "../../src/layers/store/Store.js"
import { tempDir } from "../utils/temp.js"

/** The names of the named databases in the environment at `dir` (the keys of its main database). */
const databasesIn = (dir: string) =>
  Effect.promise(async () => {
    const { open } = await import("lmdb")
    const env = open<Buffer, Buffer>({ path: dir, readOnly: true, encoding: "binary", keyEncoding: "binary" })
    try {
      // LMDB stores each name as a C string: its NUL is dropped.
      return [...env.getKeys({})].map((k) => Buffer.from(k as Uint8Array).toString("utf8").replace(/\0$/, "")).sort()
    } finally {
      await env.close()
    }
  })

describe("the lock table", () => {
  it.scoped("lives in the lock environment only, and still locks an action", () =>
    Effect.gen(function*() {
      const root = yield* tempDir("kiln-store-")
      const action = Digest.ofBytes(Buffer.from("an action"))
      const file = Digest.ofBytes(Buffer.from("a file"))
      yield* Effect.scoped(Effect.gen(function*() {
        const store = yield* Store.make({ root, shardCount: 1 })
        yield* store.putFile(Buffer.from("a file"))
        const ran = yield* store.withActionLock(action, Effect.succeedNone, Effect.succeed("ran"))
        assert.strictEqual(ran, "ran")
      }))
      for (const kind of ["files", "directories", "actions"]) {
        const dir = path.join(root, kind, "0")
        assert.isTrue(fs.existsSync(path.join(dir, "data.mdb")), `${kind} was made`)
        assert.deepStrictEqual(yield* databasesIn(dir), ["content", "leases"], kind)
      }
      assert.include(yield* databasesIn(path.join(root, "locks", "0")), "locks")
      // The store opens again over what it made, and the file is there.
      yield* Effect.scoped(Effect.gen(function*() {
        const store = yield* Store.make({ root, shardCount: 1 })
        assert.isTrue(yield* store.hasFile(file))
      }))
    }))
})
