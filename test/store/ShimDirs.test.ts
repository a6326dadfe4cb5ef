/**
 * The `.bin` directories of a shared tree that may hold shims: found by decoding every directory of the tree, which
 * for a real `node_modules` is thousands of them, so the answer is kept in the store by the tree's digest (a tree
 * never changes) and a later engine reads it instead. A kept answer that is not one (a path out of the tree, a
 * malformed digest, not a list) is found again rather than used.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"
import * as Digest from "../../src/domain/Digest.js"
import * as SharedTrees from "../../src/layers/store/SharedTrees.js"
import type * as Store from "../../src/layers/store/Store.js"
import { tempDir, tempStore, writeTree } from "../utils/temp.js"

const shimDirsOf = (store: Store.Service, digest: Digest.Digest) =>
  Effect.scoped(Effect.flatMap(SharedTrees.make(store), (shared) => shared.shimDirs(digest, "node_modules")))

const paths = (dirs: ReadonlyArray<SharedTrees.ShimDir>) => dirs.map((d) => d.path).sort()

describe("shim directories of a shared tree", () => {
  it.scoped("are found once and kept by the tree's digest; a kept answer that is not one is found again", () =>
    Effect.gen(function*() {
      const ws = yield* tempDir("kiln-shimdirs-")
      writeTree(ws, {
        "node_modules/.bin/tool": "#!/bin/sh\n",
        "node_modules/p/index.js": "p\n",
        "node_modules/p/node_modules/.bin/x": "#!/bin/sh\n",
        "node_modules/q/node_modules/.bin/.keep/readme": "a directory, not a file of its own\n"
      })
      const store = yield* tempStore()
      const root = yield* store.snapshot(ws, ["node_modules/**"])
      const modules = (yield* store.getDirectory(root)).directories.find((d) => d.name === "node_modules")!.digest
      const found = yield* shimDirsOf(store, modules)
      assert.deepStrictEqual(paths(found), [".bin", "p/node_modules/.bin"])

      const dir = path.join(store.options.root, "immutable", "shim-dirs")
      const [file] = fs.readdirSync(dir)
      assert.isString(file)
      const kept = path.join(dir, file!)
      // What a later engine reads: shown by an answer only the kept file gives.
      const one = JSON.parse(fs.readFileSync(kept, "utf8")) as Array<{ path: string; digest: string }>
      fs.writeFileSync(kept, JSON.stringify(one.filter((d) => d.path === ".bin")))
      assert.deepStrictEqual(paths(yield* shimDirsOf(store, modules)), [".bin"])

      // Not an answer: found again, and kept right.
      for (
        const hostile of [
          [{ path: "../../../etc/.bin", digest: Digest.format(modules) }],
          [{ path: "p/node_modules/.bin", digest: "not a digest" }],
          [{ path: "p/node_modules/lib", digest: Digest.format(modules) }],
          { path: ".bin" },
          "[["
        ]
      ) {
        fs.writeFileSync(kept, typeof hostile === "string" ? hostile : JSON.stringify(hostile))
        assert.deepStrictEqual(paths(yield* shimDirsOf(store, modules)), [".bin", "p/node_modules/.bin"])
      }
      assert.deepStrictEqual(
        (JSON.parse(fs.readFileSync(kept, "utf8")) as Array<{ path: string }>).map((d) => d.path).sort(),
        [".bin", "p/node_modules/.bin"]
      )
    }))
})
