/**
 * Trees as deep as a remote may make them: the store's walkers over trees (encoding a tree, listing it, merging
 * layers) use explicit stacks, so a chain 10,000 directories deep is handled (the recursive walks overflowed the
 * call stack at under 5,000), and on ordinary trees they give exactly what the recursive walks gave (the old code,
 * kept here as the oracle). Plus the symlink rule that output trees are held to (`Directory.escapingTargetReason`) against the real
 * resolution of links on disk.
 */
import { assert, describe, it, layer } from "@effect/vitest"
import { Effect, Either, FastCheck as fc, Layer } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"
import * as Digest from "../../src/domain/Digest.js"
import * as Directory from "../../src/domain/Directory.js"
import { InputConflict } from "../../src/domain/TreeErrors.js"
import * as Tree from "../../src/layers/store/internal/tree.js"
import * as Store from "../../src/layers/store/Store.js"
import { tempDir } from "../utils/temp.js"

// --- The recursive walks as they were (f652123), the oracle. ---

const oldEncode = (root: Tree.Node): { digest: Digest.Digest; hashes: Set<string> } => {
  const hashes = new Set<string>()
  const go = (n: Tree.Node): Digest.Digest => {
    const directories: Array<Directory.DirectoryNode> = []
    for (const [name, child] of n.dirs) directories.push({ name, digest: "dirs" in child ? go(child) : child })
    const dir = Either.getOrThrow(Directory.make({
      files: Array.from(n.files, ([name, f]) => ({ name, digest: f.digest, isExecutable: f.isExecutable })),
      directories,
      symlinks: Array.from(n.symlinks, ([name, target]) => ({ name, target }))
    }))
    const value = Directory.encode(dir)
    const digest = Digest.ofBytes(value)
    if (value.length > 0) hashes.add(digest.hash)
    return digest
  }
  return { digest: go(root), hashes }
}

const oldEntriesOf = (dirs: ReadonlyMap<string, Directory.Directory>): Array<Store.TreeEntry> => {
  const out: Array<Store.TreeEntry> = []
  const go = (prefix: string, dir: Directory.Directory) => {
    const join = (name: string) => prefix === "" ? name : `${prefix}/${name}`
    const names = [
      ...dir.files.map((f) => ({ name: f.name, f })),
      ...dir.directories.map((d) => ({ name: d.name, d })),
      ...dir.symlinks.map((s) => ({ name: s.name, s }))
    ].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0))
    for (const n of names) {
      if ("f" in n) {
        out.push({ path: join(n.name), type: "file", digest: n.f.digest, isExecutable: n.f.isExecutable })
      } else if ("d" in n) {
        out.push({ path: join(n.name), type: "directory", digest: n.d.digest })
        go(join(n.name), dirs.get(join(n.name))!)
      } else {
        out.push({ path: join(n.name), type: "symlink", target: n.s.target })
      }
    }
  }
  go("", dirs.get("")!)
  return out
}

