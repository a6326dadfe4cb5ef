/**
 * Issue #38 §5 through the built CLI on real runs: a process that leaves files in its sandbox that are neither its
 * declared outputs nor its inputs gets one line at the end of the run (not for a cache hit or a failure, nor with
 * `--quiet`), and `--summary` gives each process's `undeclaredWrites`; a named cache, a writable input and the
 * declared outputs are not reported, and a process that writes thousands of files is counted up to a bound.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"
import { summarizedCli } from "../utils/stack.js"
import { tempDir, writeTree } from "../utils/temp.js"

interface Undeclared {
  readonly count: number
  readonly sample: ReadonlyArray<string>
  readonly truncated?: boolean
}

interface Summary {
  readonly processes: ReadonlyArray<{ name: string; source: string; undeclaredWrites: Undeclared | null }>
}

const sh = (script: string, fields: Record<string, unknown> = {}) => ({
  argv: ["/bin/sh", "-c", script],
  env: { PATH: `${path.dirname(process.execPath)}:/usr/bin:/bin` },
  ...fields
})

const workspace = (processes: Record<string, unknown>) =>
  Effect.gen(function*() {
    const root = yield* tempDir("kiln-undeclared-")
    const ws = path.join(root, "ws")
    writeTree(ws, {
      "kiln.json": JSON.stringify({ processes }),
      "src/a.txt": "a\n",
      "data/state.txt": "0\n"
    })
    const run = summarizedCli<Summary>(root, ws)
    const kiln = (args: ReadonlyArray<string>) => run(["run", ...args])
    return { ws, kiln }
  })

const fieldOf = (s: Summary | undefined, name: string) => s?.processes.find((p) => p.name === name)?.undeclaredWrites

const processes = {
  gen: sh("mkdir -p gen && echo x > gen/out.txt && echo y > gen/extra.txt", {
    inputs: ["src/**"],
    outputs: ["gen/out.txt"]
  }),
  // Only what it declares, its named cache and its writable input: nothing to report.
  tidy: sh(
    "mkdir -p dist/sub && cp src/a.txt dist/sub/a.txt && cp src/a.txt b.txt && echo c > .cache/c.txt && " +
      "echo 1 > data/state.txt && echo t > data/new.txt",
    {
      inputs: ["src/**", "data/**"],
      outputs: ["dist/", "b.txt"],
      namedCaches: { tidy: ".cache" },
      writableInputs: ["data"]
    }
  )
}

describe("files written outside the declared outputs", () => {
  it.scoped("one line per process that wrote any, none for a hit or with --quiet; --summary has the field", () =>
    Effect.gen(function*() {
      const { kiln, ws } = yield* workspace(processes)
      const first = kiln([])
      assert.strictEqual(first.code, 0, first.stderr)
      assert.include(first.stderr, "\ngen wrote 1 file that is not among its outputs: gen/extra.txt\nkiln: 2 processes")
      assert.notInclude(first.stderr, "tidy wrote", first.stderr)
      assert.deepStrictEqual(fieldOf(first.summary, "gen"), { count: 1, sample: ["gen/extra.txt"] })
      assert.strictEqual(fieldOf(first.summary, "tidy"), null)
      // The declared output is written back; the other file is not.
      assert.strictEqual(fs.readFileSync(path.join(ws, "gen/out.txt"), "utf8"), "x\n")
      assert.isFalse(fs.existsSync(path.join(ws, "gen/extra.txt")))

      // Through the engine (--trace is not read by the run memo's direct answer), whose hit did not run.
      const hit = kiln(["--trace", path.join(ws, "..", "trace.json")])
      assert.strictEqual(hit.code, 0, hit.stderr)
      assert.include(hit.stderr, "✓ gen (cached)")
      assert.notInclude(hit.stderr, "not among its outputs", hit.stderr)
      assert.strictEqual(hit.summary?.processes.find((p) => p.name === "gen")?.source, "cache-hit")
      assert.strictEqual(fieldOf(hit.summary, "gen"), null)

      const quiet = kiln(["--cache", "off", "--quiet"])
      assert.strictEqual(quiet.code, 0, quiet.stderr)
      assert.notInclude(quiet.stderr, "not among its outputs", quiet.stderr)
      assert.deepStrictEqual(fieldOf(quiet.summary, "gen"), { count: 1, sample: ["gen/extra.txt"] })
    }))

  it.scoped("a failure is not looked at: its line is what matters, and nothing of it is written back anyway", () =>
    Effect.gen(function*() {
      const { kiln } = yield* workspace({ fails: sh("echo y > extra.txt; exit 3", { outputs: ["out.txt"] }) })
      const r = kiln([])
      assert.strictEqual(r.code, 1, r.stderr)
      assert.include(r.stderr, "✗ fails exit 3")
      assert.notInclude(r.stderr, "not among its outputs", r.stderr)
      assert.strictEqual(fieldOf(r.summary, "fails"), null)
    }))

  it.scoped("many files: counted, a few named; a process that writes past the bound is counted up to it", () =>
    Effect.gen(function*() {
      const write = (n: number, out: string) =>
        `node -e 'const fs = require("fs"); fs.mkdirSync("junk"); ` +
        `for (let i = 0; i < ${n}; i++) fs.writeFileSync("junk/f" + String(i).padStart(5, "0"), "")' && echo > ${out}`
      const { kiln } = yield* workspace({
        some: sh(write(5, "some.txt"), { outputs: ["some.txt"] }),
        flood: sh(write(10_050, "flood.txt"), { outputs: ["flood.txt"] })
      })
      const r = kiln([])
      assert.strictEqual(r.code, 0, r.stderr)
      assert.include(
        r.stderr,
        "some wrote 5 files that are not among its outputs: junk/f00000, junk/f00001, junk/f00002, …\n"
      )
      assert.match(
        r.stderr,
        /\nflood wrote at least \d+ files that are not among its outputs: junk\/f\d{5}, junk\/f\d{5}, junk\/f\d{5}, …\n/
      )
      const flood = fieldOf(r.summary, "flood")!
      assert.isTrue(flood.truncated, JSON.stringify(flood))
      assert.isAtMost(flood.count, 10_000)
      assert.strictEqual(flood.sample.length, 10)
    }))
})
