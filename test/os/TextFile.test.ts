/**
 * kiln's own text files read back as written, whether every byte is ASCII (the latin1 fast path) or not (paths in
 * UTF-8: a workspace may name a file `café.txt` or `日本.md`).
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"
import * as TextFile from "../../src/os/TextFile.js"
import { tempDir } from "../utils/temp.js"

describe("TextFile", () => {
  it.scoped("reads ASCII and UTF-8 text, by path and by descriptor, as it was written", () =>
    Effect.gen(function*() {
      const dir = yield* tempDir("kiln-text-file-")
      for (const text of ["", "{\"paths\":\"a/b\\u0000c\"}", "{\"paths\":\"café.txt\\u0000日本.md\\u0000🙂\"}"]) {
        const file = path.join(dir, "memo.json")
        fs.writeFileSync(file, text)
        assert.strictEqual(TextFile.read(file), text)
        const fd = fs.openSync(file, "r")
        try {
          assert.strictEqual(TextFile.read(fd), text)
        } finally {
          fs.closeSync(fd)
        }
        assert.deepStrictEqual(JSON.parse(TextFile.read(file) || "null"), JSON.parse(text || "null"))
      }
    }))
})