/** The old recursive merge over the store's directories: the merged root's digest, or the first conflict. */
const oldMerge = (store: Store.Service, layers: ReadonlyArray<{ digest: Digest.Digest; at: Array<string> }>) =>
  Effect.gen(function*() {
    const conflict = (p: string, first: string, second: string) => new InputConflict({ path: p, first, second })
    const fileEntry = (f: { digest: Digest.Digest; isExecutable: boolean }) =>
      `${f.isExecutable ? "executable file" : "file"} ${Digest.format(f.digest)}`
    const entryAt = (node: Tree.Node, name: string) => {
      const file = node.files.get(name)
      if (file !== undefined) return fileEntry(file)
      const target = node.symlinks.get(name)
      return target !== undefined ? `symlink -> ${target}` : "a directory"
    }
    const expand = (digest: Digest.Digest) =>
      Effect.map(store.getDirectory(digest), (dir) => {
        const node = Tree.node()
        for (const f of dir.files) node.files.set(f.name, { digest: f.digest, isExecutable: f.isExecutable })
        for (const d of dir.directories) node.dirs.set(d.name, d.digest)
        for (const s of dir.symlinks) node.symlinks.set(s.name, s.target)
        return node
      })
    const mergeInto = (node: Tree.Node, digest: Digest.Digest, prefix: string): Effect.Effect<void, unknown> =>
      Effect.gen(function*() {
        const dir = yield* store.getDirectory(digest)
        const at = (name: string) => prefix === "" ? name : `${prefix}/${name}`
        for (const f of dir.files) {
          const existing = node.files.get(f.name)
          if (existing !== undefined) {
            if (!Digest.equals(existing.digest, f.digest) || existing.isExecutable !== f.isExecutable) {
              return yield* conflict(at(f.name), fileEntry(existing), fileEntry(f))
            }
            continue
          }
          if (node.dirs.has(f.name) || node.symlinks.has(f.name)) {
            return yield* conflict(at(f.name), entryAt(node, f.name), fileEntry(f))
          }
          node.files.set(f.name, { digest: f.digest, isExecutable: f.isExecutable })
        }
        for (const s of dir.symlinks) {
          const existing = node.symlinks.get(s.name)
          if (existing !== undefined) {
            if (existing !== s.target) {
              return yield* conflict(at(s.name), `symlink -> ${existing}`, `symlink -> ${s.target}`)
            }
            continue
          }
          if (node.dirs.has(s.name) || node.files.has(s.name)) {
            return yield* conflict(at(s.name), entryAt(node, s.name), `symlink -> ${s.target}`)
          }
          node.symlinks.set(s.name, s.target)
        }
        for (const d of dir.directories) {
          if (node.files.has(d.name) || node.symlinks.has(d.name)) {
            return yield* conflict(at(d.name), entryAt(node, d.name), "a directory")
          }
          const existing = node.dirs.get(d.name)
          if (existing === undefined) {
            node.dirs.set(d.name, d.digest)
            continue
          }
          if (!("dirs" in existing) && Digest.equals(existing, d.digest)) continue
          const child = "dirs" in existing ? existing : yield* expand(existing)
          node.dirs.set(d.name, child)
          yield* mergeInto(child, d.digest, at(d.name))
        }
      })
    const root = Tree.node()
    for (const layer of layers.filter((l) => !Digest.isEmpty(l.digest))) {
      let node = root
      for (let i = 0; i < layer.at.length; i++) {
        const name = layer.at[i]!
        if (node.files.has(name) || node.symlinks.has(name)) {
          return yield* conflict(layer.at.slice(0, i + 1).join("/"), entryAt(node, name), "a directory")
        }
        const existing = node.dirs.get(name)
        const next = existing === undefined ? Tree.node() : "dirs" in existing ? existing : yield* expand(existing)
        node.dirs.set(name, next)
        node = next
      }
      yield* mergeInto(node, layer.digest, layer.at.join("/"))
    }
    return oldEncode(root).digest
  })

// --- Random trees. ---

type Spec = ReadonlyArray<readonly [ReadonlyArray<string>, "file" | "exec" | "link" | "dir"]>

const specArb: fc.Arbitrary<Spec> = fc.array(
  fc.tuple(
    fc.array(fc.constantFrom("a", "b", "c", "d"), { minLength: 1, maxLength: 5 }),
    fc.constantFrom("file" as const, "exec" as const, "link" as const, "dir" as const)
  ),
  { maxLength: 25 }
)

const fileDigest = (name: string) => Digest.ofBytes(Buffer.from(`content of ${name}`))

/** A `Tree.Node` from a spec: each path made, unless something else already holds a segment of it. */
const nodeOf = (spec: Spec, variant = 0): Tree.Node => {
  const root = Tree.node()
  for (const [segments, kind] of spec) {
    const parent = Tree.dirAt(root, segments.slice(0, -1))
    const name = segments[segments.length - 1]!
    if (parent === undefined || Tree.has(parent, name)) continue
    if (kind === "dir") parent.dirs.set(name, Tree.node())
    else if (kind === "link") parent.symlinks.set(name, `../${name}${variant}`)
    else parent.files.set(name, { digest: fileDigest(`${name}${variant}`), isExecutable: kind === "exec" })
  }
  return root
}

