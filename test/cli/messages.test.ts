/**
 * What a user sees of kiln.json and the command line (#38 §4), through the built CLI: a kiln.json with comments and
 * trailing commas runs, and a no-op run of it is answered from the run memo; its errors, every one, are said at their
 * line and column, exit 2.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"
import { runCli } from "../utils/cliRun.js"
import { tempDir } from "../utils/temp.js"

/** A workspace in a temp dir, its store, sandboxes and locks beside it; `kiln` runs the CLI in `cwd` (default: it). */
const workspace = Effect.gen(function*() {
  const root = yield* tempDir("kiln-messages-")
  const ws = path.join(root, "ws")
  fs.mkdirSync(ws)
  fs.mkdirSync(path.join(root, "sandboxes"))
  const env = {
    ...process.env,
    HOME: root,
    KILN_STORE_DIR: path.join(root, "store"),
    KILN_SANDBOX_ROOT: path.join(root, "sandboxes"),
    KILN_NAMED_CACHES_DIR: path.join(root, "named"),
    KILN_LOCK_DIR: path.join(root, "locks")
  }
  const kiln = (args: ReadonlyArray<string>, cwd = ws, extra: NodeJS.ProcessEnv = {}) =>
    runCli(args, { cwd, env: { ...env, ...extra } })
  return { root, ws, kiln }
})

const JSONC = `{
  // kiln.json may hold comments
  "processes": {
    "gen": {
      "argv": ["/bin/sh", "-c", "echo gen > out.txt"], /* and block comments */
      "outputs": ["out.txt",],
      "env": { "PATH": "/usr/bin:/bin", },
    },
  },
}
`

describe("kiln.json as JSONC", () => {
  it.scoped("comments and trailing commas: it runs, and the next run is answered by the no-op check", () =>
    Effect.gen(function*() {
      const { kiln, ws } = yield* workspace
      fs.writeFileSync(path.join(ws, "kiln.json"), JSONC)
      const first = yield* kiln(["run"])
      assert.strictEqual(first.code, 0, first.stderr)
      assert.strictEqual(fs.readFileSync(path.join(ws, "out.txt"), "utf8"), "gen\n")
      const again = yield* kiln(["run"], ws, { KILN_NOOP_DEBUG: "1" })
      assert.strictEqual(again.code, 0, again.stderr)
      assert.include(again.stderr, "kiln: no-op check: nothing changed")
    }))

  it.scoped("every error of the file, each at its line and column with the line and a caret: exit 2", () =>
    Effect.gen(function*() {
      const { kiln, ws } = yield* workspace
      fs.writeFileSync(
        path.join(ws, "kiln.json"),
        `{\n  "processes": {\n    "gen": { "argv": "node gen.mjs", "ouputs": [] }, // two errors\n  },\n}\n`
      )
      const r = yield* kiln(["run"])
      assert.strictEqual(r.code, 2)
      assert.strictEqual(
        r.stderr,
        [
          "kiln: kiln.json:3:22: processes.gen.argv: expected an array of strings, e.g. [\"node\", \"gen.mjs\"]",
          "      \"gen\": { \"argv\": \"node gen.mjs\", \"ouputs\": [] }, // two errors",
          "                       ^",
          "kiln: kiln.json:3:38: processes.gen.ouputs: unknown field: did you mean \"outputs\"?",
          "      \"gen\": { \"argv\": \"node gen.mjs\", \"ouputs\": [] }, // two errors",
          "                                       ^",
          ""
        ].join("\n")
      )
    }))
})

