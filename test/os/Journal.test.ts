/**
 * The journal on a real file: what was appended replays as it was, in order, and a line a crash cut short is skipped
 * without costing any other line, before or after it.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, FastCheck } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"
import * as Journal from "../../src/os/Journal.js"
import { tempDir } from "../utils/temp.js"

const entry = FastCheck.dictionary(FastCheck.string(), FastCheck.jsonValue(), { maxKeys: 4 })
const entries = FastCheck.array(entry, { maxLength: 12 })

/** What a value comes back as through JSON (`-0` is `0`, …). */
const viaJson = (v: unknown) => JSON.parse(JSON.stringify(v)) as unknown

const replayed = (file: string) => {
  const out: Array<unknown> = []
  Journal.replay(fs.existsSync(file) ? fs.readFileSync(file, "utf8") : "", (v) => out.push(v))
  return out
}

describe("Journal", () => {
  it.scoped.prop(
    "replaying what was appended gives back every line, in order",
    [entries],
    ([lines]) =>
      Effect.gen(function*() {
        const file = path.join(yield* tempDir("kiln-journal-"), "j")
        for (const line of lines) assert.isTrue(Journal.append(file, line))
        assert.deepStrictEqual(replayed(file), lines.map(viaJson))
      })
  )

  it.scoped.prop(
    "a line cut short is skipped, and never corrupts the lines before or after it",
    [entries, entry, FastCheck.double({ min: 0, max: 1, maxExcluded: true, noNaN: true }), entries],
    ([before, torn, at, after]) =>
      Effect.gen(function*() {
        const file = path.join(yield* tempDir("kiln-journal-"), "j")
        for (const line of before) Journal.append(file, line)
        const size = fs.statSync(file, { throwIfNoEntry: false })?.size ?? 0
        Journal.append(file, torn)
        // The crash: anything from the torn line's leading newline to all of it but its closing brace and newline.
        const whole = fs.statSync(file).size
        fs.truncateSync(file, size + 1 + Math.floor(at * (whole - size - 2)))
        assert.deepStrictEqual(replayed(file), before.map(viaJson), "a torn last line")
        for (const line of after) Journal.append(file, line)
        assert.deepStrictEqual(replayed(file), [...before, ...after].map(viaJson), "appends after a torn line")
      })
  )

  it.scoped("a line that would grow the journal past its limit is not written", () =>
    Effect.gen(function*() {
      const file = path.join(yield* tempDir("kiln-journal-"), "j")
      assert.isTrue(Journal.append(file, { a: 1 }, 100))
      const size = fs.statSync(file).size
      assert.isFalse(Journal.append(file, { a: "x".repeat(100) }, 100))
      assert.strictEqual(fs.statSync(file).size, size)
      assert.deepStrictEqual(replayed(file), [{ a: 1 }])
    }))

  it("replay skips lines that are not objects", () => {
    const out: Array<unknown> = []
    Journal.replay("\n1\n\"s\"\nnull\n[1]\n{\"a\":1}\n{\"b\":\n", (v) => out.push(v))
    assert.deepStrictEqual(out, [{ a: 1 }])
  })
})
