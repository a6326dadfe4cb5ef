/**
 * The laws of `Store.mergeTrees`, on a real store (LMDB in a temp dir): layers drawn from one consistent tree merge
 * to that tree's part they cover, whatever the grouping and order; two layers that fill one path differently always
 * fail with `InputConflict` naming that path and both sides, whichever comes first.
 */
import { assert, describe, layer } from "@effect/vitest"
import { Effect, Either, FastCheck as fc, Layer } from "effect"
import * as Digest from "../../src/domain/Digest.js"
import * as Directory from "../../src/domain/Directory.js"
import { InputConflict } from "../../src/domain/TreeErrors.js"
import * as Store from "../../src/layers/store/Store.js"
import { tempDir } from "../utils/temp.js"

type Leaf =
  | { readonly kind: "file"; readonly content: number; readonly exec: boolean }
  | { readonly kind: "link"; readonly target: string }
  | { readonly kind: "dir" }

/** Leaves by path ("a/b"); a "dir" leaf is a directory with one file `z` in it. */
type Tree = ReadonlyMap<string, Leaf>

const leafArb: fc.Arbitrary<Leaf> = fc.oneof(
  fc.record({ kind: fc.constant("file" as const), content: fc.nat(3), exec: fc.boolean() }),
  fc.record({ kind: fc.constant("link" as const), target: fc.constantFrom("x", "../y", "/z") })
)

/** A consistent tree: no leaf is under another leaf. */
const universeArb: fc.Arbitrary<Tree> = fc.array(
  fc.tuple(fc.array(fc.constantFrom("a", "b", "c"), { minLength: 1, maxLength: 3 }), leafArb),
  { minLength: 1, maxLength: 12 }
).map((candidates) => {
  const tree = new Map<string, Leaf>()
  for (const [segments, leaf] of candidates) {
    const key = segments.join("/")
    const clashes = [...tree.keys()].some((k) => k === key || k.startsWith(`${key}/`) || key.startsWith(`${k}/`))
    if (!clashes) tree.set(key, leaf)
  }
  return tree
})

interface LayerSpec {
  readonly at: ReadonlyArray<string>
  /** Relative to `at`. */
  readonly tree: Tree
}

/** Layers that each take part of `u`, some placed at a top-level directory of it. */
const layersOf = (u: Tree): fc.Arbitrary<Array<LayerSpec>> => {
  const keys = [...u.keys()]
  const tops = [...new Set(keys.filter((k) => k.includes("/")).map((k) => k.split("/")[0]!))]
  const layerArb = fc.tuple(
    fc.array(fc.boolean(), { minLength: keys.length, maxLength: keys.length }),
    tops.length === 0 ? fc.constant(undefined) : fc.option(fc.constantFrom(...tops), { nil: undefined })
  ).map(([mask, top]): LayerSpec => {
    const prefix = top === undefined ? "" : `${top}/`
    const tree = new Map<string, Leaf>()
    keys.forEach((k, i) => {
      if (mask[i] === true && k.startsWith(prefix)) tree.set(k.slice(prefix.length), u.get(k)!)
    })
    return { at: top === undefined ? [] : [top], tree }
  })
  return fc.array(layerArb, { minLength: 1, maxLength: 5 })
}

const fileDigest = (content: number) => Digest.ofBytes(Buffer.from(`content ${content}`))

/** Stores `tree`'s directories (file blobs are not needed to merge) and gives the root's digest. */
const putTree = (store: Store.Service, tree: Tree): Effect.Effect<Digest.Digest, unknown> =>
  Effect.gen(function*() {
    const files: Array<Directory.FileNode> = []
    const symlinks: Array<Directory.SymlinkNode> = []
    const children = new Map<string, Map<string, Leaf>>()
    for (const [key, leaf] of tree) {
      const [name, ...rest] = key.split("/") as [string, ...Array<string>]
      if (rest.length > 0) {
        const child = children.get(name) ?? new Map<string, Leaf>()
        child.set(rest.join("/"), leaf)
        children.set(name, child)
      } else if (leaf.kind === "file") {
        files.push({ name, digest: fileDigest(leaf.content), isExecutable: leaf.exec })
      } else if (leaf.kind === "link") {
        symlinks.push({ name, target: leaf.target })
      } else {
        children.set(name, new Map([["z", { kind: "file", content: 0, exec: false }]]))
      }
    }
    const directories: Array<Directory.DirectoryNode> = []
    for (const [name, child] of children) directories.push({ name, digest: yield* putTree(store, child) })
    const dir = Either.getOrThrow(Directory.make({ files, directories, symlinks }))
    return yield* store.putDirectory(dir)
  })