/** Every directory of an encoded tree, by path, as `Store.listTree` gathers them. */
const dirsByPath = (root: Tree.Node) => {
  const made = new Map<string, Directory.Directory>()
  for (const [d, dir] of Either.getOrThrow(Tree.encode(root)).made) made.set(d.hash, dir)
  const out = new Map<string, Directory.Directory>()
  const stack: Array<[string, Digest.Digest]> = [["", Either.getOrThrow(Tree.encode(root)).digest]]
  while (stack.length > 0) {
    const [p, d] = stack.pop()!
    const dir = Digest.isEmpty(d) ? Directory.empty : made.get(d.hash)!
    out.set(p, dir)
    for (const c of dir.directories) stack.push([p === "" ? c.name : `${p}/${c.name}`, c.digest])
  }
  return out
}

/** A chain of `depth` directories `d` around one file, as a Node. */
const chainNode = (depth: number, leaf = "f") => {
  const root = Tree.node()
  Tree.dirAt(root, Array.from({ length: depth }, () => "d"))!.files.set(leaf, {
    digest: fileDigest(leaf),
    isExecutable: false
  })
  return root
}

describe("iterative walkers equal the recursive ones on ordinary trees", () => {
  it.prop("Tree.encode: the same root digest and the same directories", [specArb], ([spec]) => {
    const root = nodeOf(spec)
    const encoded = Either.getOrThrow(Tree.encode(root))
    const old = oldEncode(root)
    assert.strictEqual(encoded.digest.hash, old.digest.hash)
    assert.deepStrictEqual(new Set(encoded.pending.map((e) => e.hash)), old.hashes)
  })

  it.prop("entriesOf: the same entries in the same order", [specArb], ([spec]) => {
    const dirs = dirsByPath(nodeOf(spec))
    assert.deepStrictEqual(Tree.entriesOf(dirs), oldEntriesOf(dirs))
  })
})

const StoreLive = Layer.scoped(Store.Store, Effect.flatMap(tempDir("kiln-deep-"), (root) => Store.make({ root })))

layer(StoreLive)("the store on deep and random trees", (it) => {
  it.effect("mergeTrees: the same digest or the same conflict as the recursive merge, over random layers", () =>
    Effect.gen(function*() {
      const store = yield* Store.Store
      const samples = fc.sample(
        fc.array(
          fc.tuple(specArb, fc.nat(2), fc.constantFrom<Array<string>>([], ["a"], ["b", "c"])),
          { minLength: 1, maxLength: 4 }
        ),
        { numRuns: 150, seed: 34 }
      )
      const outcomes = { Left: 0, Right: 0 }
      for (const sample of samples) {
        const layers = []
        for (const [spec, variant, at] of sample) {
          const encoded = Either.getOrThrow(Tree.encode(nodeOf(spec, variant)))
          for (const [, dir] of encoded.made) yield* store.putDirectory(dir)
          layers.push({ digest: encoded.digest, at })
        }
        const merged = yield* Effect.either(store.mergeTrees(layers))
        const old = yield* Effect.either(oldMerge(store, layers))
        outcomes[old._tag]++
        if (Either.isRight(old)) {
          assert.isTrue(Either.isRight(merged), `merged failed: ${JSON.stringify(merged)}`)
          assert.strictEqual(Either.getOrThrow(merged).hash, old.right.hash)
        } else {
          assert.deepStrictEqual(Either.flip(merged) as Either.Either<unknown>, Either.right(old.left))
        }
      }
      // Both merged trees and conflicts were drawn.
      assert.isAbove(outcomes.Left, 10, JSON.stringify(outcomes))
      assert.isAbove(outcomes.Right, 10, JSON.stringify(outcomes))
    }))

  it.effect("a chain 10,000 directories deep is made, listed and merged without recursion", () =>
    Effect.gen(function*() {
      const store = yield* Store.Store
      // The recursive walks overflowed Node's stack between 4,000 and 5,000 levels.
      const depth = 10_000
      const chain = Array.from({ length: depth }, () => "d")
      const leaf = (name: string) =>
        store.putDirectory({
          files: [{ name, digest: fileDigest(name), isExecutable: false }],
          directories: [],
          symlinks: []
        })
      // A layer laid 10,000 levels down: the merge makes the chain (and encodes it) in one go.
      const f = yield* store.mergeTrees([{ digest: yield* leaf("f"), at: chain }])
      const g = yield* store.mergeTrees([{ digest: yield* leaf("g"), at: chain }])
      assert.strictEqual(f.hash, Either.getOrThrow(Tree.encode(chainNode(depth))).digest.hash)
      const entries = yield* store.listTree(f)
      assert.strictEqual(entries.length, depth + 1)
      assert.strictEqual(entries[entries.length - 1]!.path.split("/").length, depth + 1)
      // Two deep layers that share the chain and differ at its bottom: merged all the way down.
      const merged = yield* store.mergeTrees([{ digest: f, at: [] }, { digest: g, at: [] }])
      const both = chainNode(depth)
      Tree.dirAt(both, chain)!.files.set("g", { digest: fileDigest("g"), isExecutable: false })
      assert.strictEqual(merged.hash, Either.getOrThrow(Tree.encode(both)).digest.hash)
    }))
})

