/**
 * Issue #38 §5 through the built CLI on real runs: a process that succeeds without making a declared output is
 * warned of by name, its result is not cached (the next run runs it again, neither the action cache nor the run memo
 * vouching for it), and an output declared with a leading `?` may be left unmade; kiln.json's declaration checks are
 * one line naming the field, exit 2, before anything runs.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"
import { summarizedCli } from "../utils/stack.js"
import { tempDir, writeTree } from "../utils/temp.js"

interface Summary {
  readonly processes: ReadonlyArray<{ name: string; source: string }>
}

const sh = (script: string, fields: Record<string, unknown> = {}) => ({
  argv: ["/bin/sh", "-c", script],
  env: { PATH: "/usr/bin:/bin" },
  ...fields
})

const workspace = (processes: Record<string, unknown>) =>
  Effect.gen(function*() {
    const root = yield* tempDir("kiln-declared-")
    const ws = path.join(root, "ws")
    writeTree(ws, { "kiln.json": JSON.stringify({ processes }), "src/a.txt": "a\n" })
    const kiln = summarizedCli<Summary>(root, ws)
    return { ws, kiln }
  })

const sourceOf = (s: Summary | undefined, name: string) => s?.processes.find((p) => p.name === name)?.source

describe("declared outputs", () => {
  it.scoped("one not made: a warning naming it, and the result is not cached; `?` makes it optional", () =>
    Effect.gen(function*() {
      const { kiln, ws } = yield* workspace({
        forgets: sh("mkdir -p dist && cp src/a.txt dist/a.txt", { inputs: ["src/**"], outputs: ["dist/", "types/"] }),
        optional: sh("cp src/a.txt out.txt", { inputs: ["src/**"], outputs: ["out.txt", "?coverage/"] })
      })
      const first = kiln(["run"])
      assert.strictEqual(first.code, 0, first.stderr)
      assert.include(
        first.stderr,
        "forgets: declared output types/ was not made: its result is not cached (an output it may leave unmade is " +
          "declared with a leading ?: \"?types/\")"
      )
      assert.notInclude(first.stderr, "optional: declared")
      // What it did make is written back all the same.
      assert.strictEqual(fs.readFileSync(path.join(ws, "dist/a.txt"), "utf8"), "a\n")
      const second = kiln(["run"])
      assert.strictEqual(second.code, 0, second.stderr)
      assert.strictEqual(sourceOf(second.summary, "forgets"), "ran")
      assert.notStrictEqual(sourceOf(second.summary, "optional"), "ran")
    }))

  it.scoped("two processes declaring one output, and a glob taking another's outputs without a dep: exit 2", () =>
    Effect.gen(function*() {
      const twice = yield* workspace({
        a: sh("echo a > gen.txt", { outputs: ["gen.txt"] }),
        b: sh("echo b > gen.txt", { outputs: ["gen.txt"] })
      })
      const r = twice.kiln(["run"])
      assert.strictEqual(r.code, 2, r.stderr)
      assert.match(
        r.stderr,
        /^kiln: kiln\.json:\d+:\d+: processes\.b\.outputs\[0\]: gen\.txt is also an output of "a"/m
      )
      const undeclared = yield* workspace({
        compile: sh("mkdir -p dist && echo x > dist/x.js", { outputs: ["dist/"] }),
        test: sh("true", { inputs: ["src/**", "dist/**"] })
      })
      const u = undeclared.kiln(["run"])
      assert.strictEqual(u.code, 2, u.stderr)
      assert.match(
        u.stderr,
        /^kiln: kiln\.json:\d+:\d+: processes\.test\.inputs\[1\]: "dist\/\*\*" takes dist\/, an output of "compile": add "compile" to deps/m
      )
    }))
})
