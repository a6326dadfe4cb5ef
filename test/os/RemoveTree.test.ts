/**
 * Removing a tree that others change meanwhile: a dying engine's sandboxer may still write into a sandbox, and the
 * engine, its sandboxer and `kiln clean` may all remove the same one.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"
import { removeTree } from "../../src/os/RemoveTree.js"
import { tempDir, writeTree } from "../utils/temp.js"

describe("removeTree", () => {
  it.scoped("a file written into a directory after it was listed is removed too", () =>
    Effect.gen(function*() {
      const root = yield* tempDir("kiln-rm-")
      const tree = path.join(root, "sandbox")
      writeTree(tree, { "a/one.txt": "1", "b.txt": "2" })
      let writes = 2
      removeTree(tree, (dir) => {
        if (dir.endsWith("/a") && writes-- > 0) fs.writeFileSync(path.join(dir, `late-${writes}.txt`), "late")
      })
      assert.isFalse(fs.existsSync(tree))
    }))

  it.scoped("entries another remover deleted first are not an error", () =>
    Effect.gen(function*() {
      const root = yield* tempDir("kiln-rm-")
      const tree = path.join(root, "sandbox")
      writeTree(tree, { "a/one.txt": "1", "a/deep/two.txt": "2", "b.txt": "3" })
      removeTree(tree, (dir, names) => {
        // The other remover takes everything this one has just listed.
        if (dir === tree) { for (const n of names) fs.rmSync(path.join(dir, n), { recursive: true, force: true }) }
      })
      assert.isFalse(fs.existsSync(tree))
    }))
})