describe("kiln.json found from any subdirectory", () => {
  it.scoped("a run from a directory below the workspace reads its kiln.json; paths stay relative to the workspace", () =>
    Effect.gen(function*() {
      const { kiln, ws } = yield* workspace
      fs.writeFileSync(path.join(ws, "kiln.json"), JSONC)
      const below = path.join(ws, "a", "b")
      fs.mkdirSync(below, { recursive: true })
      const r = yield* kiln(["run"], below)
      assert.strictEqual(r.code, 0, r.stderr)
      assert.isTrue(fs.existsSync(path.join(ws, "out.txt")))
      assert.isFalse(fs.existsSync(path.join(below, "out.txt")))
      // The no-op check finds it the same way.
      const again = yield* kiln(["run"], below, { KILN_NOOP_DEBUG: "1" })
      assert.include(again.stderr, "kiln: no-op check: nothing changed")
      const ls = yield* kiln(["ls"], below)
      assert.strictEqual(ls.code, 0, ls.stderr)
      assert.match(ls.stdout, /^gen +\/bin\/sh/)
    }))

  it.scoped("none here or above: says where it looked and where to read, exit 2", () =>
    Effect.gen(function*() {
      const { kiln, ws } = yield* workspace
      for (const args of [["run"], ["ls"], ["run", "--progress", "plain"]]) {
        const r = yield* kiln(args)
        assert.strictEqual(r.code, 2, r.stderr)
        assert.strictEqual(
          r.stderr,
          `kiln: no kiln.json in ${ws} or above: see README.md#kiln-run-and-kilnjson (or name one with --config FILE)\n`
        )
      }
    }))

  it.scoped("--config names the file: no walk", () =>
    Effect.gen(function*() {
      const { kiln, ws } = yield* workspace
      fs.writeFileSync(path.join(ws, "kiln.json"), JSONC)
      const below = path.join(ws, "sub")
      fs.mkdirSync(below)
      const r = yield* kiln(["run", "--config", "kiln.json"], below)
      assert.strictEqual(r.code, 2)
      assert.strictEqual(r.stderr, `kiln: ${path.join(below, "kiln.json")}: cannot read: ENOENT\n`)
    }))
})

describe("the command line's errors, in kiln's words", () => {
  const cases: ReadonlyArray<[ReadonlyArray<string>, string]> = [
    [["run", "--trace"], "kiln: --trace needs a value: `kiln run --trace FILE`"],
    [["run", "--trace", "--keep-going"], "kiln: --trace needs a value: `kiln run --trace FILE`"],
    [
      ["run", "--cache", "rw"],
      "kiln: --cache: \"rw\" is not one of read-write, read, write or off (`kiln run --cache read-write|read|write|off`)"
    ],
    [["run", "--concurrency=abc"], "kiln: --concurrency: \"abc\" is not an integer (`kiln run --concurrency N`)"],
    [
      ["run", "--keep-going=maybe"],
      "kiln: --keep-going takes no value: `--keep-going` alone (or --keep-going=true|false), not `--keep-going=maybe`"
    ],
    [
      ["run", "--concurency", "2"],
      "kiln: unknown option --concurency of `kiln run`: did you mean `--concurrency`? (`kiln run --help` lists them)"
    ],
    [["run", "--log-level", "debug"], "kiln: --log-level goes before the command: `kiln --log-level … run`"],
    [["expalin"], "kiln: unknown command \"expalin\": did you mean `kiln explain`?"],
    [["gne"], "kiln: unknown command \"gne\": did you mean `kiln run gen`?"],
    [["gen"], "kiln: unknown command \"gen\": did you mean `kiln run gen`?"],
    [
      ["bild"],
      "kiln: unknown command \"bild\": the commands are run, ls, graph, explain, logs, verify, exec, store, schema, clean or remote (`kiln --help`)"
    ]
  ]
  for (const [args, line] of cases) {
    it.scoped(`kiln ${args.join(" ")}`, () =>
      Effect.gen(function*() {
        const { kiln, ws } = yield* workspace
        fs.writeFileSync(path.join(ws, "kiln.json"), JSONC)
        const r = yield* kiln(args)
        assert.strictEqual(r.code, 2, r.stderr)
        assert.strictEqual(r.stderr, `${line}\n`)
        assert.notInclude(r.stderr, "sandboxer")
      }))
  }

  it.scoped("another command's integer: said as run's is (test/cli/helpText.test.ts has every command's)", () =>
    Effect.gen(function*() {
      const { kiln, ws } = yield* workspace
      const r = yield* kiln(["store", "stats", "--store-max-readers", "abc"], ws)
      assert.strictEqual(r.code, 2, r.stderr)
      assert.strictEqual(
        r.stderr,
        "kiln: --store-max-readers: \"abc\" is not an integer (`kiln store stats --store-max-readers N`)\n"
      )
    }))

  it.scoped("--keep-going=yes is --keep-going; --summary - writes the summary to stdout", () =>
    Effect.gen(function*() {
      const { kiln, ws } = yield* workspace
      const PATH = "/usr/bin:/bin"
      fs.writeFileSync(
        path.join(ws, "kiln.json"),
        JSON.stringify({
          processes: {
            a: { argv: ["/bin/sh", "-c", "exit 3"], env: { PATH } },
            b: { argv: ["/bin/sh", "-c", "echo b > b.txt"], outputs: ["b.txt"], env: { PATH } },
            c: { argv: ["/bin/sh", "-c", "echo c > c.txt"], outputs: ["c.txt"], deps: ["a"], env: { PATH } }
          }
        })
      )
      const r = yield* kiln(["run", "--keep-going=yes", "--concurrency", "1", "--summary", "-"])
      assert.strictEqual(r.code, 1, r.stderr)
      assert.isTrue(fs.existsSync(path.join(ws, "b.txt")))
      assert.isFalse(fs.existsSync(path.join(ws, "-")))
      const summary = JSON.parse(r.stdout) as { processes: ReadonlyArray<{ name: string; source: string }> }
      assert.deepStrictEqual(summary.processes.map((p) => p.name).sort(), ["a", "b", "c"])
    }))
})

