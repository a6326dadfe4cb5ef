/**
 * kiln.json's fast check must accept exactly what its schema accepts, and give back the same config: a valid config
 * skips the schema decoder, an invalid one goes through it for the message.
 */
import { describe, expect, it } from "@effect/vitest"
import { Either, FastCheck as fc, Schema } from "effect"
import * as fs from "node:fs"
import { Config, isPlainConfig } from "../../src/domain/config/Config.js"

const anyValue = fc.oneof(
  fc.string({ maxLength: 4 }),
  fc.integer(),
  fc.constant(null),
  fc.boolean(),
  fc.array(fc.string({ maxLength: 3 }), { maxLength: 2 }),
  fc.array(fc.integer(), { maxLength: 2 }),
  fc.dictionary(fc.constantFrom("a", "b_1", "B", "x-y", "__proto__"), fc.oneof(fc.string(), fc.integer()))
)
/** Mostly a valid value, sometimes anything: valid configs are common, and each field also fails on its own. */
const mostly = <A>(valid: fc.Arbitrary<A>) =>
  fc.oneof({ arbitrary: valid, weight: 12 }, { arbitrary: anyValue as fc.Arbitrary<unknown>, weight: 1 })
/** An excess field, once in ten. */
const sometimes = <A extends object>(extra: fc.Arbitrary<A>): fc.Arbitrary<A | object> =>
  fc.oneof({ arbitrary: fc.constant({}), weight: 9 }, { arbitrary: extra, weight: 1 })
const strings = mostly(fc.array(fc.string({ maxLength: 4 }), { maxLength: 3 }))
const processConfig = fc.tuple(
  fc.record({
    argv: fc.oneof(
      { arbitrary: fc.array(fc.string({ maxLength: 4 }), { minLength: 1, maxLength: 3 }), weight: 12 },
      { arbitrary: fc.constant([]), weight: 1 },
      { arbitrary: anyValue as fc.Arbitrary<unknown>, weight: 1 }
    ),
    inputs: strings,
    optionalInputs: strings,
    deps: strings,
    outputs: strings,
    writableInputs: strings,
    passEnv: strings,
    passThroughEnv: strings,
    hostPaths: strings,
    network: mostly(fc.boolean()),
    env: mostly(fc.dictionary(fc.string({ maxLength: 3 }), fc.string({ maxLength: 3 }), { maxKeys: 2 })),
    workingDirectory: mostly(fc.string({ maxLength: 4 })),
    timeout: mostly(fc.oneof(
      { arbitrary: fc.constantFrom("90s", "5m", "1.5h", "250ms", " 2 s "), weight: 6 },
      { arbitrary: fc.constantFrom("5", "5x", ""), weight: 1 }
    )),
    cache: mostly(fc.oneof(
      { arbitrary: fc.constantFrom("always", "successful", "never"), weight: 6 },
      { arbitrary: fc.constant("sometimes"), weight: 1 }
    )),
    namedCaches: mostly(fc.dictionary(
      fc.oneof(
        { arbitrary: fc.constantFrom("go", "npm_cache", "x1"), weight: 6 },
        { arbitrary: fc.constantFrom("Go", "a-b"), weight: 1 }
      ),
      fc.string({ maxLength: 3 }),
      { maxKeys: 2 }
    ))
  }, { requiredKeys: ["argv"] }),
  sometimes(fc.record({ extra: anyValue }))
).map(([pc, extra]) => ({ ...pc, ...extra }))
const config = fc.oneof(
  {
    arbitrary: fc.tuple(
      fc.record({
        $schema: mostly(fc.string({ maxLength: 4 })),
        sandbox: mostly(fc.constantFrom("strict", "auto", "off", "on")),
        defaults: mostly(
          fc.tuple(
            fc.record({
              env: mostly(fc.dictionary(fc.string({ maxLength: 3 }), fc.string({ maxLength: 3 }), { maxKeys: 2 })),
              passEnv: strings,
              passThroughEnv: strings,
              inputs: strings,
              optionalInputs: strings,
              timeout: mostly(fc.constantFrom("90s", "5", "")),
              cache: mostly(fc.constantFrom("always", "never", "sometimes")),
              hostPaths: strings,
              network: mostly(fc.boolean())
            }, { requiredKeys: [] }),
            sometimes(fc.record({ argv: anyValue }))
          ).map(([d, extra]) => ({ ...d, ...extra }))
        ),
        processes: mostly(fc.dictionary(fc.string({ maxLength: 3 }), processConfig, { maxKeys: 3 }))
      }, { requiredKeys: ["processes"] }),
      sometimes(fc.record({ other: anyValue }))
    ).map(([c, other]) => ({ ...c, ...other })),
    weight: 12
  },
  { arbitrary: anyValue as fc.Arbitrary<unknown>, weight: 1 }
)

describe("kiln.json", () => {
  it.prop("the fast check accepts exactly what the schema accepts, and the same config", [config], ([value]) => {
    // Through JSON, as a config file arrives (and so that `__proto__` keys are own properties, as JSON.parse makes).
    const json = JSON.parse(JSON.stringify(value)) as unknown
    const decoded = Schema.decodeUnknownEither(Config, { onExcessProperty: "error" })(json)
    // The schema's one change to what it decodes: an absent `processes` is `{}` (a config of tasks alone).
    const asItStands = typeof json === "object" && json !== null && Object.hasOwn(json, "processes")
    expect(isPlainConfig(json)).toBe(
      Either.isRight(decoded) && asItStands && !JSON.stringify(value).includes("__proto__")
    )
    if (isPlainConfig(json)) expect(json).toStrictEqual(Either.getOrThrow(decoded))
  }, { fastCheck: { numRuns: 3000 } })

  it("the example workspace's kiln.json takes the fast path", () => {
    expect(isPlainConfig(JSON.parse(fs.readFileSync("examples/workspace/kiln.json", "utf8")))).toBe(true)
  })
})
