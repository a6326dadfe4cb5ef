/**
 * The declarations kiln ships (dist/, built by `npm test` first): a public module's `.d.ts` names only public
 * modules, so every type a user of kiln sees is declared where it is documented, and `internal/` stays free to change.
 * Public means in the package's `exports` map: a type from a module a user cannot import is one they cannot name.
 */
import { assert, describe, it } from "@effect/vitest"
import * as fs from "node:fs"
import * as path from "node:path"

const dist = path.resolve("dist")

const pkg = JSON.parse(fs.readFileSync("package.json", "utf8")) as {
  readonly exports: Record<string, null | string | { readonly types: string }>
  readonly dependencies?: Record<string, string>
  readonly peerDependencies?: Record<string, string>
}

/** The `.d.ts` of every module the package's `exports` map names (absolute paths). */
const exportedDeclarations = (): Set<string> =>
  new Set(
    Object.values(pkg.exports).flatMap((target) =>
      target !== null && typeof target === "object" ? [path.resolve(target.types)] : []
    )
  )

/** The package a bare specifier names: `effect/Layer` → `effect`, `@effect/rpc/Rpc` → `@effect/rpc`. */
const packageOf = (specifier: string) => specifier.split("/").slice(0, specifier.startsWith("@") ? 2 : 1).join("/")

/** The module specifiers a declaration file names: `import … from "…"`, `export … from "…"` and `import("…")`. */
const specifiers = (text: string): Array<string> =>
  [...text.matchAll(/\bfrom\s+["']([^"']+)["']|\bimport\s*\(\s*["']([^"']+)["']\s*\)/g)].map((m) => m[1] ?? m[2]!)

describe("published declarations", () => {
  it("an exported module's .d.ts imports no internal/ module", () => {
    const files = [...exportedDeclarations()].filter((f) => fs.existsSync(f))
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

  it("an exported module's .d.ts names only exported modules, and packages a user's install has", () => {
    const exported = exportedDeclarations()
    assert.isAbove(exported.size, 20)
    const installed = new Set([...Object.keys(pkg.dependencies ?? {}), ...Object.keys(pkg.peerDependencies ?? {})])
    const offending = [...exported].flatMap((file) => {
      assert.isTrue(fs.existsSync(file), `${file} (run npm run build first)`)
      return specifiers(fs.readFileSync(file, "utf8")).flatMap((s) => {
        if (s.startsWith("node:")) return []
        if (!s.startsWith(".")) {
          return installed.has(packageOf(s)) ? [] : [`${path.relative(dist, file)} names ${s}, not a dependency`]
        }
        const target = path.resolve(path.dirname(file), s.replace(/\.js$/, ".d.ts"))
        return exported.has(target)
          ? []
          : [`${path.relative(dist, file)} names ${s}, which the package does not export`]
      })
    })
    assert.deepStrictEqual(offending, [])
  })
})
