import { assert, describe, it } from "@effect/vitest"
import { didYouMean, nearest } from "../../src/domain/internal/didYouMean.js"

describe("didYouMean", () => {
  it("finds the nearest candidates by Damerau-Levenshtein distance, only the nearest", () => {
    assert.deepStrictEqual(nearest("ouputs", ["inputs", "outputs", "deps", "argv"]), ["outputs"])
    assert.deepStrictEqual(nearest("bild", ["build", "run", "ls", "explain"]), ["build"])
    // A swap of two neighbours is one edit.
    assert.deepStrictEqual(nearest("dpes", ["deps", "env"]), ["deps"])
    assert.deepStrictEqual(nearest("--concurency", ["--concurrency", "--cache"]), ["--concurrency"])
  })

  it("suggests nothing far away, nor the word itself", () => {
    assert.deepStrictEqual(nearest("xyzzy", ["build", "run", "ls"]), [])
    assert.deepStrictEqual(nearest("run", ["run"]), [])
    // Two letters: one edit only.
    assert.deepStrictEqual(nearest("lx", ["ls", "gc", "run"]), ["ls"])
    assert.deepStrictEqual(nearest("xy", ["ab", "cd"]), [])
    assert.deepStrictEqual(nearest("x", ["a", "b"]), [])
  })

  it("keeps at most max, ties alphabetically", () => {
    assert.deepStrictEqual(nearest("a1", ["a2", "a3", "a4", "a5"], 2), ["a2", "a3"])
  })

  it("says it as the end of an error line", () => {
    assert.strictEqual(didYouMean("ouputs", ["outputs"]), ": did you mean \"outputs\"?")
    assert.strictEqual(didYouMean("a1", ["a2", "a3"]), ": did you mean \"a2\" or \"a3\"?")
    assert.strictEqual(didYouMean("zzz", ["outputs"]), "")
  })
})
