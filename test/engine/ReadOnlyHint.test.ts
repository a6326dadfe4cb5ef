/**
 * The hint after a failed process's stderr when it wrote under a read-only input tree: read from what tools print.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Digest from "../../src/domain/Digest.js"
import { Process } from "../../src/domain/Process.js"
import { readOnlyHint } from "../../src/layers/engine/internal/readOnlyHint.js"

const proc = (extra: Partial<ConstructorParameters<typeof Process>[0]> = {}) =>
  new Process({ argv: ["vitest"], env: {}, inputDigest: Digest.empty, ...extra })

describe("readOnlyHint", () => {
  it("Node's EROFS on a mkdir at the exec root names the directory", () => {
    const hint = readOnlyHint(
      "Error: EROFS: read-only file system, mkdir '/mnt/node_modules/.vite-temp'\n    at async mkdir",
      proc({ execRoot: "/mnt", workingDirectory: "packages/a" })
    )
    assert.include(hint, `"writableInputs": ["node_modules/.vite-temp"]`)
  })

  it("a file written under the working directory names its directory, from the input root", () => {
    const hint = readOnlyHint(
      "sh: 1: cannot create node_modules/.cache/x.json: Read-only file system",
      proc({ workingDirectory: "packages/a" })
    )
    assert.include(hint, `packages/a/node_modules/.cache/x.json is in an input tree`)
    assert.include(hint, `"writableInputs": ["packages/a/node_modules/.cache"]`)
  })

  it("a path in typographic quotes, as coreutils print it in a UTF-8 locale, is read too", () => {
    const hint = readOnlyHint(
      "touch: cannot touch \u2018node_modules/.cache/stamp\u2019: Read-only file system",
      proc({ workingDirectory: "packages/a" })
    )
    assert.include(hint, `"writableInputs": ["packages/a/node_modules/.cache"]`)
  })

  it("nothing for other failures, or a read-only path outside the sandbox", () => {
    assert.isUndefined(readOnlyHint("Error: expected 1 to equal 2", proc()))
    assert.isUndefined(readOnlyHint("EROFS: read-only file system, open '/usr/lib/x'", proc({ execRoot: "/mnt" })))
    assert.isUndefined(readOnlyHint("mkdir: cannot create directory '../x': Read-only file system", proc()))
  })
})
