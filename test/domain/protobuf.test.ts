import { assert, describe, it } from "@effect/vitest"
import { FastCheck } from "effect"
import { Writer } from "../../src/domain/internal/protobuf.js"

/** Any UTF-16 code units: astral pairs, and lone surrogates, which TextEncoder writes as U+FFFD. */
const text = FastCheck.array(FastCheck.integer({ min: 0, max: 0xffff }), { maxLength: 40 }).map((units) =>
  String.fromCharCode(...units)
)
const withAstral = FastCheck.string({ unit: "grapheme", maxLength: 20 })

const varint = (n: number): Array<number> => {
  const out: Array<number> = []
  while (n >= 0x80) {
    out.push((n % 0x80) | 0x80)
    n = Math.floor(n / 0x80)
  }
  return [...out, n]
}

/** What a length-delimited field holds, built the plain way: the tag, the length, TextEncoder's bytes. */
const reference = (field: number, s: string): Array<number> => {
  const bytes = [...new TextEncoder().encode(s)]
  return [...varint(field * 8 + 2), ...varint(bytes.length), ...bytes]
}

describe("protobuf Writer", () => {
  it.prop("a string field is the bytes TextEncoder gives, lone surrogates and astral characters included", [
    FastCheck.oneof(text, withAstral)
  ], ([s]) => {
    assert.deepStrictEqual([...new Writer().stringField(3, s).finish()], reference(3, s))
  })

  it.prop("nested messages, however deep, are each written whole into their parent", [
    FastCheck.array(FastCheck.oneof(text, withAstral), { minLength: 1, maxLength: 6 })
  ], ([strings]) => {
    // Each level holds its string, then the next level as field 2: built innermost first the plain way.
    let expected: Array<number> = []
    for (let i = strings.length - 1; i >= 0; i--) {
      const inner = expected
      expected = [
        ...reference(1, strings[i]!),
        ...(i === strings.length - 1 ? [] : [18, ...varint(inner.length), ...inner])
      ]
    }
    const write = (w: Writer, i: number): void => {
      w.stringField(1, strings[i]!)
      if (i + 1 < strings.length) w.messageField(2, (m) => write(m, i + 1))
    }
    const w = new Writer()
    write(w, 0)
    assert.deepStrictEqual([...w.finish()], expected)
  })
})
