import { assert, describe, it } from "@effect/vitest"
import { Either, FastCheck } from "effect"
import * as Digest from "../../src/domain/Digest.js"

const hex = (length: number) =>
  FastCheck.array(FastCheck.constantFrom(..."0123456789abcdefA"), { minLength: length, maxLength: length }).map((c) =>
    c.join("")
  )
const hash = FastCheck.oneof(hex(64), hex(63), hex(65), FastCheck.constant(Digest.empty.hash))
const size = FastCheck.oneof(
  FastCheck.nat().map(String),
  FastCheck.bigInt({ min: 0n, max: 2n ** 60n }).map(String),
  FastCheck.constantFrom("0", "00", "01", "-1", "", "9007199254740991", "9007199254740992", "1e3", " 1")
)
// Mostly near-valid text, so that the property explores the edges rather than garbage.
const text = FastCheck.oneof(
  FastCheck.tuple(hash, size).map(([h, s]) => `${h}/${s}`),
  FastCheck.string()
)

describe("Digest.isText", () => {
  it.prop("accepts exactly what Digest.parse accepts", [text], ([t]) => {
    assert.strictEqual(Digest.isText(t), Either.isRight(Digest.parse(t)), t)
  })

  it("accepts the empty digest and rejects size 0 of another hash", () => {
    assert.isTrue(Digest.isText(Digest.format(Digest.empty)))
    assert.isFalse(Digest.isText(`${"a".repeat(64)}/0`))
  })
})
