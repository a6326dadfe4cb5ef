/**
 * Every command's `--help` is kiln's own, written from the command's table (`commandTable.ts`), and its usage errors
 * are said in one line, the same way for every command (#38 §4): each parser takes exactly the options its help
 * lists, and the built CLI answers `--help`, an unknown option, a bad value and a missing argument as `kiln run` does.
 */
import * as Command from "@effect/cli/Command"
import type * as Usage from "@effect/cli/Usage"
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import * as path from "node:path"
import { clean } from "../../src/programs/kiln/commands/cleanCommand.js"
import { exec } from "../../src/programs/kiln/commands/execCommand.js"
import { graph } from "../../src/programs/kiln/commands/graphCommand.js"
import { ls } from "../../src/programs/kiln/commands/lsCommand.js"
import { flush, status } from "../../src/programs/kiln/commands/remoteCommands.js"
import { explain, logs, run, schema } from "../../src/programs/kiln/commands/runCommand.js"
import { storeCommands } from "../../src/programs/kiln/commands/storeCommands.js"
import { verify } from "../../src/programs/kiln/commands/verifyCommand.js"
import { COMMAND_SPECS } from "../../src/programs/kiln/commandTable.js"
import { commandHelp } from "../../src/programs/kiln/help.js"
import { flagsOf, readArgs } from "../../src/programs/kiln/usage.js"
import { runCli } from "../utils/cliRun.js"
import { tempDir } from "../utils/temp.js"

/** Every command's parser, by its words. */
const PARSERS: Record<string, Command.Command<string, never, unknown, unknown>> = {
  run,
  ls,
  graph,
  explain,
  logs,
  verify,
  exec,
  schema,
  clean,
  ...Object.fromEntries(Object.entries(storeCommands).map(([name, command]) => [`store ${name}`, command])),
  "remote status": status,
  "remote flush": flush
} as Record<string, Command.Command<string, never, unknown, unknown>>

/** The flags a parser reads, from its usage. */
const flagsIn = (usage: Usage.Usage): Array<string> => {
  switch (usage._tag) {
    case "Named":
      return usage.names.filter((n) => n.startsWith("-"))
    case "Optional":
    case "Repeated":
      return flagsIn(usage.usage)
    case "Alternation":
    case "Concat":
      return [...flagsIn(usage.left), ...flagsIn(usage.right)]
    default:
      return []
  }
}

const sorted = (flags: Iterable<string>) => [...new Set(flags)].sort()

describe("each command's help, from its table", () => {
  it("every command has a table, and its parser takes exactly the options the table (and so its help) lists", () => {
    assert.deepStrictEqual(Object.keys(PARSERS).sort(), Object.keys(COMMAND_SPECS).sort())
    for (const [words, parser] of Object.entries(PARSERS)) {
      assert.deepStrictEqual(sorted(flagsIn(Command.getUsage(parser))), sorted(flagsOf(words)), words)
    }
  })

  it("the help names every option of the table: described one a line, or named where another help describes it", () => {
    for (const [words, spec] of Object.entries(COMMAND_SPECS)) {
      const help = commandHelp(words)!
      const named = new Set(help.match(/--[a-z][a-z-]*/g) ?? [])
      for (const option of spec.groups.flatMap((g) => g.options)) assert.isTrue(named.has(`--${option.flag}`), words)
      // The store options are named once, in `kiln --help`.
      assert.strictEqual(help.includes("store options too (`kiln --help`)"), spec.store, words)
      assert.isBelow(help.split("\n").length, 50, words)
    }
  })

  it("--help or -h anywhere before `--` is the command's help; a bare group is its list, exit 2", () => {
    assert.deepStrictEqual(readArgs(["store", "gc", "--json", "--help"], false), {
      _tag: "Help",
      text: commandHelp("store gc")!,
      code: 0
    })
    assert.deepStrictEqual(readArgs(["exec", "-h", "/bin/true"], false)?._tag, "Help")
    assert.isUndefined(readArgs(["exec", "--", "/bin/echo", "--help"], false))
    const list = readArgs(["remote", "--help"], false)
    assert.strictEqual(list?._tag, "Help")
    assert.deepStrictEqual(readArgs(["remote"], false), {
      ...(list as { readonly _tag: "Help"; readonly text: string }),
      code: 2
    })
  })

  it("a `--log-level` before or between the command's words is read past", () => {
    assert.deepStrictEqual(readArgs(["--log-level", "debug", "store", "gcc"], false), {
      _tag: "Problem",
      message: "unknown command \"gcc\" of `kiln store`: did you mean `kiln store gc`?"
    })
    // As a bare `kiln`: the short help, exit 2.
    assert.deepStrictEqual(readArgs(["--log-level", "debug"], false), readArgs([], false))
  })

  it("what @effect/cli reads itself passes: its global options, a program's own options after it", () => {
    for (
      const args of [
        ["store", "stats", "--log-level", "debug"],
        ["--log-level", "debug", "store", "stats"],
        ["store", "--log-level=debug", "stats"],
        ["store", "stats", "--completions", "bash"],
        ["--completions", "bash"],
        ["exec", "--env", "A=1", "B=2", "/bin/ls", "-la", "--color"],
        ["store", "stats", "--json", "true"],
        ["ls", "--affected=:default", "gen"],
        ["sandboxer", "--socket", "s"]
      ]
    ) {
      assert.isUndefined(readArgs(args, false), args.join(" "))
    }
  })
})

