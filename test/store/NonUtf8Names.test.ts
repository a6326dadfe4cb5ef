/**
 * A file whose name is not UTF-8 in an input tree, on a real directory: Node's listing names it with U+FFFD, by which
 * it cannot be opened, and the walk took it for deleted, so a change to its bytes was missed. It is refused instead,
 * naming it, for a walk of part of a workspace and for a directory taken whole.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"
import { tempDir, tempStore, writeTree } from "../utils/temp.js"

describe("a file whose name is not UTF-8", () => {
  for (const globs of [undefined, ["node_modules/**"]]) {
    it.scoped(`is refused by a snapshot, naming it (${globs === undefined ? "the whole directory" : "a glob"})`, () =>
      Effect.gen(function*() {
        const store = yield* tempStore()
        const dir = path.join(yield* tempDir("kiln-nonutf8-"), "ws")
        writeTree(dir, { "node_modules/pkg/index.js": "1\n" })
        const bad = Buffer.from(`${dir}/node_modules/pkg/bad\xffname.js`, "latin1")
        fs.writeFileSync(bad, "hidden\n")
        // Before the temp dir's removal, which lists names as Node does and cannot remove it by its listed name.
        yield* Effect.addFinalizer(() => Effect.sync(() => fs.rmSync(bad, { force: true })))
        const error = yield* Effect.flip(store.snapshot(dir, globs))
        assert.strictEqual(error._tag, "StoreError")
        assert.include(error.message, "not UTF-8")
        assert.include(error.message, "bad\uFFFDname.js")
      }))
  }
})
