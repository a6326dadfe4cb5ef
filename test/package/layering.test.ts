/**
 * The layering of src/ (docs/architecture.md, "Layout and visibility"), as eslint's `no-restricted-imports` enforces
 * it: src/ obeys it today, and each rule fires on a fixture that breaks it (so a rule that silently stopped matching,
 * after a folder moved say, fails here and not in review).
 */
import { assert, describe, it } from "@effect/vitest"
import { ESLint } from "eslint"

const eslint = new ESLint({ cwd: process.cwd() })

/** The `no-restricted-imports` messages eslint gives `code` as if it were the file `file` (which need not exist). */
const restrictedIn = async (file: string, code: string): Promise<Array<string>> => {
  const [result] = await eslint.lintText(code, { filePath: file })
  return result!.messages.filter((m) => m.ruleId === "no-restricted-imports").map((m) => m.message)
}

const importOf = (specifier: string) => `import * as M from "${specifier}"\nexport const m = M\n`

describe("the layering of src/", () => {
  it("src/ passes eslint: its layering and every other rule `npm run check` applies", async () => {
    const results = await eslint.lintFiles(["src/**/*.ts"])
    assert.isAbove(results.length, 100)
    const broken = results.flatMap((r) => r.messages.map((m) => `${r.filePath}:${m.line} ${m.ruleId}: ${m.message}`))
    assert.deepStrictEqual(broken, [])
  }, 120_000)

  const violations: ReadonlyArray<readonly [string, string, RegExp]> = [
    // Another concern's internal/, from each depth of a concern.
    ["src/layers/remote/internal/x.ts", "../../store/internal/largeFiles.js", /internal\/ is private/],
    ["src/layers/remote/RemoteCache.ts", "../store/internal/core.js", /internal\/ is private/],
    ["src/layers/store/internal/lmdb/x.ts", "../../../engine/internal/run.js", /internal\/ is private/],
    ["src/layers/engine/Engine.ts", "../../domain/internal/protobuf.js", /internal\/ is private/],
    // Programs and the package's entry reach no internal/.
    ["src/programs/sandboxer.ts", "../layers/sandboxer/internal/paths.js", /internal\/ is private/],
    ["src/programs/kiln/main.ts", "../../layers/engine/internal/run.js", /internal\/ is private/],
    ["src/index.ts", "./domain/internal/protobuf.js", /internal\/ is private/],
    // Imports point down: layers never import programs; os never imports layers; domain imports neither.
    ["src/layers/sandboxer/Sandboxer.ts", "../../programs/common/logging.js", /Programs import layers/],
    ["src/layers/store/internal/core.ts", "../../../programs/kiln/settings.js", /Programs import layers/],
    ["src/layers/kiln/Kiln.ts", "../../programs/kiln/stack.js", /Programs import layers/],
    ["src/layers/kiln/Kiln.ts", "../store/internal/core.js", /internal\/ is private/],
    ["src/os/Proc.ts", "../layers/store/Store.js", /src\/os imports only src\/domain/],
    ["src/domain/Tree.ts", "../os/Proc.js", /src\/domain is pure data/],
    ["src/domain/Tree.ts", "../layers/store/Store.js", /src\/domain is pure data/],
    // Barrel imports stay forbidden under every rule set.
    ["src/layers/engine/Engine.ts", "effect", /barrel/]
  ]
  for (const [file, specifier, message] of violations) {
    it(`${file} may not import ${specifier}`, async () => {
      const messages = await restrictedIn(file, importOf(specifier))
      assert.strictEqual(
        messages.length,
        1,
        `expected one no-restricted-imports error, got ${JSON.stringify(messages)}`
      )
      assert.match(messages[0]!, message)
    })
  }

  const allowed: ReadonlyArray<readonly [string, string]> = [
    ["src/layers/store/internal/lmdb/envs.ts", "../core.js"],
    ["src/layers/store/Store.ts", "./internal/core.js"],
    ["src/layers/engine/internal/run.ts", "../../store/Store.js"],
    ["src/layers/engine/internal/run.ts", "./runState.js"],
    ["src/domain/Directory.ts", "./internal/protobuf.js"],
    ["src/os/PrivateDir.ts", "../domain/UnsafeDirectory.js"],
    ["src/programs/sandboxer.ts", "../layers/sandboxer/SandboxerServer.js"],
    ["src/programs/kiln/main.ts", "../common/logging.js"]
  ]
  for (const [file, specifier] of allowed) {
    it(`${file} may import ${specifier}`, async () => {
      assert.deepStrictEqual(await restrictedIn(file, importOf(specifier)), [])
    })
  }
})
