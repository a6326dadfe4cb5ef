import { assert, describe, it } from "@effect/vitest"
import { Either, FastCheck } from "effect"
import * as Digest from "../../src/domain/Digest.js"
import * as Directory from "../../src/domain/Directory.js"
import { compareUtf8 } from "../../src/domain/internal/protobuf.js"

const hash = FastCheck.uint8Array({ minLength: 32, maxLength: 32 }).map((b) => Buffer.from(b).toString("hex"))
const digest = FastCheck.tuple(hash, FastCheck.integer({ min: 1, max: 2 ** 40 })).map(([h, sizeBytes]) => ({
  hash: h,
  sizeBytes
}))
const name = FastCheck.string({ unit: "grapheme", minLength: 1, maxLength: 12 }).filter((n) =>
  Directory.invalidNameReason(n) === undefined
)
const entries = FastCheck.uniqueArray(
  FastCheck.tuple(name, FastCheck.integer({ min: 0, max: 2 }), digest, FastCheck.boolean()),
  {
    selector: ([n]) => n,
    maxLength: 12
  }
).map((xs) => ({
  files: xs.filter(([, k]) => k === 0).map(([n, , d, x]) => ({ name: n, digest: d, isExecutable: x })),
  directories: xs.filter(([, k]) => k === 1).map(([n, , d]) => ({ name: n, digest: d })),
  symlinks: xs.filter(([, k]) => k === 2).map(([n, , d]) => ({ name: n, target: `../${d.hash.slice(0, 8)}` }))
}))

describe("Directory", () => {
  it.prop("decode ∘ encode is the identity", [entries], ([e]) => {
    const dir = Either.getOrThrow(Directory.make(e))
    assert.deepStrictEqual(Either.getOrThrow(Directory.decode(Directory.encode(dir))), dir)
  })

  it.prop("any permutation of the entries gives the same digest", [entries, FastCheck.integer()], ([e, seed]) => {
    const shuffle = <A>(xs: ReadonlyArray<A>) =>
      xs.map((x, i) => [x, (i * 7919 + seed) % 1009] as const).sort((a, b) => a[1] - b[1]).map(([x]) => x)
    const a = Either.getOrThrow(Directory.make(e))
    const b = Either.getOrThrow(Directory.make({
      files: shuffle([...e.files].reverse()),
      directories: shuffle(e.directories),
      symlinks: shuffle([...e.symlinks].reverse())
    }))
    assert.strictEqual(Digest.format(Directory.digestOf(a)), Digest.format(Directory.digestOf(b)))
  })

  it.prop("names sort by UTF-8 bytes", [name, name], ([a, b]) => {
    const bytes = Buffer.compare(Buffer.from(a), Buffer.from(b))
    assert.strictEqual(Math.sign(compareUtf8(a, b)), Math.sign(bytes))
  })

  it("UTF-8 order is not UTF-16 order: U+FF61 sorts before U+1F600", () => {
    const d = { hash: Digest.empty.hash, sizeBytes: 0 }
    const dir = Either.getOrThrow(Directory.make({
      files: [{ name: "😀", digest: d, isExecutable: false }, { name: "｡", digest: d, isExecutable: false }]
    }))
    assert.deepStrictEqual(dir.files.map((f) => f.name), ["｡", "😀"])
  })

  it("rejects invalid and duplicate names", () => {
    const d = Digest.ofBytes(Buffer.from("x"))
    for (const bad of ["", ".", "..", "a/b", "a\0b"]) {
      assert.isTrue(Either.isLeft(Directory.make({ files: [{ name: bad, digest: d, isExecutable: false }] })), bad)
    }
    const dup = Directory.make({
      files: [{ name: "x", digest: d, isExecutable: false }],
      directories: [{ name: "x", digest: d }]
    })
    assert.isTrue(Either.isLeft(dup))
  })

  describe("decode refuses non-canonical bytes", () => {
    const d = Digest.ofBytes(Buffer.from("some input text\n"))
    const canonical = Directory.encode(
      Either.getOrThrow(Directory.make({ files: [{ name: "in.txt", digest: d, isExecutable: false }] }))
    )
    const fileNode = (extra: Array<number>) => {
      const inner = [...canonical.subarray(2)]
      const node = [...inner, ...extra]
      return Uint8Array.from([0x0a, node.length, ...node])
    }

    it("an explicit is_executable: false", () => {
      const bytes = fileNode([0x20, 0x00])
      assert.isTrue(Either.isLeft(Directory.decode(bytes)))
    })

    it("an unknown field", () => {
      assert.isTrue(Either.isLeft(Directory.decode(Uint8Array.from([...canonical, 0x28, 0x01]))))
    })

    it("entries out of order", () => {
      const b = Directory.encode(Either.getOrThrow(Directory.make({
        files: [{ name: "a", digest: d, isExecutable: false }, { name: "b", digest: d, isExecutable: false }]
      })))
      const half = b.length / 2
      const swapped = Uint8Array.from([...b.subarray(half), ...b.subarray(0, half)])
      assert.isTrue(Either.isLeft(Directory.decode(swapped)))
    })

    it("a truncated message", () => {
      assert.isTrue(Either.isLeft(Directory.decode(canonical.subarray(0, canonical.length - 3))))
    })

    it("a non-minimal varint length", () => {
      const bytes = Uint8Array.from([0x0a, 0x80 | canonical[1]!, 0x00, ...canonical.subarray(2)])
      assert.isTrue(Either.isLeft(Directory.decode(bytes)))
    })
  })
})

describe("Digest", () => {
  it("parses and formats the text form", () => {
    const text = "7576ce57b04785aaa2aeb2532b3b49ac822e71292fcfa0dae582e229f593d9eb/16"
    assert.strictEqual(Digest.format(Either.getOrThrow(Digest.parse(text))), text)
  })

  it("refuses malformed digests with a reason", () => {
    for (
      const bad of [
        "abc",
        "7576CE57b04785aaa2aeb2532b3b49ac822e71292fcfa0dae582e229f593d9eb/16",
        `${"a".repeat(64)}/-1`,
        `${"a".repeat(64)}/0`,
        `${"a".repeat(64)}/01`
      ]
    ) {
      assert.isTrue(Either.isLeft(Digest.parse(bad)), bad)
    }
  })
})
