/**
 * Removing a tree that others change meanwhile: a dying engine's sandboxer may still write into a sandbox, and the
 * engine, its sandboxer and `kiln clean` may all remove the same one.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { spawnSync } from "node:child_process"
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

  it.scoped("a tree nested deeper than any path the system takes (a process can make one) is removed", () =>
    Effect.gen(function*() {
      const root = yield* tempDir("kiln-rm-")
      const tree = path.join(root, "sandbox")
      fs.mkdirSync(tree)
      // 3,000 levels by relative steps, as a process in its sandbox makes them: 9,000 bytes of path, past PATH_MAX.
      const steps =
        "for (let i = 0; i < 3000; i++) { fs.mkdirSync('dd'); process.chdir('dd') } fs.writeFileSync('f', 'x')"
      const made = spawnSync(process.execPath, ["-e", `const fs = require('fs'); ${steps}`], { cwd: tree })
      assert.strictEqual(made.status, 0, String(made.stderr))
      removeTree(tree)
      assert.isFalse(fs.existsSync(tree))
      assert.deepStrictEqual(fs.readdirSync(root), [])
    }))
})
