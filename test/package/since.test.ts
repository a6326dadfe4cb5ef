/**
 * `@since` means "exported from the package": a module whose header says `@since` is in package.json's `exports`
 * map (and re-exported by src/index.ts), and a module the package does not export carries no `@since`, in its
 * header or on anything it exports. Read from src/ and package.json, so it holds before a build.
 */
import { assert, describe, it } from "@effect/vitest"
import * as fs from "node:fs"
import * as path from "node:path"

const src = path.resolve("src")

/** Every `.ts` under src/, relative to it. */
const sources = (dir: string = src): Array<string> =>
  fs.readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const p = path.join(dir, e.name)
    if (e.isDirectory()) return sources(p)
    return e.name.endsWith(".ts") && !e.name.endsWith(".d.ts") ? [path.relative(src, p)] : []
  })

/** The module's header: its first doc comment, when the file opens with one. */
const header = (text: string): string => /^\/\*\*[\s\S]*?\*\//.exec(text)?.[0] ?? ""

/** src/-relative sources of the modules package.json's `exports` map names (`./dist/x/Y.js` → `x/Y.ts`). */
const exportedModules = (): Set<string> => {
  const pkg = JSON.parse(fs.readFileSync("package.json", "utf8")) as {
    readonly exports: Record<string, null | string | { readonly default: string }>
  }
  return new Set(
    Object.values(pkg.exports).flatMap((target) =>
      target !== null && typeof target === "object"
        ? [path.relative("dist", path.normalize(target.default)).replace(/\.js$/, ".ts")]
        : []
    )
  )
}

/** The modules src/index.ts re-exports (`export * as X from "./x/Y.js"`), src/-relative. */
const indexModules = (): Set<string> =>
  new Set(
    [...fs.readFileSync(path.join(src, "index.ts"), "utf8").matchAll(/\bfrom\s+"\.\/([^"]+)\.js"/g)].map((m) =>
      `${m[1]}.ts`
    )
  )

describe("@since", () => {
  const files = sources()
  const exported = exportedModules()

  it("reads src/ and the exports map", () => {
    assert.isAbove(files.length, 100)
    assert.isTrue(exported.has("index.ts"))
    assert.isTrue(exported.has("layers/kiln/Kiln.ts"))
  })

  it("every module whose header says @since is exported from the package", () => {
    const tagged = files.filter((f) => header(fs.readFileSync(path.join(src, f), "utf8")).includes("@since"))
    assert.deepStrictEqual(tagged.filter((f) => !exported.has(f)), [])
  })

  it("every exported module says @since in its header, and src/index.ts re-exports it", () => {
    const untagged = [...exported].filter((f) => !header(fs.readFileSync(path.join(src, f), "utf8")).includes("@since"))
    assert.deepStrictEqual(untagged, [])
    const inIndex = indexModules()
    assert.deepStrictEqual([...exported].filter((f) => f !== "index.ts" && !inIndex.has(f)), [])
    assert.deepStrictEqual([...inIndex].filter((f) => !exported.has(f)), [])
  })

  it("a module the package does not export carries no @since anywhere", () => {
    const offending = files.filter((f) =>
      !exported.has(f) && fs.readFileSync(path.join(src, f), "utf8").includes("@since")
    )
    assert.deepStrictEqual(offending, [])
  })

  it("reads a header as the file's opening doc comment only", () => {
    assert.strictEqual(
      header("/**\n * A.\n *\n * @since 0.1.0\n */\nexport const a = 1\n"),
      "/**\n * A.\n *\n * @since 0.1.0\n */"
    )
    assert.strictEqual(header("import * as A from \"a\"\n/** @since 0.1.0 */\n"), "")
  })
})
