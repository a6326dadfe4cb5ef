/**
 * A hostile kiln.json is refused by `Config.parse`, before anything runs, with one error naming the field: paths that
 * leave the workspace or the sandbox, NUL bytes (which no argument, variable or path can hold: the native spawner
 * used to drop such a request and the run hung), variable names with `=`, names looked up on `Object.prototype`
 * (`deps: ["toString"]`) and the `__proto__` key the schema's records drop without a word. Names that merely look
 * like `Object.prototype`'s are ordinary names.
 */
import { assert, describe, it } from "@effect/vitest"
import { Either, FastCheck as fc } from "effect"
import * as Config from "../../src/domain/config/Config.js"

/** The config of one process `p` (with `a.txt` as input), with `fields` on top. */
const oneProcess = (fields: Record<string, unknown>, others: Record<string, unknown> = {}) =>
  JSON.stringify({ processes: { p: { argv: ["/bin/true"], inputs: ["a.txt"], ...fields }, ...others } })

/**
 * The error's first line without its `:LINE:COL`, or a failure if the config was accepted. The message goes on with
 * the file's line and a caret, each problem: every line of it is escaped (no control character reaches the terminal,
 * so the file cannot forge a line of kiln's own).
 */
const refusal = (text: string): string => {
  const parsed = Config.parse("kiln.json", text)
  if (Either.isRight(parsed)) return assert.fail(`accepted: ${text}`)
  const lines = parsed.left.message.split("\n")
  for (const line of lines) assert.notMatch(line, /[\u0000-\u001f\u007f-\u009f]/)
  assert.strictEqual(lines.length % 3, 0, parsed.left.message)
  return lines[0]!.replace(/^kiln\.json:\d+:\d+: /, "kiln.json: ")
}

const refuses = (text: string, line: string) => assert.strictEqual(refusal(text), line)

