/**
 * Selecting processes (`domain/config/Selection.ts`): names, globs, `!` exclusions, `x...` and `...x`, `--affected`, and
 * the suggestions of an unknown word (`domain/internal/nearestNames.ts`).
 */
import { assert, describe, it } from "@effect/vitest"
import { FastCheck as fc } from "effect"
import * as Affected from "../../src/domain/Affected.js"
import * as Selection from "../../src/domain/config/Selection.js"
import { editDistance, nearest } from "../../src/domain/internal/nearestNames.js"

// gen ← compile:a ← compile:b ← test:b; lint alone; bundle ← compile:a, compile:b.
const DEPS: Record<string, ReadonlyArray<string>> = {
  gen: [],
  "compile:a": ["gen"],
  "compile:b": ["compile:a"],
  "test:b": ["compile:b"],
  lint: [],
  bundle: ["compile:a", "compile:b"]
}
const graph: Selection.Graph = { names: Object.keys(DEPS), depsOf: (n) => DEPS[n] ?? [] }

const names = (words: ReadonlyArray<string>, g: Selection.Graph = graph, affected?: ReadonlySet<string>) => {
  const r = Selection.select(g, words, affected)
  assert.strictEqual(r._tag, "Selected", r._tag === "Unknown" ? r.message : "")
  return (r as Selection.Selected).names
}

