/**
 * The declarations kiln ships (dist/, built by `npm test` first): a public module's `.d.ts` names only public
 * modules, so every type a user of kiln sees is declared where it is documented, and `internal/` stays free to change.
 */
import { assert, describe, it } from "@effect/vitest"
import * as fs from "node:fs"
import * as path from "node:path"

const dist = path.resolve("dist")

/** Every `.d.ts` under `dir`, except those under an `internal/` directory. */
const publicDeclarations = (dir: string): Array<string> =>
  fs.readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const p = path.join(dir, e.name)
    if (e.isDirectory()) return e.name === "internal" ? [] : publicDeclarations(p)
    return e.name.endsWith(".d.ts") ? [p] : []
  })

/** The module specifiers a declaration file names: `import … from "…"`, `export … from "…"` and `import("…")`. */
const specifiers = (text: string): Array<string> =>
  [...text.matchAll(/\bfrom\s+["']([^"']+)["']|\bimport\s*\(\s*["']([^"']+)["']\s*\)/g)].map((m) => m[1] ?? m[2]!)

describe("published declarations", () => {
  it("a public module's .d.ts imports no internal/ module", () => {
    const files = publicDeclarations(dist)
    assert.isAbove(files.length, 20, `dist/ holds the built declarations (run npm run build first)`)
    const offending = files.flatMap((f) =>
      specifiers(fs.readFileSync(f, "utf8"))
        .filter((s) => s.split("/").includes("internal"))
        .map((s) => `${path.relative(dist, f)} imports ${s}`)
    )
    assert.deepStrictEqual(offending, [])
  })

  it("the check sees an internal import in a declaration", () => {
    assert.deepStrictEqual(specifiers(`import type * as H from "../sandbox/internal/handoff.js";`), [
      "../sandbox/internal/handoff.js"
    ])
    assert.deepStrictEqual(specifiers(`readonly w: import("./internal/protobuf.js").Writer`), [
      "./internal/protobuf.js"
    ])
  })
})