const placed = (l: LayerSpec): Tree => new Map([...l.tree].map(([k, v]) => [[...l.at, k].join("/"), v]))

const union = (layers: ReadonlyArray<LayerSpec>): Tree => new Map(layers.flatMap((l) => [...placed(l)]))

const asLayers = (store: Store.Service, specs: ReadonlyArray<LayerSpec>) =>
  Effect.forEach(specs, (l) => Effect.map(putTree(store, l.tree), (digest) => ({ digest, at: l.at })))

const describeLeaf = (leaf: Leaf): string =>
  leaf.kind === "file"
    ? `${leaf.exec ? "executable file" : "file"} ${Digest.format(fileDigest(leaf.content))}`
    : leaf.kind === "link"
    ? `symlink -> ${leaf.target}`
    : "a directory"

/** Something else than `leaf` at the same path. */
const otherThan = (leaf: Leaf, pick: number): Leaf => {
  const others: Array<Leaf> = [
    { kind: "dir" },
    leaf.kind === "file" ? { ...leaf, content: leaf.content + 1 } : { kind: "file", content: 0, exec: false },
    leaf.kind === "file" ? { ...leaf, exec: !leaf.exec } : { kind: "file", content: 1, exec: true },
    leaf.kind === "link" ? { kind: "link", target: `${leaf.target}-other` } : { kind: "link", target: "x" }
  ]
  return others[pick % others.length]!
}

const StoreLive = Layer.scoped(Store.Store, Effect.flatMap(tempDir("kiln-merge-"), (root) => Store.make({ root })))

describe("mergeTrees", () => {
  layer(StoreLive, { timeout: "120 seconds" })((it) => {
    it.effect.prop(
      "layers of one consistent tree merge to the part they cover, whatever the grouping and the order",
      [universeArb.chain((u) => layersOf(u))],
      ([specs]) =>
        Effect.gen(function*() {
          const store = yield* Store.Store
          const layers = yield* asLayers(store, specs)
          const expected = yield* putTree(store, union(specs))
          const all = yield* store.mergeTrees(layers)
          assert.deepStrictEqual(all, expected)
          assert.deepStrictEqual(yield* store.mergeTrees([...layers].reverse()), expected)
          // (A ⊕ … ⊕ B) ⊕ (C ⊕ …) at every split point.
          for (let k = 1; k < layers.length; k++) {
            const left = yield* store.mergeTrees(layers.slice(0, k))
            const right = yield* store.mergeTrees(layers.slice(k))
            assert.deepStrictEqual(yield* store.mergeTrees([{ digest: left, at: [] }, { digest: right, at: [] }]), all)
            assert.deepStrictEqual(yield* store.mergeTrees([{ digest: left, at: [] }, ...layers.slice(k)]), all)
          }
        }),
      { fastCheck: { numRuns: 60 } }
    )

    it.effect.prop(
      "two layers that fill one path differently fail with InputConflict naming it, whatever the order",
      [
        universeArb.chain((u) =>
          fc.tuple(fc.constant(u), layersOf(u), fc.nat(u.size - 1), fc.nat(3), fc.nat(1000), fc.boolean())
        )
      ],
      ([[u, compatible, index, pick, position, clashFirst]]) =>
        Effect.gen(function*() {
          const store = yield* Store.Store
          const [conflictPath, leaf] = [...u][index]!
          const other = otherThan(leaf, pick)
          const mine: LayerSpec = { at: [], tree: new Map([[conflictPath, leaf]]) }
          const theirs: LayerSpec = { at: [], tree: new Map([[conflictPath, other]]) }
          const pair = clashFirst ? [theirs, mine] : [mine, theirs]
          // The pair somewhere among layers that agree with `mine`, in order.
          const at = position % (compatible.length + 1)
          const specs = [...compatible.slice(0, at), pair[0]!, ...compatible.slice(at), pair[1]!]
          const error = yield* Effect.flip(store.mergeTrees(yield* asLayers(store, specs)))
          assert.instanceOf(error, InputConflict)
          if (!(error instanceof InputConflict)) return
          assert.strictEqual(error.path, conflictPath)
          assert.sameMembers([error.first, error.second], [describeLeaf(leaf), describeLeaf(other)])
          assert.notInclude(error.message, "\n")
        }),
      { fastCheck: { numRuns: 100 } }
    )
  })
})
