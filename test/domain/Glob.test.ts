import { describe, expect, it } from "@effect/vitest"
import { FastCheck } from "effect"
import picomatch from "picomatch"
import { baseOf, matcher } from "../../src/domain/Glob.js"

// Glob segments mixing what the fast matcher handles (literals, `*`, `**`) with what it hands to picomatch.
const globSegment = FastCheck.constantFrom(
  "a",
  "b",
  "ab",
  "*",
  "**",
  "a*",
  "*b",
  "a*b",
  "*.ts",
  ".x",
  "*a*",
  "?",
  "{a,b}"
)
const pathSegment = FastCheck.constantFrom("a", "b", "ab", "aab", "x.ts", ".x", "c", "a.b.ts", ".", "..")
const glob = FastCheck.array(globSegment, { minLength: 1, maxLength: 5 }).map((s) => s.join("/"))
const path = FastCheck.array(pathSegment, { minLength: 1, maxLength: 6 }).map((s) => s.join("/"))

describe("glob", () => {
  it.prop("matches exactly as picomatch does (dot: true)", [glob, path], ([g, p]) => {
    expect(matcher([g])(p)).toBe(picomatch.makeRe(g, { dot: true }).test(p))
  }, { fastCheck: { numRuns: 5000 } })

  it.prop("finds the same walk base as picomatch's scan", [glob], ([g]) => {
    const scan = picomatch.scan(g)
    expect(baseOf(g)).toBe(scan.isGlob ? scan.base : g)
  }, { fastCheck: { numRuns: 2000 } })

  it("matches any of several globs", () => {
    const m = matcher(["src/**/*.ts", "README.md"])
    expect(m("src/a/b.ts")).toBe(true)
    expect(m("README.md")).toBe(true)
    expect(m("src/a/b.js")).toBe(false)
  })
})
