/**
 * The action-cache entry decoder's fast path (`decodeEntry`, which checks the shape kiln writes by hand) against the
 * general decoder (the schema): equal on every valid encoding, in any key order and spacing, and on near misses
 * (a field of the wrong type, one missing or extra, a digest that is not one), so the fast path never accepts what
 * the schema refuses nor returns something else. And the encoder's (`encodeEntry`) against the schema's: the same
 * bytes for every entry, whatever else the value carries.
 */
import { assert, describe, it } from "@effect/vitest"
import { Arbitrary, FastCheck as fc, Option } from "effect"
import {
  decodeEntry,
  decodeEntrySchema,
  encodeEntry,
  encodeEntrySchema,
  EntryFields
} from "../../src/layers/runner/internal/cacheEntry.js"

// JSON has no Infinity or NaN: such a duration encodes as null, which is no valid encoding (nor one kiln writes).
const entryArb = Arbitrary.make(EntryFields).filter((e) => Number.isFinite(e.durationMs))

/** JSON text of `value` with its keys (at every level) in a shuffled order and some spacing. */
const reordered = (value: unknown, order: ReadonlyArray<number>, indent: number): string => {
  let n = 0
  const shuffle = (v: unknown): unknown => {
    if (typeof v !== "object" || v === null || Array.isArray(v)) return v
    const keys = Object.keys(v)
    const sorted = keys.map((k, i) => [k, order[(n++ + i) % order.length]!] as const).sort((a, b) => a[1] - b[1])
    return Object.fromEntries(sorted.map(([k]) => [k, shuffle((v as Record<string, unknown>)[k])]))
  }
  return JSON.stringify(shuffle(value), null, indent)
}

const FIELDS = ["exitCode", "signal", "timedOut", "stdoutDigest", "stderrDigest", "outputDigest", "durationMs"]

const oddValue = fc.oneof(
  fc.constant(null),
  fc.constant(2 ** 53 + 2),
  fc.constant(1.5),
  fc.constant(-1),
  fc.constant("0"),
  fc.constant(true),
  fc.constant({}),
  fc.constant([]),
  fc.constant({ hash: "A".repeat(64), sizeBytes: 1 }),
  fc.constant({ hash: "a".repeat(63), sizeBytes: 1 }),
  fc.constant({ hash: "a".repeat(64), sizeBytes: -1 }),
  fc.constant({ hash: "a".repeat(64), sizeBytes: 1, extra: 1 }),
  fc.constant({ hash: "a".repeat(64) })
)

/** An encoded entry with one change: a field set to an odd value (or a nested digest field), removed, or added. */
const nearMiss = fc.tuple(
  entryArb,
  fc.constantFrom(...FIELDS),
  fc.constantFrom("set", "setHash", "setSize", "remove", "add"),
  oddValue
).map(([entry, field, change, odd]) => {
  const json = JSON.parse(encodeEntry(entry)) as Record<string, any>
  if (change === "set") json[field] = odd
  else if (change === "remove") delete json[field]
  else if (change === "add") json.extra = odd
  else if (typeof json[field] === "object" && json[field] !== null) {
    json[field] = { ...json[field], [change === "setHash" ? "hash" : "sizeBytes"]: odd }
  } else json[field] = odd
  return JSON.stringify(json)
})

describe("action-cache entry decoding", () => {
  it.prop(
    "the fast path gives what the schema gives, on every valid encoding",
    [entryArb, fc.array(fc.nat(), { minLength: 1, maxLength: 16 }), fc.constantFrom(0, 1, 2)],
    ([entry, order, indent]) => {
      for (const text of [encodeEntry(entry), reordered(JSON.parse(encodeEntry(entry)), order, indent)]) {
        const general = decodeEntrySchema(text)
        assert.isTrue(Option.isSome(general), text)
        assert.deepStrictEqual(decodeEntry(text), general)
      }
    },
    { fastCheck: { numRuns: 1000 } }
  )

  it.prop(
    "the fast path gives what the schema gives on near misses: it never accepts what the schema refuses",
    [nearMiss],
    ([text]) => {
      assert.deepStrictEqual(decodeEntry(text), decodeEntrySchema(text), text)
    },
    { fastCheck: { numRuns: 1000 } }
  )

  it.prop(
    "the encoder writes the schema's bytes, for any entry and for a result that carries more fields",
    [Arbitrary.make(EntryFields), fc.record({ actionDigest: fc.constant({ hash: "b".repeat(64), sizeBytes: 3 }) })],
    ([entry, extra]) => {
      assert.strictEqual(encodeEntry(entry), encodeEntrySchema(entry))
      const result = { ...entry, ...extra, source: "executed", timings: { run: 1 } }
      assert.strictEqual(encodeEntry(result), encodeEntrySchema(result))
    },
    { fastCheck: { numRuns: 1000 } }
  )
})