describe("Config.parse, hostile fields", () => {
  it("a NUL byte in argv, an env name or value, the working directory, an input, an output: the field", () => {
    refuses(
      oneProcess({ argv: ["/bin/echo", "a\u0000b"] }),
      "kiln.json: processes.p.argv[1]: holds a NUL byte, which no argument can"
    )
    refuses(
      oneProcess({ env: { A: "x\u0000y" } }),
      "kiln.json: processes.p.env.A: holds a NUL byte, which no variable's value can"
    )
    refuses(
      oneProcess({ env: { "A\u0000": "x" } }),
      "kiln.json: processes.p.env[\"A\\u0000\"]: \"A\\u0000\" is not a variable name: it must be non-empty, without = or a control character"
    )
    assert.match(refusal(oneProcess({ workingDirectory: "a\u0000" })), /^kiln\.json: processes\.p\.workingDirectory: /)
    assert.match(refusal(oneProcess({ inputs: ["a\u0000.txt"] })), /^kiln\.json: processes\.p\.inputs\[0\]: /)
    assert.match(refusal(oneProcess({ outputs: ["o\u0000"] })), /^kiln\.json: processes\.p\.outputs\[0\]: /)
    assert.match(
      refusal(oneProcess({ writableInputs: ["a\u0000"] })),
      /^kiln\.json: processes\.p\.writableInputs\[0\]: /
    )
    assert.match(refusal(oneProcess({ namedCaches: { c: "c\u0000" } })), /^kiln\.json: processes\.p\.namedCaches\.c: /)
  })

  it("an env name with = or empty", () => {
    refuses(
      oneProcess({ env: { "A=B": "c" } }),
      "kiln.json: processes.p.env[\"A=B\"]: \"A=B\" is not a variable name: it must be non-empty, without = or a control character"
    )
    assert.match(
      refusal(oneProcess({ env: { "": "c" } })),
      /^kiln\.json: processes\.p\.env\[""\]: "" is not a variable/
    )
  })

  it("writableInputs that leave the workspace", () => {
    refuses(
      oneProcess({ writableInputs: ["../../etc", "/etc/passwd"] }),
      "kiln.json: processes.p.writableInputs[0]: \"../../etc\" must be a relative path inside the workspace"
    )
    refuses(
      oneProcess({ writableInputs: ["a", "/etc/passwd"] }),
      "kiln.json: processes.p.writableInputs[1]: \"/etc/passwd\" must be a relative path inside the workspace"
    )
  })

  it("named caches that leave the sandbox, or are its root", () => {
    for (const at of ["../../x", "/tmp/x", "a/../../x", "", ".", "./"]) {
      refuses(
        oneProcess({ namedCaches: { c: at } }),
        `kiln.json: processes.p.namedCaches.c: ${
          JSON.stringify(at)
        } must be a relative path inside the sandbox, below its root`
      )
    }
    assert.isTrue(Either.isRight(Config.parse("kiln.json", oneProcess({ namedCaches: { c: "./cache/c" } }))))
  })

  it("an output that is the working directory itself, not a directory", () => {
    for (const out of [".", "./.", "./"]) {
      const parsed = Config.parse("kiln.json", oneProcess({ outputs: [out] }))
      if (out === "./") assert.isTrue(Either.isRight(parsed), "a directory output of the whole working directory")
      else {
        refuses(
          oneProcess({ outputs: [out] }),
          `kiln.json: processes.p.outputs[0]: ${
            JSON.stringify(out)
          } is the working directory itself, not a file: a directory output ends with /`
        )
      }
    }
  })

  it("an output in the repository's own directory is refused: git runs its config and hooks unsandboxed", () => {
    for (
      const [fields, out, dir] of [
        [{ outputs: [".git/config"] }, ".git/config", ".git"],
        [{ outputs: [".git/"] }, ".git/", ".git"],
        [{ outputs: ["?a/.hg/hgrc"] }, "a/.hg/hgrc", ".hg"],
        [{ workingDirectory: ".git", outputs: ["hooks/pre-commit"] }, "hooks/pre-commit", ".git"],
        [{ workingDirectory: "pkg/.svn", outputs: ["./"] }, "./", ".svn"]
      ] as const
    ) {
      refuses(
        oneProcess(fields),
        `kiln.json: processes.p.outputs[0]: ${JSON.stringify(out)} is in the repository's own directory (${dir}): ` +
          "its config and hooks run outside any sandbox, and its history is the user's"
      )
    }
  })

  it("deps naming Object.prototype's members are unknown processes, not a TypeError", () => {
    for (const dep of ["toString", "constructor", "hasOwnProperty", "__proto__", "valueOf"]) {
      refuses(oneProcess({ deps: [dep] }), `kiln.json: processes.p.deps[0]: unknown process "${dep}"`)
    }
  })

  it("a process named __proto__ is refused by name, not dropped", () => {
    const text = `{"processes":{"__proto__":{"argv":["/bin/true"]},"p":{"argv":["/bin/true"]}}}`
    refuses(
      text,
      "kiln.json: processes.__proto__: \"__proto__\" is not a name kiln takes (JavaScript objects reserve it): rename it"
    )
    // Anywhere else too: a variable, a named cache, a platform property would vanish the same way.
    assert.match(
      refusal(`{"processes":{"p":{"argv":["/bin/true"],"env":{"__proto__":"x"}}}}`),
      /^kiln\.json: processes\.p\.env\.__proto__: /
    )
    assert.match(
      refusal(`{"processes":{"p":{"argv":["/bin/true"],"namedCaches":{"__proto__":"c"}}}}`),
      /^kiln\.json: processes\.p\.namedCaches\.__proto__: /
    )
  })

  it("processes named like Object.prototype's members are ordinary processes", () => {
    const parsed = Config.parse(
      "kiln.json",
      oneProcess({ deps: ["toString", "constructor"] }, {
        toString: { argv: ["/bin/true"] },
        constructor: { argv: ["/bin/true"], deps: ["toString"] }
      })
    )
    assert.isTrue(Either.isRight(parsed))
  })

  it.prop(
    "any string with a NUL, anywhere in argv or env, is refused naming that field",
    [
      fc.tuple(fc.string(), fc.string()).map(([a, b]) => `${a}\u0000${b}`),
      fc.constantFrom("argv", "envName", "envValue"),
      fc.nat(3)
    ],
    ([bad, where, at]) => {
      const argv = ["/bin/true", "a", "b", "c"]
      if (where === "argv") argv[at] = bad
      const env = where === "envName" ? { [bad]: "v" } : where === "envValue" ? { V: bad } : {}
      const message = refusal(oneProcess({ argv, env }))
      assert.isTrue(
        message.startsWith(where === "argv" ? `kiln.json: processes.p.argv[${at}]: ` : "kiln.json: processes.p.env"),
        message
      )
    }
  )
})

describe("kiln.json nested past any depth kiln.json needs", () => {
  // Parsing and checking walk the value recursively: nested this deep, either overflowed the stack (a RangeError
  // with a stack trace, exit 1) instead of one line naming the file.
  const deep = (n: number) => "[".repeat(n) + "]".repeat(n)
  it("is one line at the place it gets too deep, as JSON or as JSONC", () => {
    for (const text of [`{"processes":${deep(200_000)}}`, `// a comment\n${deep(200_000)}`]) {
      const parsed = Config.parse("kiln.json", text)
      assert.isTrue(Either.isLeft(parsed))
      const headline = Either.isLeft(parsed) ? parsed.left.message.split("\n")[0]! : ""
      assert.match(headline, /^kiln\.json:\d+:\d+: .*nested more than 64 levels deep: kiln\.json is a few$/)
    }
    // Brackets inside strings and comments are not levels.
    const json = `{ "processes": { "a": { "argv": ["${"[".repeat(100)}"] } } } /* ${"{".repeat(100)} */`
    assert.isTrue(Either.isRight(Config.parse("kiln.json", json)))
  })
})

describe("the rest of a config's errors, past the schema's", () => {
  it("a refused value under a key that names a prototype salvages nothing and touches no prototype", () => {
    const text = `{"processes":{"__proto__":{"argv":5},"constructor":{"argv":6},"a":{"argv":["x"],"deps":["zz"]}}}`
    const parsed = Config.parse("kiln.json", text)
    assert.isTrue(Either.isLeft(parsed))
    assert.isUndefined((Object.prototype as Record<string, unknown>).argv)
    assert.isUndefined(Config.salvaged(text))
    assert.isFunction(({}).constructor)
  })
})
