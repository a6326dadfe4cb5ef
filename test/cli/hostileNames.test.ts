/**
 * Process names that would print what kiln did not say (red team V9): a name holding ESC, BEL, a newline or any other
 * C0 control, DEL or a C1 control reaches the terminal in the status line, `✓ name` and the tally, where it redraws
 * the screen or forges a kiln line ("kiln: 0 processes failed"). Such a name, and a dep naming one, is refused by
 * `Config.parse` as one line naming the process (escaped, so the error line is itself safe) and the field, then the
 * file's line (escaped too) and a caret; the CLI exits 2 and prints that and nothing else. So are an empty name and one with leading or trailing whitespace,
 * which would print as another process's.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Either } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"
import * as Config from "../../src/domain/config/Config.js"
import { failsWith, runCli } from "../utils/cliRun.js"
import { cliEnvIn } from "../utils/stack.js"
import { tempDir } from "../utils/temp.js"

const FORGED = "x\u001b[2J\nkiln: 0 processes failed"

const ok = { argv: ["/bin/sh", "-c", "echo ok > o.txt"], outputs: ["o.txt"], env: { PATH: "/usr/bin:/bin" } }

/** The text of a config whose processes are `processes`. */
const configOf = (processes: Record<string, unknown>) => JSON.stringify({ processes })

/** No control character at all in what kiln would print: only their escapes. */
const printable = (line: string) => assert.notMatch(line, /[\u0000-\u001f\u007f-\u009f]/, JSON.stringify(line))

/**
 * Config.parse's refusal of `text`, its first line without the `:LINE:COL` (the file's line and a caret follow it, each
 * line printable too), or a failure when it was accepted.
 */
const refusal = (text: string): string => {
  const parsed = Config.parse("kiln.json", text)
  if (Either.isRight(parsed)) return assert.fail(`accepted: ${text}`)
  const lines = parsed.left.message.split("\n")
  for (const line of lines) printable(line)
  return lines[0]!.replace(/^kiln\.json:\d+:\d+: /, "kiln.json: ")
}

describe("Config.parse, hostile process names", () => {
  it("a name with ESC and a newline: the process, escaped, and the character", () => {
    const line = refusal(configOf({ [FORGED]: ok }))
    printable(line)
    assert.strictEqual(
      line,
      "kiln.json: processes[\"x\\u001b[2J\\nkiln: 0 processes failed\"]: is not a process name: it holds the control " +
        "character U+001B, which would reach the terminal as it is"
    )
  })

  it("every C0 control, DEL and every C1 control is refused and named, the line holding none", () => {
    const codes = [
      ...Array.from({ length: 0x20 }, (_, i) => i),
      0x7f,
      ...Array.from({ length: 0x20 }, (_, i) => 0x80 + i)
    ]
    for (const code of codes) {
      const c = String.fromCharCode(code)
      const line = refusal(configOf({ [`a${c}b`]: ok }))
      printable(line)
      assert.include(line, `U+${code.toString(16).toUpperCase().padStart(4, "0")}`)
    }
  })

  it("a bidirectional override or isolate is refused and named, the line holding it escaped", () => {
    for (const code of [0x202a, 0x202b, 0x202c, 0x202d, 0x202e, 0x2066, 0x2067, 0x2068, 0x2069]) {
      const line = refusal(configOf({ [`build${String.fromCharCode(code)}gnp.exe`]: ok }))
      assert.notMatch(line, /[\u202a-\u202e\u2066-\u2069]/, line)
      assert.include(line, `it holds the bidirectional control U+${code.toString(16).toUpperCase()}`)
    }
  })

  it("an invisible character (zero-width, soft hyphen, BOM) is refused: the name would print as another", () => {
    for (const code of [0x00ad, 0x200b, 0x200d, 0x2060, 0xfeff]) {
      const line = refusal(configOf({ [`build${String.fromCharCode(code)}`]: ok }))
      assert.include(line, `it holds the invisible character U+${code.toString(16).toUpperCase().padStart(4, "0")}`)
    }
  })

  it("a dep naming such a process is an unknown process, quoted safely", () => {
    const line = refusal(configOf({ a: { ...ok, deps: ["b\u009b2J"] } }))
    printable(line)
    assert.strictEqual(line, "kiln.json: processes.a.deps[0]: unknown process \"b\\u009b2J\"")
  })

  it("the name is refused before its fields, whichever process comes first", () => {
    const line = refusal(configOf({ a: { ...ok, deps: ["\u0007"] }, "\u0007": ok }))
    assert.strictEqual(
      line,
      "kiln.json: processes[\"\\u0007\"]: is not a process name: it holds the control character U+0007, which would " +
        "reach the terminal as it is"
    )
  })

  it("an empty name, and leading or trailing whitespace: names that print as another's", () => {
    assert.strictEqual(refusal(configOf({ "": ok })), "kiln.json: processes[\"\"]: is not a process name: it is empty")
    for (const name of [" a", "a ", "\u00a0a"]) {
      assert.match(refusal(configOf({ [name]: ok })), /: is not a process name: it begins or ends with whitespace$/)
    }
  })

  it("a value quoted from the file is escaped too (a duration, an output path)", () => {
    printable(refusal(configOf({ a: { ...ok, timeout: "1\u009bs" } })))
    printable(refusal(configOf({ a: { ...ok, outputs: ["/\u0085x"] } })))
  })

  it("ordinary names are still names: unicode, spaces inside, punctuation", () => {
    const named = (out: string) => ({ ...ok, outputs: [out] })
    const parsed = Config.parse(
      "kiln.json",
      configOf({ "build: ünïcode ✓": named("1.txt"), "a b": named("2.txt"), "x/y-z.1": named("3.txt") })
    )
    assert.isTrue(Either.isRight(parsed))
  })
})

