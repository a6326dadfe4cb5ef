/**
 * What `Results` refuses in a remote `ActionResult` before anything is written: names and paths the OS could not
 * take, and outputs whose trees, expanded, pass the limits only all together.
 */
import { assert, describe, it } from "@effect/vitest"
import { Either } from "effect"
import * as Digest from "../../src/domain/Digest.js"
import * as Directory from "../../src/domain/Directory.js"
import type * as Tree from "../../src/domain/Tree.js"
import * as Proto from "../../src/layers/remote/internal/proto.js"
import * as Results from "../../src/layers/remote/internal/results.js"

const outputs = { outputFiles: ["f.txt"], outputDirectories: ["a/", "b/"] }
const empty = Proto.wire(Digest.empty)

const refusal = (result: Record<string, unknown>) =>
  Either.getOrThrow(Either.flip(Results.readRemote(Proto.encode("ActionResult", result), outputs)))

/** `width` directories sharing one child of `files` files: `width * (files + 1)` entries. */
const wide = (width: number, files: number): Tree.Tree => {
  const child: Directory.Directory = {
    files: Array.from({ length: files }, (_, i) => ({
      name: `f${String(i).padStart(4, "0")}`,
      digest: Digest.empty,
      isExecutable: false
    })),
    directories: [],
    symlinks: []
  }
  const digest = Directory.digestOf(child)
  const root: Directory.Directory = {
    files: [],
    directories: Array.from({ length: width }, (_, i) => ({ name: `d${String(i).padStart(4, "0")}`, digest })),
    symlinks: []
  }
  return { root, children: new Map([[digest.hash, child]]) }
}

describe("remote results", () => {
  it("an output file under a declared directory with a name over 255 bytes is refused", () => {
    const why = refusal({ output_files: [{ path: `a/${"n".repeat(256)}`, digest: empty }] })
    assert.match(why, /output file `a\/n+` cannot be written: entry name `n+…` is 256 bytes long, more than 255/)
  })

  it("an output symlink whose path or target passes PATH_MAX is refused", () => {
    const deep = `a/${Array.from({ length: 17 }, () => "L".repeat(250)).join("/")}`
    assert.match(
      refusal({ output_file_symlinks: [{ path: deep, target: "x" }] }),
      /cannot be written: a path 4268 bytes long, more than 4095/
    )
    assert.match(
      refusal({ output_file_symlinks: [{ path: "f.txt", target: "t".repeat(4096) }] }),
      /cannot be written: a target 4096 bytes long, more than 4095/
    )
  })

  it("two output directories each under the entry limit are refused together over it", () => {
    const tree = wide(1000, 600)
    const tree2 = wide(999, 600)
    const trees = new Map([["t1", tree], ["t2", tree2]])
    const down = (dirs: ReadonlyArray<[string, string]>): Results.Down => ({
      exitCode: 0,
      stdout: Digest.empty,
      stderr: Digest.empty,
      files: [],
      symlinks: [],
      directories: dirs.map(([at, hash]) => ({ path: [at], tree: { hash, sizeBytes: 1 } }))
    })
    assert.isUndefined(Results.refusedTrees(down([["a", "t1"]]), trees, outputs))
    assert.isUndefined(Results.refusedTrees(down([["b", "t2"]]), trees, outputs))
    assert.strictEqual(
      Results.refusedTrees(down([["a", "t1"], ["b", "t2"]]), trees, outputs),
      "its output directories hold 1201399 entries once expanded, more than 1000000"
    )
  })
})
