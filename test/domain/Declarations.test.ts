/**
 * Issue #38 §5: what processes declare of each other's outputs is checked before anything runs. Two processes that
 * write the same path back, and an input glob that takes another process's outputs without a dep on it, are config
 * errors naming the producer; a glob that excludes the outputs, or a dep (direct or not), makes it fine.
 */
import { assert, describe, it } from "@effect/vitest"
import { Either, FastCheck as fc } from "effect"
import * as path from "node:path"
import picomatch from "picomatch"
import { parse } from "../../src/domain/config/Config.js"
import * as Glob from "../../src/domain/Glob.js"
import { conflictsIn, type Declared, declaredGlobsOf } from "../../src/domain/internal/declarations.js"

const errorOf = (processes: Record<string, unknown>) => {
  const parsed = parse("kiln.json", JSON.stringify({ processes }))
  // Its headline, without the line and column (the lines quoting the file follow it).
  return Either.isLeft(parsed)
    ? parsed.left.message.split("\n")[0]!.replace(/^kiln\.json:\d+:\d+:/, "kiln.json:")
    : undefined
}

const P = (fields: Record<string, unknown> = {}) => ({ argv: ["true"], ...fields })

describe("declared outputs", () => {
  it("two processes declaring one output, or one inside the other's directory, is a config error", () => {
    assert.strictEqual(
      errorOf({ a: P({ outputs: ["gen/x.js"] }), b: P({ outputs: ["gen/x.js"] }) }),
      "kiln.json: processes.b.outputs[0]: gen/x.js is also an output of \"a\" (gen/x.js): two processes cannot write " +
        "the same path back"
    )
    assert.match(
      errorOf({ a: P({ outputs: ["dist/"] }), b: P({ outputs: ["x.js"], workingDirectory: "dist/sub" }) }) ?? "",
      /processes\.b\.outputs\[0\]: dist\/sub\/x\.js is also an output of "a" \(dist\/\)/
    )
    // Paths beside each other, and one process's own outputs, are fine.
    assert.isUndefined(errorOf({ a: P({ outputs: ["dist/", "dist/x"] }), b: P({ outputs: ["dist2/"] }) }))
  })

  it("an input glob that takes another's outputs needs a dep on it, or an exclusion", () => {
    const compile = P({ outputs: ["dist/"], workingDirectory: "lib" })
    assert.strictEqual(
      errorOf({ compile, test: P({ inputs: ["lib/**"] }) }),
      "kiln.json: processes.test.inputs[0]: \"lib/**\" takes lib/dist/, an output of \"compile\": add \"compile\" to " +
        "deps (or exclude it: \"!lib/dist/**\")"
    )
    assert.match(errorOf({ compile, test: P({ inputs: ["**/*.js"] }) }) ?? "", /"\*\*\/\*\.js" takes lib\/dist\//)
    assert.match(errorOf({ compile, test: P({ inputs: ["lib/dist/index.js"] }) }) ?? "", /an output of "compile"/)
    // A dep, a dep's dep, or an exclusion of the whole directory: fine.
    assert.isUndefined(errorOf({ compile, test: P({ inputs: ["lib/**"], deps: ["compile"] }) }))
    assert.isUndefined(
      errorOf({ compile, mid: P({ deps: ["compile"] }), test: P({ inputs: ["lib/**"], deps: ["mid"] }) })
    )
    assert.isUndefined(errorOf({ compile, test: P({ inputs: ["lib/**", "!lib/dist/**"] }) }))
    assert.isUndefined(errorOf({ compile, test: P({ inputs: ["lib/**", "!**/dist/**"] }) }))
    // Globs that stop beside the output.
    assert.isUndefined(errorOf({ compile, test: P({ inputs: ["lib/src/**", "lib/*.json", "dist/**"] }) }))
    // A file output.
    assert.match(
      errorOf({ gen: P({ outputs: ["gen/config.js"] }), use: P({ inputs: ["gen/*"] }) }) ?? "",
      /processes\.use\.inputs\[0\]: "gen\/\*" takes gen\/config\.js, an output of "gen": add "gen" to deps \(or exclude it: "!gen\/config\.js"\)/
    )
  })

  it("the README's example is fine", () => {
    assert.isUndefined(errorOf({
      gen: P({ inputs: ["tools/**", "config.json"], outputs: ["gen/config.js"] }),
      test: P({ inputs: ["test/**"], deps: ["gen"] })
    }))
  })
})

describe("Glob.reachUnder agrees with matching", () => {
  const segment = fc.constantFrom("a", "b", "x.js", ".d", "*", "*.js", "a*", "**")
  const name = fc.constantFrom("a", "b", "x.js", ".d", "ab")
  it.prop(
    "some: a path under the directory that it matches is reached; all: every path under it matches",
    [
      fc.array(segment, { minLength: 1, maxLength: 4 }),
      fc.array(name, { minLength: 1, maxLength: 3 }),
      fc.array(fc.array(name, { minLength: 1, maxLength: 3 }), { minLength: 1, maxLength: 12 })
    ],
    ([segs, dir, belows]) => {
      const glob = segs.join("/")
      const reach = Glob.reachUnder(glob, dir.join("/"))
      if (reach === undefined) return
      const matches = picomatch(glob, { dot: true })
      for (const below of belows) {
        const p = [...dir, ...below].join("/")
        // A path under the directory that matches: the glob reaches there; one that does not: it is not all.
        if (matches(p)) assert.isTrue(reach.some, `${glob} matches ${p}`)
        else assert.isFalse(reach.all, `${glob} does not match ${p}`)
      }
    },
    { fastCheck: { numRuns: 2000 } }
  )
})

/**
 * The checks as they were first written, every output and glob against every other: what the indexed ones must say,
 * conflict for conflict, in the same order.
 */
const conflictsByPairs = (processes: Readonly<Record<string, Declared>>) => {
  type Out = { owner: string; index: number; path: string; directory: boolean }
  const outputOf = (owner: string, index: number, written: string, wd: string | undefined): Out => {
    const bare = written.replace(/^\?/, "")
    const joined = path.posix.normalize(path.posix.join(wd ?? "", bare)).replace(/\/+$/, "")
    return { owner, index, path: joined === "." ? "" : joined, directory: bare.endsWith("/") }
  }
  const within = (inner: string, outer: string) => outer === "" || inner === outer || inner.startsWith(`${outer}/`)
  const overlaps = (a: Out, b: Out) =>
    a.path === b.path || (a.directory && within(b.path, a.path)) || (b.directory && within(a.path, b.path))
  const takes = (glob: string, exclusions: ReadonlyArray<string>, o: Out) => {
    if (!o.directory) return Glob.matcher([glob])(o.path) && !exclusions.some((x) => Glob.matcher([x])(o.path))
    if (o.path === "") return true
    const reach = Glob.reachUnder(glob, o.path)
    if (reach === undefined || !reach.some) return false
    return !exclusions.some((x) => Glob.reachUnder(x, o.path)?.all === true)
  }
  const depsOf = (name: string): Set<string> => {
    const all = new Set<string>()
    for (const d of processes[name]?.deps ?? []) {
      all.add(d)
      for (const dd of depsOf(d)) all.add(dd)
    }
    return all
  }
  const names = Object.keys(processes).sort()
  const outputs = names.flatMap((n) =>
    (processes[n]!.outputs ?? []).map((o, i) => outputOf(n, i, o, processes[n]!.workingDirectory))
  )
  const found: Array<{ name: string; at: ReadonlyArray<PropertyKey>; owner: string; path: string }> = []
  for (const a of outputs) {
    const other = outputs.find((b) => b.owner < a.owner && overlaps(a, b))
    if (other !== undefined) {
      found.push({ name: a.owner, at: ["outputs", a.index], owner: other.owner, path: other.path })
    }
  }
  for (const name of names) {
    const { exclusions, globs } = declaredGlobsOf(processes[name]!)
    const deps = depsOf(name)
    for (const { at, glob } of globs) {
      if (glob.startsWith("!")) continue
      for (const owner of names) {
        if (owner === name || deps.has(owner)) continue
        const taken = outputs.find((o) => o.owner === owner && takes(glob, exclusions, o))
        if (taken !== undefined) {
          found.push({ name, at, owner, path: taken.path })
          break
        }
      }
    }
  }
  return found
}

describe("the declaration checks, indexed", () => {
  const name = fc.constantFrom("a", "b", "lib", "dist", "x.js", "src")
  const relPath = fc.array(name, { minLength: 0, maxLength: 3 }).map((ns) => ns.join("/"))
  const output = fc.tuple(fc.boolean(), fc.array(name, { minLength: 1, maxLength: 3 }), fc.boolean()).map(
    ([optional, ns, directory]) => `${optional ? "?" : ""}${ns.join("/")}${directory ? "/" : ""}`
  )
  const glob = fc.oneof(
    fc.array(fc.constantFrom("a", "b", "lib", "dist", "x.js", "*", "*.js", "**", "src"), { minLength: 1, maxLength: 4 })
      .map((ss) => ss.join("/")),
    fc.constantFrom("{a,b}/**", "lib/?/**", "[ab]/*", "dist/{x.js,a}")
  )
  const process = fc.record({
    outputs: fc.array(fc.oneof(output, fc.constantFrom("./")), { maxLength: 3 }),
    inputs: fc.array(fc.oneof(glob, glob.map((g) => `!${g}`)), { maxLength: 3 }),
    optionalInputs: fc.array(glob, { maxLength: 1 }),
    workingDirectory: fc.option(relPath, { nil: undefined }),
    deps: fc.array(fc.nat(), { maxLength: 2 })
  })
  it.prop(
    "say what comparing every pair says, conflict for conflict and in order",
    [fc.array(process, { minLength: 1, maxLength: 8 })],
    ([list]) => {
      // Deps only on processes before: the checks run on acyclic graphs.
      const processes: Record<string, Declared> = Object.fromEntries(list.map((p, i) => [
        `p${i}`,
        { ...p, deps: i === 0 ? [] : [...new Set(p.deps.map((d) => `p${d % i}`))] }
      ]))
      const indexed = [...conflictsIn(processes)].map((c) => ({ name: c.name, at: c.at, detail: c.detail }))
      const pairs = conflictsByPairs(processes)
      assert.strictEqual(indexed.length, pairs.length, JSON.stringify({ processes, indexed, pairs }))
      pairs.forEach((p, i) => {
        assert.deepStrictEqual([indexed[i]!.name, indexed[i]!.at], [p.name, p.at])
        assert.include(indexed[i]!.detail, JSON.stringify(p.owner))
      })
    },
    { fastCheck: { numRuns: 3000 } }
  )

  it("a thousand processes are checked without comparing each with every other", () => {
    const processes: Record<string, Declared> = {}
    for (let i = 0; i < 1000; i++) {
      processes[`p${i}`] = {
        workingDirectory: `packages/p${i}`,
        inputs: [`packages/p${i}/src/**`, "!**/*.md"],
        outputs: ["dist/"],
        ...(i > 0 ? { deps: [`p${i - 1}`] } : {})
      }
    }
    // One consumer that takes every package's dist without deps: each package its conflict, in order.
    processes["zz"] = { inputs: ["packages/**"] }
    const found = [...conflictsIn(processes)]
    assert.deepStrictEqual(found.map((c) => c.name), ["zz"])
    assert.include(found[0]!.detail, "an output of \"p0\"")
  })
})
