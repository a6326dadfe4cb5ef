/**
 * A tree's files found and hashed by the addon (`os/native/hashFiles.c`, for a snapshot's first walk of a large
 * directory taken whole), on real trees: each answer is what Node's own read, hash and `lstat` give; only regular files
 * beneath the directory are listed and read, never through a symlink (one swapped in for a directory after the listing
 * included), never a FIFO waited on; and what the caller filters out, or does not want, is not read.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { execFileSync } from "node:child_process"
import { createHash } from "node:crypto"
import * as fs from "node:fs"
import * as path from "node:path"
import * as NativeAddon from "../../src/os/native/Addon.js"
import * as HashFiles from "../../src/os/native/HashFiles.js"
import { tempDir, writeTree } from "../utils/temp.js"

const all = { min: 1, max: 100_000, keep: () => true, wanted: () => true }

const sha256 = (bytes: Buffer) => createHash("sha256").update(bytes).digest("hex")

/** A tree of files of each shape a `node_modules` has, in `dir/tree`, and a secret beside it. */
const treeIn = (dir: string) => {
  const tree = path.join(dir, "tree")
  const files: Record<string, string> = {
    "a/package.json": "{}",
    "a/index.js": "module.exports = 1\n",
    "a/empty.js": "",
    "a/deep/er/still/x.js": "x\n",
    "b/index.js": "b\n",
    ".cache/tool/blob": "cached\n"
  }
  for (let i = 0; i < 40; i++) files[`c/lib/f${i}.js`] = `${i}\n`.repeat(i)
  writeTree(tree, files)
  fs.writeFileSync(path.join(tree, "b/large.bin"), Buffer.alloc(700 * 1024, 7))
  fs.chmodSync(path.join(tree, "b/index.js"), 0o755)
  fs.mkdirSync(path.join(dir, "outside"))
  fs.writeFileSync(path.join(dir, "outside/secret"), "secret\n")
  fs.symlinkSync(path.join(dir, "outside"), path.join(tree, "linked-dir"))
  fs.symlinkSync(path.join(dir, "outside/secret"), path.join(tree, "a/linked-file"))
  execFileSync("mkfifo", [path.join(tree, "a/fifo")])
  return tree
}

describe("HashFiles.hashTree", () => {
  it.scoped.skipIf(NativeAddon.exports()?.hashFiles === undefined)(
    "hashes every regular file beneath it as Node reads and stats it, and nothing through a link or a FIFO",
    () =>
      Effect.gen(function*() {
        const tree = treeIn(yield* tempDir("kiln-hashfiles-"))
        const hashed = HashFiles.hashTree(tree, all)
        assert.isDefined(hashed)
        const expected = [
          "a/package.json",
          "a/index.js",
          "a/empty.js",
          "a/deep/er/still/x.js",
          "b/index.js",
          "b/large.bin"
        ]
        for (const rel of [...expected, ".cache/tool/blob"]) {
          const got = hashed!.get(rel)
          assert.isDefined(got, rel)
          const abs = path.join(tree, rel)
          const bytes = fs.readFileSync(abs)
          const st = fs.lstatSync(abs, { bigint: true })
          assert.strictEqual(got!.hash, sha256(bytes), rel)
          assert.strictEqual(got!.size, bytes.length, rel)
          assert.deepStrictEqual(
            [got!.st.dev, got!.st.ino, got!.st.mode, got!.st.size, got!.st.mtimeNs, got!.st.ctimeNs],
            [st.dev, st.ino, st.mode, st.size, st.mtimeNs, st.ctimeNs],
            rel
          )
        }
        assert.strictEqual(hashed!.size, expected.length + 1 + 40)
        // The links (to a directory and to a file outside) and the FIFO are the walk's to take as they are.
        for (const rel of hashed!.keys()) {
          assert.isFalse(rel.startsWith("linked-dir") || rel.includes("linked-file"), rel)
        }
        assert.isFalse(hashed!.has("a/fifo"))
      })
  )

  it.scoped.skipIf(NativeAddon.exports()?.hashFiles === undefined)(
    "reads only what the caller keeps and wants, and gives nothing under its minimum or over its maximum",
    () =>
      Effect.gen(function*() {
        const tree = treeIn(yield* tempDir("kiln-hashfiles-"))
        let asked: ReadonlyArray<string> = []
        const kept = HashFiles.hashTree(tree, {
          ...all,
          keep: (rel) => !rel.startsWith(".cache/"),
          wanted: (rels) => {
            asked = rels
            return true
          }
        })
        assert.isFalse([...kept!.keys()].some((rel) => rel.startsWith(".cache/")))
        assert.sameMembers([...kept!.keys()], [...asked])
        assert.isUndefined(HashFiles.hashTree(tree, { ...all, wanted: () => false }))
        assert.isUndefined(HashFiles.hashTree(tree, { ...all, min: 1000 }))
        assert.isUndefined(HashFiles.hashTree(tree, { ...all, max: 10 }))
        assert.isUndefined(HashFiles.hashTree(path.join(tree, "linked-dir"), all), "a link to a directory is not one")
        // The bound counts directories too: a tree of empty ones is not listed without end.
        const hollow = path.join(path.dirname(tree), "hollow")
        for (let i = 0; i < 50; i++) fs.mkdirSync(path.join(hollow, `d${i}`), { recursive: true })
        fs.writeFileSync(path.join(hollow, "only.js"), "1\n")
        assert.strictEqual(HashFiles.hashTree(hollow, { ...all, max: 100 })?.size, 1)
        assert.isUndefined(HashFiles.hashTree(hollow, { ...all, max: 20 }))
      })
  )

  it.scoped.skipIf(NativeAddon.exports()?.hashFiles === undefined)(
    "a directory swapped for a symlink after the listing is not read through, nor a file swapped for a FIFO",
    () =>
      Effect.gen(function*() {
        const dir = yield* tempDir("kiln-hashfiles-")
        const tree = treeIn(dir)
        const hashFiles = NativeAddon.exports()!.hashFiles as (
          root: string,
          names: string,
          stats: BigInt64Array,
          hashes: Uint8Array,
          errors: Int32Array
        ) => boolean
        // As listed before the swap: `b/` a directory, `a/index.js` a file.
        fs.renameSync(path.join(tree, "b"), path.join(dir, "b-moved"))
        fs.symlinkSync(path.join(dir, "outside"), path.join(tree, "b"))
        fs.rmSync(path.join(tree, "a/index.js"))
        execFileSync("mkfifo", [path.join(tree, "a/index.js")])
        const names = ["b/secret", "a/index.js", "a/package.json"]
        const errors = new Int32Array(names.length)
        assert.isTrue(
          hashFiles(
            tree,
            names.join("\0"),
            new BigInt64Array(names.length * 7),
            new Uint8Array(names.length * 32),
            errors
          )
        )
        assert.notStrictEqual(errors[0], 0, "read through the symlink")
        assert.strictEqual(errors[1], -1, "a FIFO is not a regular file")
        assert.strictEqual(errors[2], 0)
      })
  )
})
