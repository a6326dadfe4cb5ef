/**
 * Choosing what runs, and seeing it first (#38 §2), through the built CLI on a temp copy of the example workspace:
 * `kiln run` with globs, `!` exclusions, `...name` and `name...`; `--affected` in a real git repository; `kiln ls`'s
 * dry run; `kiln graph`'s formats; `kiln explain` of several names; and an unknown name's suggestion.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { spawnSync } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"
import { cli } from "../utils/stack.js"
import { tempDir } from "../utils/temp.js"

interface Planned {
  readonly name: string
  readonly deps: ReadonlyArray<string>
  readonly status: "hit" | "run"
  readonly reason: string
  readonly actionDigest: string | null
}

const workspace = Effect.gen(function*() {
  const root = yield* tempDir("kiln-select-")
  const ws = path.join(root, "ws")
  fs.cpSync(path.resolve("examples/workspace"), ws, { recursive: true })
  for (const d of ["gen", "build", "dist"]) fs.rmSync(path.join(ws, d), { recursive: true, force: true })
  fs.mkdirSync(path.join(root, "sandboxes"))
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    KILN_STORE_DIR: path.join(root, "store"),
    KILN_SANDBOX_ROOT: path.join(root, "sandboxes"),
    KILN_NAMED_CACHES_DIR: path.join(root, "named"),
    GIT_AUTHOR_NAME: "kiln",
    GIT_AUTHOR_EMAIL: "kiln@example.invalid",
    GIT_COMMITTER_NAME: "kiln",
    GIT_COMMITTER_EMAIL: "kiln@example.invalid",
    GIT_CONFIG_NOSYSTEM: "1",
    GIT_CONFIG_GLOBAL: "/dev/null"
  }
  const kiln = (args: ReadonlyArray<string>, cwd = ws) => {
    const r = spawnSync(process.execPath, [cli, ...args], { cwd, encoding: "utf8", env })
    return { code: r.status, stdout: r.stdout, stderr: r.stderr }
  }
  /** What `kiln run ARGS` ran or took from the cache, by its summary. */
  const run = (args: ReadonlyArray<string>) => {
    const summary = path.join(root, `summary-${Math.random().toString(36).slice(2)}.json`)
    const r = kiln(["run", ...args, "--progress", "plain", "--summary", summary])
    assert.strictEqual(r.code, 0, r.stderr)
    const s = JSON.parse(fs.readFileSync(summary, "utf8")) as { processes: Array<{ name: string; source: string }> }
    return s.processes.map((p) => p.name).sort()
  }
  /** The dry run of `kiln ls ARGS --json`. */
  const plan = (args: ReadonlyArray<string>, cwd = ws): Array<Planned> => {
    const r = kiln(["ls", ...args, "--json"], cwd)
    assert.strictEqual(r.code, 0, r.stderr)
    return (JSON.parse(r.stdout) as { plan: Array<Planned> }).plan
  }
  const git = (...args: Array<string>) => {
    const r = spawnSync("git", args, { cwd: ws, encoding: "utf8", env })
    assert.strictEqual(r.status, 0, r.stderr)
    return r.stdout
  }
  return { root, ws, kiln, run, plan, git }
})

const ALL = ["gen", "compile-greet", "compile-main", "test", "bundle"]