describe("a missing literal input", () => {
  it.scoped("is a config error before anything runs: exit 2, every one named; a dep's output is not missing", () =>
    Effect.gen(function*() {
      const { kiln, ws } = yield* workspace
      const PATH = "/usr/bin:/bin"
      fs.writeFileSync(path.join(ws, "here.txt"), "here")
      fs.writeFileSync(
        path.join(ws, "kiln.json"),
        JSON.stringify({
          processes: {
            first: { argv: ["/bin/sh", "-c", "echo ran > first.txt"], outputs: ["first.txt"], env: { PATH } },
            gen: { argv: ["/bin/sh", "-c", "mkdir -p gen && echo g > gen/g.txt"], outputs: ["gen/"], env: { PATH } },
            use: {
              argv: ["/bin/sh", "-c", "cat here.txt gen/g.txt > use.txt"],
              inputs: ["here.txt", "confg.json", "gen/g.txt", "tools/"],
              deps: ["gen", "first"],
              outputs: ["use.txt"],
              env: { PATH }
            }
          }
        })
      )
      const r = yield* kiln(["run"])
      assert.strictEqual(r.code, 2, r.stderr)
      assert.deepStrictEqual(r.stderr.split("\n").filter((l) => l !== ""), [
        "kiln: kiln.json: processes.use.inputs[1]: \"confg.json\" does not exist in the workspace (an input that names " +
        "a path must be there before the run; one that may be absent goes in optionalInputs)",
        "kiln: kiln.json: processes.use.inputs[3]: \"tools/\" does not exist in the workspace (an input that names a " +
        "path must be there before the run; one that may be absent goes in optionalInputs)"
      ])
      assert.isFalse(fs.existsSync(path.join(ws, "first.txt")), "nothing ran")
    }))
})