describe("Selection", () => {
  it("no word selects every process, in kiln.json's order", () => {
    assert.deepStrictEqual(names([]), graph.names)
  })

  it("names and globs select what they match", () => {
    assert.deepStrictEqual(names(["lint"]), ["lint"])
    assert.deepStrictEqual(names(["compile:*"]), ["compile:a", "compile:b"])
    assert.deepStrictEqual(names(["*:b"]), ["compile:b", "test:b"])
    assert.deepStrictEqual(names(["compile:?", "lint"]), ["compile:a", "compile:b", "lint"])
  })

  it("`x...` adds its deps, `...x` its dependents, `...x...` both", () => {
    assert.deepStrictEqual(names(["compile:b..."]), ["gen", "compile:a", "compile:b"])
    assert.deepStrictEqual(names(["...compile:a"]), ["compile:a", "compile:b", "test:b", "bundle"])
    assert.deepStrictEqual(names(["...compile:b..."]), ["gen", "compile:a", "compile:b", "test:b", "bundle"])
  })

  it("`!` excludes whatever else selects it; alone, from every process", () => {
    assert.deepStrictEqual(names(["!lint"]), ["gen", "compile:a", "compile:b", "test:b", "bundle"])
    assert.deepStrictEqual(names(["test:b...", "!gen"]), ["compile:a", "compile:b", "test:b"])
    assert.deepStrictEqual(names(["!compile:*", "!...gen"]), ["lint"])
  })

  it("a process's whole name is that process, whatever it holds", () => {
    const odd: Selection.Graph = { names: ["...a", "!b", "c*"], depsOf: () => [] }
    assert.deepStrictEqual(names(["...a"], odd), ["...a"])
    assert.deepStrictEqual(names(["!b"], odd), ["!b"])
    assert.deepStrictEqual(names(["c*"], odd), ["c*"])
    assert.deepStrictEqual(names(["!!b"], odd), ["...a", "c*"])
  })

  it("--affected narrows the selection to what it found", () => {
    const hit = new Set(["compile:b", "test:b", "bundle"])
    assert.deepStrictEqual(names([], graph, hit), ["compile:b", "test:b", "bundle"])
    assert.deepStrictEqual(names(["*:b"], graph, hit), ["compile:b", "test:b"])
    assert.deepStrictEqual(names(["!bundle"], graph, hit), ["compile:b", "test:b"])
  })

  it("affected: processes whose inputs take a changed path, and their dependents", () => {
    const inputs: Record<string, ReadonlyArray<string>> = {
      gen: ["tools/gen.mjs"],
      "compile:a": ["a/src/**", "!a/src/**/*.test.ts"],
      "compile:b": ["b/src"],
      "test:b": ["b/test/**"],
      lint: ["**/*.ts"],
      bundle: []
    }
    const of = (changed: ReadonlyArray<string>, config?: string) =>
      [...Affected.affected(graph, (n) => inputs[n]!, changed, config)].sort()
    assert.deepStrictEqual(of(["a/src/x.test.ts"]), ["lint"])
    assert.deepStrictEqual(of(["a/src/x.js"]), ["bundle", "compile:a", "compile:b", "test:b"])
    // A literal input that is a directory takes what is under it.
    assert.deepStrictEqual(of(["b/src/deep/y.js"]), ["bundle", "compile:b", "test:b"])
    assert.deepStrictEqual(of(["README.md"]), [])
    assert.deepStrictEqual(of(["kiln.json"], "kiln.json"), [...graph.names].sort())
  })

  it("an unknown name or a glob that matches nothing is one line suggesting the nearest names", () => {
    const typo = Selection.select(graph, ["compil:a"])
    assert.strictEqual(typo._tag, "Unknown")
    assert.strictEqual((typo as Selection.Unknown).message, `unknown process "compil:a": did you mean "compile:a"?`)
    const glob = Selection.select(graph, ["complie:*"])
    assert.strictEqual(
      (glob as Selection.Unknown).message,
      `"complie:*" matches no process: did you mean "compile:a" or "compile:b"?`
    )
    const excluded = Selection.select(graph, ["!lnit"])
    assert.deepStrictEqual((excluded as Selection.Unknown).suggestions, ["lint"])
    const far = Selection.select(graph, ["deploy-everything"])
    assert.strictEqual(
      (far as Selection.Unknown).message,
      `unknown process "deploy-everything"`
    )
  })

  it("nearest: by edit distance, a swap costs one, wildcards match freely", () => {
    assert.strictEqual(editDistance("ouputs", "outputs"), 1)
    assert.strictEqual(editDistance("biuld", "build"), 1)
    assert.strictEqual(editDistance("b*:web", "build:web", true), 0)
    assert.deepStrictEqual(nearest("ouputs", ["inputs", "outputs", "deps"]), ["outputs"])
    assert.deepStrictEqual(nearest("zzz", ["inputs", "outputs"]), [])
  })

  // A random graph: each process may depend only on those before it (no cycles).
  const graphArb = fc.integer({ min: 1, max: 12 }).chain((n) =>
    fc.tuple(
      ...Array.from({ length: n }, (_, i) => fc.subarray(Array.from({ length: i }, (_, j) => `p${j}`)))
    ).map((deps): Selection.Graph => {
      const byName = new Map(deps.map((d, i) => [`p${i}`, d]))
      return { names: [...byName.keys()], depsOf: (name) => byName.get(name) ?? [] }
    })
  )
  const pick = (g: Selection.Graph, i: number) => g.names[i % g.names.length]!

  it.prop("`x...` is x's closure over deps, and `...x` everything that reaches x", [graphArb, fc.nat()], ([g, i]) => {
    const x = pick(g, i)
    const up = names([`${x}...`], g)
    assert.sameMembers([...up], [...Selection.reach(g.depsOf, [x])])
    for (const n of names([`...${x}`], g)) assert.isTrue(Selection.reach(g.depsOf, [n]).has(x))
  })

  it.prop(
    "`!x` is never selected, whatever else is",
    [graphArb, fc.nat(), fc.array(fc.tuple(fc.nat(), fc.constantFrom("", "...", "dependents", "both")))],
    ([g, i, others]) => {
      const x = pick(g, i)
      const words = others.map(([j, form]) => {
        const n = pick(g, j)
        return form === "" ? n : form === "..." ? `${n}...` : form === "dependents" ? `...${n}` : `...${n}...`
      })
      assert.notInclude(names([...words, `!${x}`], g), x)
      assert.notInclude(names([`!${x}`, "p*"], g), x)
    }
  )

  it.prop("a selection is in the graph's order, each name once", [graphArb, fc.array(fc.nat())], ([g, picks]) => {
    const got = names(picks.map((j) => `...${pick(g, j)}...`), g)
    assert.deepStrictEqual(got, g.names.filter((n) => got.includes(n)))
  })
})