describe("choosing what runs", () => {
  it.scoped("run takes globs, !exclusions, name... and ...name; ls lists exactly what they select", () =>
    Effect.gen(function*() {
      const { plan, run } = yield* workspace
      const selected = (args: ReadonlyArray<string>) => plan(args).map((p) => p.name)
      assert.deepStrictEqual(selected(["compile-*"]), ["compile-greet", "compile-main"])
      assert.deepStrictEqual(selected(["!bundle", "!test"]), ["gen", "compile-greet", "compile-main"])
      assert.deepStrictEqual(selected(["...compile-greet"]), ["compile-greet", "test", "bundle"])
      assert.deepStrictEqual(selected(["compile-main..."]), ["gen", "compile-main"])
      assert.deepStrictEqual(selected(["test...", "!gen"]), ["compile-greet", "test"])
      // A run runs what it selects and their deps.
      assert.deepStrictEqual(run(["compile-*"]), ["compile-greet", "compile-main", "gen"])
      assert.deepStrictEqual(run(["compile-main..."]), ["compile-main", "gen"])
      assert.deepStrictEqual(run(["!bundle", "!test"]), ["compile-greet", "compile-main", "gen"])
      assert.deepStrictEqual(run(["...gen"]), [...ALL].sort())
    }))

  it.scoped("an unknown name or a glob that matches nothing: one line suggesting the nearest names, exit 2", () =>
    Effect.gen(function*() {
      const { kiln } = yield* workspace
      const typo = kiln(["run", "compile-gret"])
      assert.strictEqual(typo.code, 2)
      assert.strictEqual(
        typo.stderr,
        "kiln: kiln.json: unknown process \"compile-gret\": did you mean \"compile-greet\"?\n"
      )
      const glob = kiln(["ls", "complie-*"])
      assert.strictEqual(glob.code, 2)
      assert.strictEqual(
        glob.stderr,
        "kiln: kiln.json: \"complie-*\" matches no process: did you mean \"compile-greet\" or \"compile-main\"?\n"
      )
      // With another option, through @effect/cli's reading of the arguments: the same line.
      const slow = kiln(["run", "!bundel", "--trace", "trace.json"])
      assert.strictEqual(slow.code, 2)
      assert.strictEqual(slow.stderr, "kiln: kiln.json: unknown process \"bundel\": did you mean \"bundle\"?\n")
    }))

  it.scoped("ls is a dry run: everything would run, then after a run everything hits, and an edit runs again", () =>
    Effect.gen(function*() {
      const { kiln, plan, run, ws } = yield* workspace
      const before = plan([])
      assert.deepStrictEqual(before.map((p) => p.name), ALL)
      assert.deepInclude(before, {
        name: "bundle",
        deps: ["gen", "compile-greet", "compile-main", "test"],
        status: "run",
        reason: "dep gen would run first",
        actionDigest: null
      })
      assert.deepStrictEqual(before.find((p) => p.name === "gen")!.status, "run")
      assert.strictEqual(before.find((p) => p.name === "gen")!.reason, "not in the cache")
      // Nothing ran: no outputs in the workspace.
      assert.isFalse(fs.existsSync(path.join(ws, "gen")))
      run([])
      const after = plan([])
      assert.deepStrictEqual(after.map((p) => [p.name, p.status]), ALL.map((n) => [n, "hit"]))
      fs.appendFileSync(path.join(ws, "src/greet.js"), "\n// edited\n")
      const edited = plan(["...compile-greet"])
      assert.deepStrictEqual(edited.map((p) => [p.name, p.status, p.reason]), [
        ["compile-greet", "run", "not in the cache"],
        ["test", "run", "dep compile-greet would run first"],
        ["bundle", "run", "dep compile-greet would run first"]
      ])
      const text = kiln(["ls", "gen", "compile-greet"])
      assert.strictEqual(text.code, 0, text.stderr)
      assert.match(text.stdout, /^gen {12}node tools\/gen\.mjs config\.json gen\/config\.js {2}\[hit\]$/m)
      assert.match(text.stdout, /^compile-greet .* \[run: not in the cache\]$/m)
    }))

  it.scoped("--affected: what differs from git's base (committed, edited, untracked) and its dependents", () =>
    Effect.gen(function*() {
      const { git, kiln, plan, root, run, ws } = yield* workspace
      const outside = kiln(["ls", "--affected"])
      assert.strictEqual(outside.code, 2)
      assert.strictEqual(outside.stderr, `kiln: --affected: ${ws} is not in a git work tree\n`)
      git("init", "-q", "-b", "main")
      fs.writeFileSync(path.join(ws, ".gitignore"), "gen/\nbuild/\ndist/\n")
      git("add", "-A")
      git("commit", "-q", "-m", "start")
      const names = (args: ReadonlyArray<string>) => plan(args).map((p) => p.name)
      assert.deepStrictEqual(names(["--affected"]), [])
      // An edit, not committed: compile-greet and what depends on it.
      fs.appendFileSync(path.join(ws, "src/greet.js"), "\n// edited\n")
      assert.deepStrictEqual(names(["--affected"]), ["compile-greet", "test", "bundle"])
      // Words narrow it.
      assert.deepStrictEqual(names(["--affected", "!bundle"]), ["compile-greet", "test"])
      git("checkout", "-q", "src/greet.js")
      // An untracked file an input glob takes.
      fs.writeFileSync(path.join(ws, "test/more.test.mjs"), "\n")
      assert.deepStrictEqual(names(["--affected"]), ["test", "bundle"])
      fs.rmSync(path.join(ws, "test/more.test.mjs"))
      // On a branch: what it committed since it left main counts; an explicit REF is compared with as it is.
      git("checkout", "-q", "-b", "feature")
      fs.appendFileSync(path.join(ws, "config.json"), "\n")
      git("commit", "-q", "-am", "config")
      assert.deepStrictEqual(names(["--affected"]), ["gen", "compile-main", "test", "bundle"])
      assert.deepStrictEqual(names(["--affected=HEAD"]), [])
      assert.deepStrictEqual(names(["--affected=main", "compile-main..."]), ["gen", "compile-main"])
      // A run of the affected runs them and their deps; the output files git ignores are not changes.
      assert.deepStrictEqual(run(["--affected"]), [...ALL].sort())
      assert.deepStrictEqual(names(["--affected=HEAD"]), [])
      const bad = kiln(["run", "--affected=no-such-ref"])
      assert.strictEqual(bad.code, 2)
      assert.strictEqual(bad.stderr, "kiln: --affected: \"no-such-ref\" is not a commit git knows\n")
      // A workspace in a subdirectory of its repository: paths are taken relative to it, changes outside it ignored.
      fs.rmSync(path.join(ws, ".git"), { recursive: true })
      git("-C", root, "init", "-q", "-b", "main")
      fs.writeFileSync(
        path.join(root, ".gitignore"),
        "store/\nsandboxes/\nnamed/\nsummary-*.json\nws/gen/\nws/build/\nws/dist/\n"
      )
      git("-C", root, "add", "-A")
      git("-C", root, "commit", "-q", "-m", "start")
      fs.writeFileSync(path.join(root, "elsewhere.txt"), "\n")
      fs.appendFileSync(path.join(ws, "src/main.js"), "\n// edited\n")
      assert.deepStrictEqual(names(["--affected"]), ["compile-main", "bundle"])
    }))

  it.scoped("--affected runs no command the checkout's own git config names (core.fsmonitor)", () =>
    Effect.gen(function*() {
      const { git, plan, root } = yield* workspace
      git("init", "-q", "-b", "main")
      git("add", "-A")
      git("commit", "-q", "-m", "start")
      const marker = path.join(root, "FSMONITOR_RAN")
      git("config", "core.fsmonitor", `touch ${marker}; true`)
      assert.deepStrictEqual(plan(["--affected"]).map((p) => p.name), [])
      assert.isFalse(fs.existsSync(marker), "git ran the checkout's fsmonitor command")
    }))

  it.scoped("--affected's default base: origin/HEAD's branch, else main, else master, else a one-line error", () =>
    Effect.gen(function*() {
      const { git, kiln, plan, root, ws } = yield* workspace
      git("init", "-q", "-b", "trunk")
      git("add", "-A")
      git("commit", "-q", "-m", "start")
      const none = kiln(["run", "--affected"])
      assert.strictEqual(none.code, 2)
      assert.strictEqual(
        none.stderr,
        "kiln: --affected: no default branch to compare with (origin/HEAD, main or master): name a base, " +
          "--affected=REF\n"
      )
      // A clone knows its origin's default branch: a branch of it is compared with where it left trunk.
      const clone = path.join(root, "clone")
      git("clone", "-q", ws, clone)
      git("-C", clone, "checkout", "-q", "-b", "topic")
      fs.appendFileSync(path.join(clone, "tools/compile.mjs"), "\n")
      git("-C", clone, "commit", "-q", "-am", "compile")
      assert.deepStrictEqual(plan(["--affected"], clone).map((p) => p.name), [
        "compile-greet",
        "compile-main",
        "test",
        "bundle"
      ])
    }))

  it.scoped("graph: dot, mermaid and json, in kiln.json's order, names quoted", () =>
    Effect.gen(function*() {
      const { kiln, ws } = yield* workspace
      const dot = kiln(["graph"])
      assert.strictEqual(dot.code, 0, dot.stderr)
      assert.match(dot.stdout, /^digraph kiln \{\n {2}"gen"\n/)
      assert.include(dot.stdout, "  \"compile-main\" -> \"gen\"\n")
      assert.include(dot.stdout, "  \"bundle\" -> \"test\"\n")
      const json = kiln(["graph", "--format", "json", "test..."])
      assert.strictEqual(json.code, 0, json.stderr)
      assert.deepStrictEqual(JSON.parse(json.stdout), {
        nodes: [
          { name: "gen", deps: [] },
          { name: "compile-greet", deps: [] },
          { name: "test", deps: ["compile-greet", "gen"] }
        ],
        edges: [{ from: "test", to: "compile-greet" }, { from: "test", to: "gen" }]
      })
      const mermaid = kiln(["graph", "--format", "mermaid", "compile-main..."])
      assert.strictEqual(mermaid.stdout, "flowchart LR\n  p0[\"gen\"]\n  p1[\"compile-main\"]\n  p1 --> p0\n")
      // Names that would break either format print as written.
      fs.writeFileSync(
        path.join(ws, "kiln.json"),
        JSON.stringify({
          processes: {
            "a\"b": { argv: ["true"] },
            "build:web#x": { argv: ["true"], deps: ["a\"b"] }
          }
        })
      )
      const odd = kiln(["graph"])
      assert.strictEqual(
        odd.stdout,
        "digraph kiln {\n  \"a\\\"b\"\n  \"build:web#x\"\n  \"build:web#x\" -> \"a\\\"b\"\n}\n"
      )
      const oddMermaid = kiln(["graph", "--format", "mermaid"])
      assert.strictEqual(
        oddMermaid.stdout,
        "flowchart LR\n  p0[\"a#34;b\"]\n  p1[\"build:web#35;x\"]\n  p1 --> p0\n"
      )
    }))

  it.scoped("explain takes several names, and --json", () =>
    Effect.gen(function*() {
      const { kiln, run, ws } = yield* workspace
      run([])
      fs.appendFileSync(path.join(ws, "src/greet.js"), "\n// edited\n")
      const text = kiln(["explain", "gen", "compile-greet"])
      assert.strictEqual(text.code, 0, text.stderr)
      assert.match(text.stdout, /^gen: would hit the cache \(action [0-9a-f]{64}\/\d+\)\n {2}nothing changed/)
      assert.match(text.stdout, /\ncompile-greet: would run \(action [0-9a-f]{64}\/\d+ is not in the cache\)\n/)
      assert.include(text.stdout, "  changed src/greet.js")
      const json = kiln(["explain", "compile-greet", "gen", "--json"])
      assert.strictEqual(json.code, 0, json.stderr)
      const explained = JSON.parse(json.stdout) as Array<Record<string, unknown>>
      // In kiln.json's order, whatever the order given.
      assert.deepStrictEqual(explained.map((e) => [e.name, e.status, e.reason]), [
        ["gen", "hit", "in the cache"],
        ["compile-greet", "run", "not in the cache"]
      ])
      assert.deepStrictEqual(explained[1]!.changes, ["changed src/greet.js"])
      assert.match(explained[1]!.lastActionDigest as string, /^[0-9a-f]{64}\/\d+$/)
      const unknown = kiln(["explain", "gen", "bundel"])
      assert.strictEqual(unknown.code, 2)
      assert.strictEqual(unknown.stderr, "kiln: kiln.json: unknown process \"bundel\": did you mean \"bundle\"?\n")
    }))
})
