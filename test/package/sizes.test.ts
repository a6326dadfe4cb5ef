/**
 * The size bar for src/ (docs/architecture.md, "Layout and visibility"): no file over 600 lines, no function over 150,
 * measured by scripts/sizes.mjs on TypeScript's syntax tree. The scan is shown to see what it bars on made-up source.
 */
import { assert, describe, it } from "@effect/vitest"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { MAX_FILE_LINES, MAX_FUNCTION_LINES, oversized as scan } from "../../scripts/sizes.mjs"

describe("the size bar", () => {
  it("no file in src/ is over the bar, and no function", () => {
    assert.deepStrictEqual(scan("src"), [])
  })

  it("the scan sees a long function (arrow, generator, method) and a long file", () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "kiln-sizes-"))
    try {
      const body = (n: number) => Array.from({ length: n }, (_, i) => `  const v${i} = ${i}`).join("\n")
      fs.writeFileSync(
        path.join(dir, "long.ts"),
        [
          `export const arrow = () => {\n${body(MAX_FUNCTION_LINES)}\n}`,
          `export function* gen() {\n${body(MAX_FUNCTION_LINES - 1)}\n  yield 1\n}`,
          `export class C {\n  method() {\n${body(MAX_FUNCTION_LINES)}\n  }\n}`,
          `export const short = () => {\n${body(MAX_FUNCTION_LINES - 2)}\n}`
        ].join("\n")
      )
      fs.writeFileSync(path.join(dir, "ok.ts"), `${body(MAX_FILE_LINES)}\n`)
      const found = scan(dir)
      assert.deepStrictEqual(found.map((f) => f.replace(/^.*\//, "").replace(/: \d+ lines.*$/, "")), [
        "long.ts",
        "long.ts:1 arrow",
        "long.ts:153 gen",
        "long.ts:306 method"
      ])
    } finally {
      fs.rmSync(dir, { recursive: true, force: true })
    }
  })
})