describe("help and completions", () => {
  it.scoped("ls, explain and remote have help written as kiln --help is: grouped, one line per option", () =>
    Effect.gen(function*() {
      const { kiln, ws } = yield* workspace
      for (const args of [["ls"], ["explain"], ["remote", "status"], ["remote", "flush"], ["run"], ["exec"]]) {
        const r = yield* kiln([...args, "--help"], ws)
        assert.strictEqual(r.code, 0, r.stderr)
        const lines = r.stdout.split("\n")
        assert.strictEqual(lines[0]!.startsWith(`kiln ${args.join(" ")}: `), true, lines[0])
        assert.isBelow(lines.length, 60, args.join(" "))
        assert.include(r.stdout, "\nUsage: kiln ")
        // One line an option: every line under a heading is `  --flag …  description`, or, under a group another
        // help describes (`explain`'s remote options, described by `kiln run --help`), names only: `  --a, --b`.
        const options = lines.filter((l) => l.startsWith("  "))
        assert.isAbove(options.length, 0)
        for (const l of options) assert.match(l, /^ {2}(--[a-z-]+( \S+)? {2,}\S|--[a-z-]+(, --[a-z-]+)*,?$)/)
      }
    }))

  it.scoped("kiln --completions bash prints a script that completes kiln's commands", () =>
    Effect.gen(function*() {
      const { kiln, ws, root } = yield* workspace
      const r = yield* kiln(["--completions", "bash"], ws)
      assert.strictEqual(r.code, 0, r.stderr)
      fs.writeFileSync(path.join(root, "kiln.bash"), r.stdout)
      const { spawnSync } = yield* Effect.promise(() => import("node:child_process"))
      const completed = spawnSync("bash", [
        "-c",
        `source ${path.join(root, "kiln.bash")}; COMP_WORDS=(kiln exp); COMP_CWORD=1; ` +
        "_kiln_bash_completions kiln; echo \"${COMPREPLY[@]}\""
      ], { encoding: "utf8" })
      assert.strictEqual(completed.stdout.trim(), "explain", completed.stderr)
    }))
})

describe("optionalInputs", () => {
  it.scoped("may be absent; once there, they are inputs: the process runs again, and the no-op check does not answer", () =>
    Effect.gen(function*() {
      const { kiln, ws } = yield* workspace
      const PATH = "/usr/bin:/bin"
      fs.writeFileSync(
        path.join(ws, "kiln.json"),
        JSON.stringify({
          processes: {
            read: {
              argv: ["/bin/sh", "-c", "cat local.env 2>/dev/null > got.txt; true"],
              optionalInputs: ["local.env", "extra/**"],
              outputs: ["got.txt"],
              env: { PATH }
            }
          }
        })
      )
      const first = yield* kiln(["run"])
      assert.strictEqual(first.code, 0, first.stderr)
      assert.strictEqual(fs.readFileSync(path.join(ws, "got.txt"), "utf8"), "")
      fs.writeFileSync(path.join(ws, "local.env"), "A=1\n")
      const second = yield* kiln(["run"], ws, { KILN_NOOP_DEBUG: "1" })
      assert.strictEqual(second.code, 0, second.stderr)
      assert.notInclude(second.stderr, "nothing changed")
      assert.strictEqual(fs.readFileSync(path.join(ws, "got.txt"), "utf8"), "A=1\n")
      const third = yield* kiln(["run"], ws, { KILN_NOOP_DEBUG: "1" })
      assert.include(third.stderr, "kiln: no-op check: nothing changed")
    }))

  it.scoped("a path outside the workspace is refused as an input's is", () =>
    Effect.gen(function*() {
      const { kiln, ws } = yield* workspace
      fs.writeFileSync(
        path.join(ws, "kiln.json"),
        JSON.stringify({ processes: { a: { argv: ["/bin/true"], optionalInputs: ["../x"] } } })
      )
      const r = yield* kiln(["run"])
      assert.strictEqual(r.code, 2)
      assert.match(r.stderr, /^kiln: kiln\.json:1:\d+: processes\.a\.optionalInputs\[0\]: invalid glob "\.\.\/x"/)
    }))
})

describe("an unknown process on the command line", () => {
  it.scoped("suggests the nearest name", () =>
    Effect.gen(function*() {
      const { kiln, ws } = yield* workspace
      fs.writeFileSync(path.join(ws, "kiln.json"), JSONC)
      for (const args of [["run", "gne"], ["explain", "gne"]]) {
        const r = yield* kiln(args)
        assert.strictEqual(r.code, 2, r.stderr)
        assert.strictEqual(r.stderr, "kiln: kiln.json: unknown process \"gne\": did you mean \"gen\"?\n")
      }
    }))
})
