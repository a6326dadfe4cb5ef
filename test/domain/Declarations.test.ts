/**
 * Issue #38 §5: what processes declare of each other's outputs is checked before anything runs. Two processes that
 * write the same path back, and an input glob that takes another process's outputs without a dep on it, are config
 * errors naming the producer; a glob that excludes the outputs, or a dep (direct or not), makes it fine.
 */
import { assert, describe, it } from "@effect/vitest"
import { Either, FastCheck as fc } from "effect"
import picomatch from "picomatch"
import { parse } from "../../src/domain/config/Config.js"
import * as Glob from "../../src/domain/Glob.js"

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