/** A workspace of `processes` in a temp directory, and `kiln` run there with everything of kiln's under it. */
const workspaceOf = (processes: Record<string, unknown>) =>
  Effect.gen(function*() {
    const root = yield* tempDir("kiln-hostile-names-")
    const ws = path.join(root, "ws")
    fs.mkdirSync(ws)
    fs.writeFileSync(path.join(ws, "kiln.json"), configOf(processes))
    const env = { ...cliEnvIn(root), HOME: root, KILN_LOCK_DIR: path.join(root, "locks") }
    return { ws, kiln: (args: ReadonlyArray<string>) => runCli(args, { cwd: ws, env }) }
  })

describe("kiln run, hostile process names", () => {
  it.scoped("the red team's forged name: exit 2 and one escaped line, nothing run", () =>
    Effect.gen(function*() {
      const { kiln, ws } = yield* workspaceOf({ [FORGED]: ok })
      const r = yield* kiln(["run", "--progress", "plain"])
      for (const line of r.stderr.replace(/\n$/, "").split("\n")) printable(line)
      printable(r.stdout)
      failsWith(
        r,
        2,
        /^kiln: kiln\.json:1:\d+: processes\["x\\u001b\[2J\\nkiln: 0 processes failed"\]: is not a process name/
      )
      assert.isFalse(fs.existsSync(path.join(ws, "o.txt")))
    }))
})

