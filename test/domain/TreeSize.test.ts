/**
 * `Tree.sizeOf` measures a tree without expanding it; these check it against the expansion itself on small random
 * DAGs (directories that share children, as a `Tree` lets them), and `Directory.invalidNameReason`'s byte limit.
 */
import { assert, describe, it } from "@effect/vitest"
import { Either, FastCheck } from "effect"
import * as Digest from "../../src/domain/Digest.js"
import * as Directory from "../../src/domain/Directory.js"
import * as Tree from "../../src/domain/Tree.js"

/** Names of one to three code points, some of several UTF-8 bytes. */
const name = FastCheck.string({ unit: FastCheck.constantFrom("a", "b", "é", "日", "😀"), minLength: 1, maxLength: 3 })

/**
 * A DAG of directories: directory `i` holds some files and symlinks, and subdirectories each naming an earlier
 * directory (so children are shared, often several times by one parent); the last is the root.
 */
const dag = FastCheck.array(
  FastCheck.record({
    leaves: FastCheck.uniqueArray(name, { maxLength: 3 }),
    links: FastCheck.boolean(),
    subdirs: FastCheck.uniqueArray(FastCheck.tuple(name, FastCheck.nat()), { selector: ([n]) => n, maxLength: 3 })
  }),
  { minLength: 1, maxLength: 7 }
).map((specs) => {
  const built: Array<Directory.Directory> = []
  const children = new Map<string, Directory.Directory>()
  for (const [i, spec] of specs.entries()) {
    const subdirs = i === 0 ? [] : spec.subdirs.filter(([n]) => !spec.leaves.includes(n))
    const leaves = spec.leaves.map((n) => ({ name: n }))
    const dir = Either.getOrThrow(Directory.make({
      files: spec.links ? [] : leaves.map((l) => ({ ...l, digest: Digest.empty, isExecutable: false })),
      symlinks: spec.links ? leaves.map((l) => ({ ...l, target: "x" })) : [],
      directories: subdirs.map(([n, j]) => ({ name: n, digest: Directory.digestOf(built[j % i]!) }))
    }))
    built.push(dir)
    if (i < specs.length - 1) children.set(Directory.digestOf(dir).hash, dir)
  }
  return { root: built[built.length - 1]!, children } satisfies Tree.Tree
})

/** Every path of the tree, expanded: what a listing of it holds. */
const expand = (tree: Tree.Tree) => {
  const paths: Array<{ path: string; depth: number }> = []
  const walk = (dir: Directory.Directory, prefix: string, depth: number) => {
    for (const leaf of [...dir.files, ...dir.symlinks]) paths.push({ path: `${prefix}${leaf.name}`, depth: depth + 1 })
    for (const c of dir.directories) {
      paths.push({ path: `${prefix}${c.name}`, depth: depth + 1 })
      walk(
        Digest.isEmpty(c.digest) ? Directory.empty : tree.children.get(c.digest.hash)!,
        `${prefix}${c.name}/`,
        depth + 1
      )
    }
  }
  walk(tree.root, "", 0)
  return paths
}

describe("Tree.sizeOf", () => {
  it.prop("counts what the expansion holds", [dag], ([tree]) => {
    const paths = expand(tree)
    const bytes = paths.map((p) => Buffer.byteLength(p.path, "utf8"))
    assert.deepStrictEqual(Tree.sizeOf(tree), {
      entries: paths.length,
      pathBytes: bytes.reduce((n, b) => n + b, 0),
      longestPath: Math.max(0, ...bytes),
      height: Math.max(0, ...paths.map((p) => p.depth))
    })
  })

  it("measures a 2^40-path bomb of 41 directories at once", () => {
    const children = new Map<string, Directory.Directory>()
    let dir: Directory.Directory = Directory.empty
    for (let i = 0; i < 40; i++) {
      const digest = Directory.digestOf(dir)
      children.set(digest.hash, dir)
      dir = { files: [], directories: [{ name: "a", digest }, { name: "b", digest }], symlinks: [] }
    }
    const size = Tree.sizeOf({ root: dir, children })
    assert.strictEqual(size.entries, 2 ** 41 - 2)
    assert.strictEqual(size.height, 40)
    assert.strictEqual(size.longestPath, 79)
  })
})

describe("Directory names", () => {
  it("a name of 255 UTF-8 bytes is valid; of 256, or 86 three-byte characters, is not", () => {
    assert.isUndefined(Directory.invalidNameReason("n".repeat(255)))
    assert.isUndefined(Directory.invalidNameReason("日".repeat(85)))
    assert.match(Directory.invalidNameReason("n".repeat(256))!, /is 256 bytes long, more than 255/)
    assert.match(Directory.invalidNameReason("日".repeat(86))!, /is 258 bytes long, more than 255/)
    assert.match(Directory.invalidNameReason("😀".repeat(64))!, /is 256 bytes long/)
  })

  it("made and decoded directories refuse a long name alike", () => {
    const file = { name: "n".repeat(300), digest: Digest.empty, isExecutable: false }
    const made = Directory.make({ files: [file] })
    assert.isTrue(Either.isLeft(made))
    const decoded = Directory.decode(Directory.encode({ files: [file], directories: [], symlinks: [] }))
    assert.match(Either.getOrThrow(Either.flip(decoded)).reason, /is 300 bytes long, more than 255/)
  })

  it("a symlink target longer than PATH_MAX is invalid", () => {
    const ok = Directory.make({ symlinks: [{ name: "l", target: "t".repeat(4095) }] })
    assert.isTrue(Either.isRight(ok))
    const long = Directory.make({ symlinks: [{ name: "l", target: "t".repeat(4096) }] })
    assert.match(Either.getOrThrow(Either.flip(long)).reason, /target of 4096 bytes, more than 4095/)
  })

  it("utf8Length is Buffer.byteLength for well-formed strings", () => {
    for (const s of ["", "abc", "é", "日本", "😀x", "a😀é日"]) {
      assert.strictEqual(Directory.utf8Length(s), Buffer.byteLength(s, "utf8"))
    }
  })
})