describe("the symlink rule against real resolution", () => {
  it.scoped("a tree whose every link keeps the rule never resolves outside its root", () =>
    Effect.gen(function*() {
      const base = yield* tempDir("kiln-rule-")
      const targetArb = fc.array(fc.constantFrom("a", "b", "x", "y", "..", "."), { minLength: 1, maxLength: 4 })
        .map((p) => p.join("/"))
      const linkArb = fc.tuple(
        fc.array(fc.constantFrom("a", "b"), { maxLength: 2 }),
        fc.constantFrom("x", "y"),
        targetArb
      )
      const samples = fc.sample(fc.array(linkArb, { minLength: 1, maxLength: 6 }), { numRuns: 300, seed: 34 })
      const names = ["a", "b", "x", "y"]
      let resolvedPaths = 0
      for (const [i, links] of samples.entries()) {
        const root = path.join(base, `t${i}`, "root")
        fs.mkdirSync(path.join(root, "a", "b"), { recursive: true })
        fs.mkdirSync(path.join(root, "b", "a"), { recursive: true })
        for (const [dir, name, target] of links) {
          const at = path.join(root, ...dir, name)
          const parent = fs.lstatSync(path.dirname(at), { throwIfNoEntry: false })
          if (parent?.isDirectory() !== true || fs.lstatSync(at, { throwIfNoEntry: false }) !== undefined) continue
          if (Directory.escapingTargetReason(target, dir.length) !== undefined) continue
          fs.symlinkSync(target, at)
        }
        // Every path of one to three names below the root, resolved by the kernel through the links: inside, or
        // not resolvable at all (a dangling link, a loop).
        const realRoot = fs.realpathSync(root)
        for (const a of names) {
          for (const b of ["", ...names]) {
            for (const c of b === "" ? [""] : ["", ...names]) {
              let where: string
              try {
                where = fs.realpathSync(path.join(root, a, b, c))
              } catch {
                continue
              }
              resolvedPaths++
              assert.isTrue(
                where === realRoot || where.startsWith(`${realRoot}/`),
                `${[a, b, c].join("/")} resolves to ${where}, outside ${realRoot}`
              )
            }
          }
        }
      }
      assert.isAbove(resolvedPaths, 1000)
    }))

  it("the rule on what tools write", () => {
    // npm's .bin links, pnpm's virtual store, shared-library names, a link to its own directory.
    assert.isUndefined(Directory.escapingTargetReason("../typescript/bin/tsc", 2))
    assert.isUndefined(Directory.escapingTargetReason("../../node_modules/.pnpm/x@1/node_modules/x", 3))
    assert.isUndefined(Directory.escapingTargetReason("libfoo.so.1", 0))
    assert.isUndefined(Directory.escapingTargetReason(".", 0))
    assert.strictEqual(Directory.escapingTargetReason("/etc/passwd", 5), "an absolute target")
    assert.match(Directory.escapingTargetReason("../x", 0)!, /goes up 1 levels, from 0/)
    assert.match(Directory.escapingTargetReason("d/../..", 4)!, /`\.\.` after a name/)
  })
})
