/**
 * kiln.json's errors as a user reads them (#38 §4): JSON with comments and trailing commas is a config, every error of
 * the file is said in one run, each at `kiln.json:LINE:COL` with the line and a caret, in a user's words, with "did you
 * mean" for unknown fields and processes, and kiln's names for other tools' fields.
 */
import { assert, describe, it } from "@effect/vitest"
import { Either } from "effect"
import * as Config from "../../src/domain/config/Config.js"
import * as ConfigText from "../../src/domain/config/ConfigText.js"

const refusal = (text: string): string => {
  const parsed = Config.parse("kiln.json", text)
  if (Either.isRight(parsed)) return assert.fail(`accepted: ${text}`)
  return parsed.left.message
}

describe("kiln.json as JSONC", () => {
  it("comments and trailing commas are a config, the same as plain JSON", () => {
    const jsonc = `{
  // what runs
  "processes": {
    /* a generator */
    "gen": { "argv": ["node", "gen.mjs"], "outputs": ["gen/x.js",], },
  },
}`
    const parsed = Config.parse("kiln.json", jsonc)
    assert.deepStrictEqual(
      Either.getOrThrow(parsed),
      Either.getOrThrow(
        Config.parse("kiln.json", `{"processes":{"gen":{"argv":["node","gen.mjs"],"outputs":["gen/x.js"]}}}`)
      )
    )
  })

  it("a __proto__ key in JSONC is an own key, refused by name (not a prototype set without a word)", () => {
    const read = ConfigText.parse(`{ "processes": { "__proto__": { "argv": ["x"] }, }, }`)
    assert.isTrue("json" in read)
    const json = (read as { json: { processes: object } }).json
    assert.isTrue(Object.hasOwn(json.processes, "__proto__"))
    assert.strictEqual(Object.getPrototypeOf(json.processes), Object.prototype)
    assert.match(
      refusal(`{ "processes": { "__proto__": { "argv": ["x"] }, }, }`),
      /^kiln\.json:1:18: processes\.__proto__: /
    )
  })

  it("a syntax error: its line and column, the line, and a caret under the place", () => {
    assert.strictEqual(
      refusal(`{\n  "processes": {\n    "a": { "argv": ["x"] "deps": [] }\n  }\n}`),
      [
        "kiln.json:3:26: not valid JSON: expected `,`",
        "      \"a\": { \"argv\": [\"x\"] \"deps\": [] }",
        "                           ^"
      ].join("\n")
    )
  })
})

describe("kiln.json's errors", () => {
  const text = `{
  "processes": {
    "gen": {
      "argv": "node tools/gen.mjs",
      "ouputs": ["gen/x.js"],
      "dependsOn": ["build"],
      "cache": false,
      "timeout": 5
    }
  },
  "outputs": []
}`

  it("every error of the file, in the file's order, each in a user's words", () => {
    const lines = refusal(text).split("\n").filter((l) => !l.startsWith("  "))
    assert.deepStrictEqual(lines, [
      "kiln.json:4:15: processes.gen.argv: expected an array of strings, e.g. [\"node\", \"tools/gen.mjs\"]",
      "kiln.json:5:7: processes.gen.ouputs: unknown field: did you mean \"outputs\"?",
      "kiln.json:6:7: processes.gen.dependsOn: unknown field: kiln calls it `deps`",
      "kiln.json:7:16: processes.gen.cache: expected one of \"always\", \"successful\", \"never\"",
      "kiln.json:8:18: processes.gen.timeout: expected a duration such as \"60s\"",
      "kiln.json:11:3: outputs: unknown field: `outputs` belongs to a process: processes.NAME.outputs"
    ])
  })

  it("each error quotes its line, the caret under the field (a name) or its value", () => {
    const message = refusal(text)
    assert.include(
      message,
      "kiln.json:5:7: processes.gen.ouputs: unknown field: did you mean \"outputs\"?\n" +
        "        \"ouputs\": [\"gen/x.js\"],\n" +
        "        ^"
    )
    assert.include(
      message,
      "kiln.json:8:18: processes.gen.timeout: expected a duration such as \"60s\"\n" +
        "        \"timeout\": 5\n" +
        "                   ^"
    )
  })

  it("the paths stay exact, and an error's fields are the first one's", () => {
    const parsed = Config.parse("kiln.json", text)
    if (Either.isRight(parsed)) return assert.fail("accepted")
    assert.strictEqual(parsed.left.path, "processes.gen.argv")
    assert.deepStrictEqual(parsed.left.more?.map((p) => p.path), [
      "processes.gen.ouputs",
      "processes.gen.dependsOn",
      "processes.gen.cache",
      "processes.gen.timeout",
      "outputs"
    ])
  })

  it("an unknown dep suggests the nearest process; every one of the graph's errors is said", () => {
    const message = refusal(JSON.stringify({
      processes: { build: { argv: ["x"] }, a: { argv: ["x"], deps: ["bulid"] }, b: { argv: ["x"], outputs: ["/o"] } }
    }))
    const heads = message.split("\n").filter((l) => !l.startsWith("  "))
    assert.deepStrictEqual(heads.map((l) => l.replace(/^kiln\.json:1:\d+: /, "")), [
      "processes.a.deps[0]: unknown process \"bulid\": did you mean \"build\"?",
      "processes.b.outputs[0]: \"/o\" must be a relative path inside the working directory"
    ])
  })

  it("other tools' names, and fields at the wrong level", () => {
    const one = (fields: object) =>
      refusal(JSON.stringify({ processes: { a: { argv: ["x"], ...fields } } })).split("\n")[0]!
    assert.match(one({ command: "make" }), /unknown field: kiln calls it `argv`, an array/)
    assert.match(one({ cwd: "x" }), /unknown field: kiln calls it `workingDirectory`$/)
    assert.match(
      refusal(JSON.stringify({ defaults: { deps: [] }, processes: {} })).split("\n")[0]!,
      /defaults\.deps: unknown field: `deps` belongs to a process: processes\.NAME\.deps$/
    )
    assert.match(
      refusal(JSON.stringify({ env: {}, processes: {} })).split("\n")[0]!,
      /: env: unknown field: `env` for every process goes in `defaults`/
    )
  })

  it("a boolean, a string, an object: said plainly", () => {
    const one = (fields: object) =>
      refusal(JSON.stringify({ processes: { a: { argv: ["x"], ...fields } } })).split("\n")[0]!
    assert.match(one({ remote: "no" }), /processes\.a\.remote: expected true or false$/)
    assert.match(one({ workingDirectory: 1 }), /processes\.a\.workingDirectory: expected a string$/)
    assert.match(one({ env: { A: 1 } }), /processes\.a\.env\.A: expected a string$/)
    assert.match(one({ argv: [] }), /processes\.a\.argv: must not be empty: its first element is the command to run$/)
    assert.match(one({ namedCaches: { "A-b": "x" } }), /namedCaches\["A-b"\]: a named cache's name is \[a-z0-9_\]\+$/)
  })
})