/** The built CLI in an empty directory, its store and sandboxes in it. */
const cliIn = Effect.gen(function*() {
  const root = yield* tempDir("kiln-help-")
  const env = {
    ...process.env,
    HOME: root,
    KILN_STORE_DIR: path.join(root, "store"),
    KILN_SANDBOX_ROOT: path.join(root, "sandboxes")
  }
  return (args: ReadonlyArray<string>) => runCli(args, { cwd: root, env })
})

describe("the built CLI", () => {
  it.scoped("every command's --help is short, kiln's own, and exits 0", () =>
    Effect.gen(function*() {
      const kiln = yield* cliIn
      for (const words of [...Object.keys(COMMAND_SPECS), "store", "remote"]) {
        const r = yield* kiln([...words.split(" "), "--help"])
        assert.strictEqual(r.code, 0, `${words}: ${r.stderr}`)
        assert.isTrue(r.stdout.startsWith(`kiln ${words}: `), words)
        assert.include(r.stdout, "\nUsage: kiln ")
        assert.notInclude(r.stdout, "A user-defined piece of text", words)
        assert.notInclude(r.stdout, "This setting is optional", words)
        assert.isBelow(r.stdout.split("\n").length, 50, words)
      }
    }))

  const cases: ReadonlyArray<readonly [ReadonlyArray<string>, string]> = [
    [["exec", "--bogus"], "kiln: unknown option --bogus of `kiln exec` (`kiln exec --help` lists them)"],
    [
      ["exec", "--jsn", "/bin/true"],
      "kiln: unknown option --jsn of `kiln exec`: did you mean `--json`? (`kiln exec --help` lists them)"
    ],
    [
      ["store", "gc", "--jsno"],
      "kiln: unknown option --jsno of `kiln store gc`: did you mean `--json`? (`kiln store gc --help` lists them)"
    ],
    [["verify", "--bogus"], "kiln: unknown option --bogus of `kiln verify` (`kiln verify --help` lists them)"],
    [
      ["clean", "--kep"],
      "kiln: unknown option --kep of `kiln clean`: did you mean `--kept`? (`kiln clean --help` lists them)"
    ],
    [
      ["exec", "--cache", "sometimes", "/bin/true"],
      "kiln: --cache: \"sometimes\" is not one of successful, always or never (`kiln exec --cache successful|always|never`)"
    ],
    [["verify", "--sample", "x"], "kiln: --sample: \"x\" is not an integer (`kiln verify --sample N`)"],
    [
      ["store", "stats", "--store-max-readers", "abc"],
      "kiln: --store-max-readers: \"abc\" is not an integer (`kiln store stats --store-max-readers N`)"
    ],
    [["exec", "--env", "X", "/bin/true"], "kiln: --env: \"X\" is not NAME=VALUE (`kiln exec --env NAME=VALUE`)"],
    [["graph", "--format"], "kiln: --format needs a value: `kiln graph --format dot|mermaid|json`"],
    [
      ["store", "gc", "--target-size", "12Q"],
      "kiln: --target-size: invalid size `12Q`: expected a number of bytes with an optional unit (K, M, G, T) " +
      "(`kiln store gc --help`)"
    ],
    [
      ["exec", "--timeout", "5x", "/bin/true"],
      "kiln: --timeout: invalid duration `5x`: expected a number and a unit (ms, s, m, h), e.g. 90s " +
      "(`kiln exec --help`)"
    ],
    [["exec"], "kiln: `kiln exec` needs PROGRAM: `kiln exec [OPTIONS…] [--] PROGRAM [ARG…]`"],
    [["logs"], "kiln: `kiln logs` needs NAME: `kiln logs NAME [OPTIONS…]`"],
    [["clean", "now"], "kiln: `kiln clean` takes no arguments, not \"now\": `kiln clean [OPTIONS…]`"],
    [["store", "gcc"], "kiln: unknown command \"gcc\" of `kiln store`: did you mean `kiln store gc`?"],
    [
      ["remote", "push"],
      "kiln: unknown command \"push\" of `kiln remote`: the remote commands are status or flush (`kiln remote --help`)"
    ],
    [
      ["--wizard"],
      "kiln: --wizard is not one of kiln's options: `kiln --help` lists the commands, `kiln COMMAND --help` every " +
      "option a command takes"
    ]
  ]
  for (const [args, line] of cases) {
    it.scoped(`kiln ${args.join(" ")}: one line, exit 2`, () =>
      Effect.gen(function*() {
        const kiln = yield* cliIn
        const r = yield* kiln(args)
        assert.strictEqual(r.code, 2, r.stderr)
        assert.strictEqual(r.stderr, `${line}\n`)
        assert.strictEqual(r.stdout, "")
      }))
  }

  it.scoped("what only the parser can judge is said in one line too, naming the command", () =>
    Effect.gen(function*() {
      const kiln = yield* cliIn
      const missing = yield* kiln(["exec", "--input-dir", "/nonexistent/kiln-dir", "/bin/true"])
      assert.strictEqual(missing.code, 2, missing.stderr)
      assert.strictEqual(missing.stderr, "kiln: /nonexistent/kiln-dir does not exist (`kiln exec --help`)\n")
      const digest = yield* kiln(["store", "cat", "abc"])
      assert.strictEqual(digest.code, 2, digest.stderr)
      assert.match(digest.stderr, /^kiln: invalid digest `abc`: .* \(`kiln store cat --help`\)\n$/)
      // A handler's usage error was not said at all.
      const both = yield* kiln([
        "exec",
        "--input",
        "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855/0",
        "--input-dir",
        "/",
        "/bin/true"
      ])
      assert.strictEqual(both.code, 2, both.stderr)
      assert.strictEqual(both.stderr, "kiln: --input and --input-dir are exclusive (`kiln exec --help`)\n")
    }))
})