describe("what kiln prints of a config's values", () => {
  const ESCAPES = "\u001b]52;c;cHduZWQ=\u0007\u001b[2J\nFAKE: all 12 tests passed\u202e"

  it("a variable name with a control character is refused", () => {
    const line = refusal(configOf({ a: { ...ok, env: { PATH: "/usr/bin:/bin", "X\u001bY": "1" } } }))
    printable(line)
    assert.include(line, "is not a variable name: it must be non-empty, without = or a control character")
  })

  it.scoped("kiln ls and a failure's re-run line escape control characters in argv and env", () =>
    Effect.gen(function*() {
      const fails = {
        argv: ["/bin/sh", "-c", "exit 3", ESCAPES],
        env: { PATH: "/usr/bin:/bin", SHOWN: ESCAPES },
        cache: "never"
      }
      const { kiln } = yield* workspaceOf({ fails })
      const ls = yield* kiln(["ls"])
      assert.strictEqual(ls.code, 0, ls.stderr)
      assert.notMatch(ls.stdout, /[\u001b\u0007\u202e]|FAKE.*\n.*FAKE|\nFAKE/, ls.stdout)
      assert.include(ls.stdout, "\\u001b]52;c;cHduZWQ=\\u0007")
      const run = yield* kiln(["run", "--progress", "plain"])
      assert.strictEqual(run.code, 1, run.stderr)
      const rerun = run.stderr.split("\n").find((l) => l.startsWith("re-run it with: "))
      assert.isDefined(rerun, run.stderr)
      printable(rerun!)
      assert.notInclude(rerun!, "\u202e")
      assert.include(rerun!, "$'\\x1b]52;c;cHduZWQ=\\x07\\x1b[2J\\x0aFAKE: all 12 tests passed\\u202e'")
    }))

  it.scoped("file names from the workspace: kiln explain and kiln store ls escape them", () =>
    Effect.gen(function*() {
      const reads = { ...ok, argv: ["/bin/sh", "-c", "ls src > o.txt"], inputs: ["src/**"] }
      const { kiln, ws } = yield* workspaceOf({ reads })
      fs.mkdirSync(path.join(ws, "src"))
      fs.writeFileSync(path.join(ws, "src/plain.txt"), "1")
      assert.strictEqual((yield* kiln(["run", "--progress", "none"])).code, 0)
      const hostile = "x\u001b]0;TITLE\u0007\u001b[2J\u009bred\u202eevil"
      fs.writeFileSync(path.join(ws, "src", hostile), "1")
      const explained = yield* kiln(["explain", "reads"])
      assert.strictEqual(explained.code, 0, explained.stderr)
      for (const line of explained.stdout.replace(/\n$/, "").split("\n")) printable(line)
      assert.notInclude(explained.stdout, "\u202e")
      assert.include(explained.stdout, "added   src/x\\u001b]0;TITLE\\u0007")
      const snapshot = yield* kiln(["store", "snapshot", path.join(ws, "src")])
      assert.strictEqual(snapshot.code, 0, snapshot.stderr)
      const listed = yield* kiln(["store", "ls", snapshot.stdout.trim()])
      assert.strictEqual(listed.code, 0, listed.stderr)
      for (const line of listed.stdout.replace(/\n$/, "").split("\n")) printable(line)
      assert.notInclude(listed.stdout, "\u202e")
    }))

  it.scoped("kiln ls --json escapes the C1 and bidirectional controls JSON leaves raw; a parser reads the same value", () =>
    Effect.gen(function*() {
      const value = "a\u009b31m\u202eb"
      const { kiln } = yield* workspaceOf({ shows: { ...ok, argv: ["/bin/echo", value] } })
      const ls = yield* kiln(["ls", "--json"])
      assert.strictEqual(ls.code, 0, ls.stderr)
      assert.notMatch(ls.stdout, /[\u007f-\u009f\u202a-\u202e\u2066-\u2069]/)
      const parsed = JSON.parse(ls.stdout) as { processes: Record<string, { argv: Array<string> }> }
      assert.strictEqual(parsed.processes.shows!.argv[1], value)
    }))

  it.scoped("a run's own lines escape the names a tool chose (a file it wrote outside its outputs)", () =>
    Effect.gen(function*() {
      const litters = {
        ...ok,
        argv: ["/bin/sh", "-c", "echo ok > o.txt && : > \"$(printf 'e\\033]0;T\\007\\342\\200\\256')\""]
      }
      const { kiln, ws } = yield* workspaceOf({ litters })
      const r = yield* kiln(["run", "--progress", "plain"])
      assert.strictEqual(r.code, 0, r.stderr)
      for (const line of r.stderr.replace(/\n$/, "").split("\n")) printable(line)
      assert.notInclude(r.stderr, "\u202e")
      assert.include(r.stderr, "litters wrote 1 file that is not among its outputs: e\\u001b]0;T\\u0007\\u202e")
      // `--summary -` is JSON on stdout: the same name, escaped as JSON escapes it, the bidi control included.
      fs.rmSync(path.join(ws, "o.txt"))
      const summary = yield* kiln(["run", "--cache", "off", "--summary", "-", "--progress", "none"])
      assert.strictEqual(summary.code, 0, summary.stderr)
      assert.notMatch(summary.stdout, /[\u0000-\u0009\u000b-\u001f\u007f-\u009f\u202a-\u202e\u2066-\u2069]/)
      const parsed = JSON.parse(summary.stdout) as { processes: Array<{ undeclaredWrites: { sample: Array<string> } }> }
      assert.deepStrictEqual(parsed.processes[0]!.undeclaredWrites.sample, ["e\u001b]0;T\u0007\u202e"])
    }))
})
