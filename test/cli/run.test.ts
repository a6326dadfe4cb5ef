/**
 * `kiln run` end to end on a temp copy of the example workspace, through the built CLI.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer } from "effect"
import { spawn, spawnSync } from "node:child_process"
import { createHash } from "node:crypto"
import * as fs from "node:fs"
import * as path from "node:path"
import { InvalidConfig } from "../../src/domain/config/Config.js"
import * as Engine from "../../src/layers/engine/Engine.js"
import * as RunRecords from "../../src/layers/engine/internal/runRecords.js"
import { isAlive } from "../../src/os/Proc.js"
import { explainProcess } from "../../src/programs/kiln/commands/runCommand.js"
import { eventually, exitOf, helpersOf } from "../utils/child.js"
import { cli, cliEnvIn, stack } from "../utils/stack.js"
import { tempDir } from "../utils/temp.js"

interface Summary {
  readonly processes: ReadonlyArray<
    { name: string; source: string; exitCode: number | null; backtracks: number; actionDigest: string | null }
  >
  readonly ran: number
  readonly cacheHits: number
  readonly failed: number
  readonly backtracks: number
  readonly wallMs: number
}

const workspace = Effect.gen(function*() {
  const root = yield* tempDir("kiln-run-")
  const ws = path.join(root, "ws")
  fs.cpSync(path.resolve("examples/workspace"), ws, { recursive: true })
  for (const d of ["gen", "build", "dist"]) fs.rmSync(path.join(ws, d), { recursive: true, force: true })
  const env = cliEnvIn(root)
  const kiln = (args: ReadonlyArray<string>, extraEnv: Record<string, string> = {}) => {
    const summaryFile = path.join(root, `summary-${Math.random().toString(36).slice(2)}.json`)
    const r = spawnSync(process.execPath, [cli, ...args, "--progress", "plain", "--summary", summaryFile], {
      cwd: ws,
      encoding: "utf8",
      env: { ...env, ...extraEnv }
    })
    const summary = fs.existsSync(summaryFile) ? JSON.parse(fs.readFileSync(summaryFile, "utf8")) as Summary : undefined
    return { code: r.status, stdout: r.stdout, stderr: r.stderr, summary }
  }
  const store = (args: ReadonlyArray<string>) =>
    spawnSync(process.execPath, [cli, "store", ...args], { cwd: ws, encoding: "utf8", env })
  const source = (s: Summary | undefined, name: string) => s?.processes.find((p) => p.name === name)?.source
  return { root, ws, env, kiln, store, source }
})

describe("kiln run", () => {
  it.scoped("cold, warm (all cached), then one leaf edited: only it and its dependents re-run", () =>
    Effect.gen(function*() {
      const { kiln, source, ws } = yield* workspace
      const cold = kiln(["run"])
      assert.strictEqual(cold.code, 0, cold.stderr)
      assert.strictEqual(cold.summary!.ran, 5)
      assert.strictEqual(
        spawnSync(process.execPath, [path.join(ws, "dist/app.js")], { encoding: "utf8" }).stdout,
        "Hello, kiln!\n"
      )
      const warm = kiln(["run"])
      assert.strictEqual(warm.code, 0, warm.stderr)
      assert.strictEqual(warm.summary!.cacheHits, 5)
      assert.strictEqual(warm.summary!.ran, 0)
      fs.appendFileSync(
        path.join(ws, "src/greet.js"),
        "// a new comment line\nexport const shout = (s) => s.toUpperCase()\n"
      )
      const edited = kiln(["run"])
      assert.strictEqual(edited.code, 0, edited.stderr)
      assert.strictEqual(source(edited.summary, "gen"), "cache-hit")
      assert.strictEqual(source(edited.summary, "compile-main"), "cache-hit")
      assert.strictEqual(source(edited.summary, "compile-greet"), "ran")
      assert.strictEqual(source(edited.summary, "test"), "ran")
      assert.strictEqual(source(edited.summary, "bundle"), "ran")
    }))

  it.scoped("backtracking: a deleted dep output under --cache-content defer re-runs its producer once", () =>
    Effect.gen(function*() {
      const { kiln, store, ws } = yield* workspace
      assert.strictEqual(kiln(["run"]).code, 0)
      const greet = fs.readFileSync(path.join(ws, "build/greet.js"))
      const digest = `${createHash("sha256").update(greet).digest("hex")}/${greet.length}`
      assert.strictEqual(store(["rm", digest]).status, 0)
      fs.appendFileSync(path.join(ws, "test/greet.test.mjs"), "// edited\n")
      const run = kiln(["run", "--cache-content", "defer"])
      assert.strictEqual(run.code, 0, run.stderr)
      assert.strictEqual(run.summary!.backtracks, 1)
      assert.include(run.stderr, "compile-greet")
      const after = kiln(["run", "--cache-content", "defer"])
      assert.strictEqual(after.summary!.backtracks, 0)
      assert.strictEqual(after.summary!.ran, 0)
      // With the default `validate`, the same deletion is a cache miss that simply re-runs.
      assert.strictEqual(store(["rm", digest]).status, 0)
      const validated = kiln(["run"])
      assert.strictEqual(validated.code, 0, validated.stderr)
      assert.strictEqual(validated.summary!.backtracks, 0)
      assert.strictEqual(validated.summary!.processes.find((p) => p.name === "compile-greet")!.source, "ran")
    }))

  // Backtracking itself is tested in process (test/engine/EngineRun.test.ts); this is how the CLI says it gave up.
  it.scoped("a missing digest that no process of the run produced is a one-line error, exit 1", () =>
    Effect.gen(function*() {
      const { env, kiln, ws } = yield* workspace
      const test = fs.readFileSync(path.join(ws, "test/greet.test.mjs"))
      const digest = `${createHash("sha256").update(test).digest("hex")}/${test.length}`
      // A tool that removes the test's own input from the store while the run goes on, after the lookups took it,
      // and changes the workspace's copy: kiln cannot store it again from there (it would, were it unchanged).
      const config = JSON.parse(fs.readFileSync(path.join(ws, "kiln.json"), "utf8"))
      const erase = [process.execPath, cli, "store", "rm", "--store-dir", env.KILN_STORE_DIR, digest]
        .map((a) => `'${a}'`).join(" ")
      config.processes.eraser = {
        argv: ["/bin/sh", "-c", `${erase} && echo '// changed' >> '${path.join(ws, "test/greet.test.mjs")}'`]
      }
      config.processes.test.deps = [...config.processes.test.deps ?? [], "eraser"]
      fs.writeFileSync(path.join(ws, "kiln.json"), JSON.stringify(config))
      // The eraser stands for something outside the run (another kiln, a user): without the strict view, which would
      // (rightly) keep it from the store and the workspace.
      const run = kiln(["run", "test"], { KILN_STRICT_VIEW: "0" })
      assert.strictEqual(run.code, 1, run.stderr)
      const line = run.stderr.split("\n").find((l) => l.includes(digest))
      assert.isDefined(line, run.stderr)
      assert.include(line, "`test`")
      assert.include(line, "no process of this run produced it")
      assert.include(line, "a second look does not find it either")
    }))

  it.scoped("a run memo that cannot be written is a warning the user sees, and the run still succeeds", () =>
    Effect.gen(function*() {
      const { env, kiln } = yield* workspace
      // The engine's own directory in the store is a file: neither the memo nor the run records can be written.
      fs.mkdirSync(env.KILN_STORE_DIR, { recursive: true })
      fs.writeFileSync(path.join(env.KILN_STORE_DIR, "engine"), "not a directory")
      const run = kiln(["run"])
      assert.strictEqual(run.code, 0, run.stderr)
      assert.match(run.stderr, /^kiln: warning: could not write the run memo .*$/m)
    }))

  it.scoped("explain on a run record whose dep digest is corrupt: one line naming the file, exit 1", () =>
    Effect.gen(function*() {
      const { env, kiln, ws } = yield* workspace
      assert.strictEqual(kiln(["run"]).code, 0)
      const file = RunRecords.fileOf(env.KILN_STORE_DIR, ws)
      const records = RunRecords.read(env.KILN_STORE_DIR, ws)
      records["test"]!.deps["compile-greet"] = "not-a-digest"
      fs.rmSync(file.replace(/\.json$/, ".journal"), { force: true })
      fs.writeFileSync(file, JSON.stringify({ processes: records }))
      const r = spawnSync(process.execPath, [cli, "explain", "test"], { cwd: ws, encoding: "utf8", env })
      assert.strictEqual(r.status, 1, r.stderr)
      const lines = r.stderr.trim().split("\n")
      assert.strictEqual(lines.length, 1, r.stderr)
      assert.include(lines[0], file)
      assert.include(lines[0], "not a digest")
    }))

  it.scoped("explain names the input file edited since the last run, and says whether the cache has the action", () =>
    Effect.gen(function*() {
      const { env, kiln, ws } = yield* workspace
      assert.strictEqual(kiln(["run"]).code, 0)
      const explain = (name: string) =>
        spawnSync(process.execPath, [cli, "explain", name], { cwd: ws, encoding: "utf8", env })
      const unchanged = explain("compile-greet")
      assert.strictEqual(unchanged.status, 0, unchanged.stderr)
      assert.match(
        unchanged.stdout,
        /^compile-greet: would hit the cache \(action [0-9a-f]{64}\/\d+\)\n  nothing changed/
      )
      fs.appendFileSync(path.join(ws, "src/greet.js"), "export const more = 1\n")
      fs.writeFileSync(path.join(ws, "src/extra.js"), "export const extra = 1\n")
      const edited = explain("compile-greet").stdout
      assert.match(edited, /^compile-greet: would run \(action [0-9a-f]{64}\/\d+ is not in the cache\)/)
      assert.include(edited, "changed src/greet.js")
      assert.notInclude(edited, "extra.js")
      assert.include(explain("bundle").stdout, "dep compile-greet would run first")
    }))

  it.scoped("--trace is trace-event JSON with one complete span per process; --summary lists every process", () =>
    Effect.gen(function*() {
      const { kiln, root } = yield* workspace
      const trace = path.join(root, "trace.json")
      const run = kiln(["run", "--trace", trace])
      assert.strictEqual(run.code, 0, run.stderr)
      const events = JSON.parse(fs.readFileSync(trace, "utf8")).traceEvents as Array<
        { ph: string; cat?: string; name: string; dur?: number }
      >
      const spans = events.filter((e) => e.ph === "X" && e.cat === "process")
      assert.sameMembers(spans.map((s) => s.name), ["gen", "compile-greet", "compile-main", "test", "bundle"])
      for (const s of spans) assert.isAbove(s.dur!, 0)
      assert.sameMembers(run.summary!.processes.map((p) => p.name), [
        "gen",
        "compile-greet",
        "compile-main",
        "test",
        "bundle"
      ])
      for (const p of run.summary!.processes) assert.match(p.actionDigest!, /^[0-9a-f]{64}\/\d+$/)
    }))

  it.scoped("a process that waited for a slot is traced from its start on: each span holds its phases", () =>
    Effect.gen(function*() {
      const { kiln, root, ws } = yield* workspace
      // Four processes one at a time: the last ones wait for a sandbox, then for the one running slot.
      const processes = Object.fromEntries(
        [0, 1, 2, 3].map((i) => [`w${i}`, {
          argv: ["/bin/sh", "-c", `sleep 0.2; echo ${i} > w${i}.txt`],
          outputs: [`w${i}.txt`],
          env: { PATH: "/usr/bin:/bin" }
        }])
      )
      fs.writeFileSync(path.join(ws, "waits.json"), JSON.stringify({ processes }))
      const trace = path.join(root, "waits-trace.json")
      const run = kiln(["run", "--config", path.join(ws, "waits.json"), "--concurrency", "1", "--trace", trace])
      assert.strictEqual(run.code, 0, run.stderr)
      const events = JSON.parse(fs.readFileSync(trace, "utf8")).traceEvents as Array<
        { ph: string; cat?: string; name: string; ts: number; dur: number; tid: number }
      >
      const spans = events.filter((e) => e.ph === "X" && e.cat === "process")
      assert.strictEqual(spans.length, 4)
      for (const span of spans) {
        const i = events.indexOf(span)
        const phases = events.slice(i + 1).filter((e, k, rest) =>
          e.cat === "phase" && rest.slice(0, k).every((p) => p.cat === "phase")
        )
        const byName = new Map(phases.map((p) => [p.name, p]))
        // Its span starts with its tool: the wait for a slot and the sandbox's filling are told, not drawn.
        assert.sameMembers([...byName.keys()], ["run", "capture"], span.name)
        assert.strictEqual(byName.get("run")!.ts, span.ts, span.name)
        const args = (span as unknown as { args: Record<string, unknown> }).args
        assert.isNumber(args.queueMsBeforeStart, span.name)
        assert.isNumber(args.materializeMsBeforeStart, span.name)
        // Every phase lies inside its process's span (a phase under 1 ms is drawn 1 µs long).
        for (const p of phases) assert.isAtMost(p.ts + p.dur, span.ts + span.dur + 5, `${span.name}: ${p.name}`)
        // The summary says the same duration.
        const summed = (run.summary!.processes as ReadonlyArray<{ name: string; durationMs?: number }>)
          .find((p) => p.name === span.name)!
        assert.approximately(summed.durationMs! * 1000, span.dur, 1)
      }
    }))

  it.scoped("--progress tty: the status line counts what will run, and is gone before the report is printed", () =>
    Effect.gen(function*() {
      const { env, ws } = yield* workspace
      const tty = (args: ReadonlyArray<string>) =>
        spawnSync(process.execPath, [cli, "run", ...args, "--progress", "tty"], { cwd: ws, encoding: "utf8", env })
      const CLEAR = "\r\u001b[2K"
      const all = tty([])
      assert.strictEqual(all.status, 0, all.stderr)
      assert.match(all.stderr, /\d\/5 done/)
      // The status line is cleared just before the report, and nothing is written after it.
      assert.include(all.stderr, `${CLEAR}kiln: 5 processes: 5 ran`)
      assert.match(all.stderr, /kiln: 5 processes: [^\n]*\n$/)
      // `run gen`: gen has no deps, so the status counts one process, not the config's five.
      const one = tty(["gen", "--cache", "off"])
      assert.strictEqual(one.status, 0, one.stderr)
      assert.match(one.stderr, /\d\/1 done/)
      assert.notMatch(one.stderr, /\/5 done/)
      assert.include(one.stderr, `${CLEAR}kiln: 1 process: 1 ran`)
    }))

  it.scoped("an option after the names is a one-line usage error, not an unknown process", () =>
    Effect.gen(function*() {
      const { env, ws } = yield* workspace
      // Last on the line, where @effect/cli takes them for names.
      const kiln = (args: ReadonlyArray<string>) => {
        const r = spawnSync(process.execPath, [cli, ...args], { cwd: ws, encoding: "utf8", env })
        return { code: r.status, stderr: r.stderr }
      }
      const global = kiln(["run", "--config", "kiln.json", "gen", "--log-level=debug"])
      assert.strictEqual(global.code, 2)
      assert.strictEqual(global.stderr, "kiln: --log-level goes before the command: `kiln --log-level … run`\n")
      const unknown = kiln(["run", "gen", "--bogus"])
      assert.strictEqual(unknown.code, 2)
      assert.strictEqual(unknown.stderr, "kiln: unknown option --bogus of `kiln run` (`kiln run --help` lists them)\n")
    }))

  it.scoped("what kiln logs reads as its other lines: `kiln: `, and the level when it is a warning", () =>
    Effect.gen(function*() {
      const { kiln, ws } = yield* workspace
      fs.writeFileSync(path.join(ws, "test/greet.test.mjs"), "process.exit(3)\n")
      const run = kiln(["run", "--keep-sandboxes", "on-failure"])
      assert.strictEqual(run.code, 1)
      const kept = run.stderr.split("\n").find((l) => l.includes("kept the sandbox of test"))
      assert.match(kept ?? "", /^kiln: kept the sandbox of test: \/\S+$/, run.stderr)
      const dir = kept!.slice(kept!.lastIndexOf(" ") + 1)
      assert.isTrue(fs.existsSync(path.join(dir, "__run.sh")))
    }))

  it.scoped("a failing process: exit 1, its stderr tail and a command that re-runs it; dependents are skipped", () =>
    Effect.gen(function*() {
      const { env, kiln, ws } = yield* workspace
      fs.writeFileSync(
        path.join(ws, "test/greet.test.mjs"),
        "console.error('assertion failed: 1 !== 2'); process.exit(3)\n"
      )
      const run = kiln(["run"])
      assert.strictEqual(run.code, 1)
      assert.include(run.stderr, "✗ test exit 3")
      assert.include(run.stderr, "assertion failed: 1 !== 2")
      assert.include(run.stderr, "re-run it with: kiln exec")
      assert.strictEqual(run.summary!.processes.find((p) => p.name === "bundle")!.source, "skipped")
      // explain says why it would run again although nothing changed.
      const explained = spawnSync(process.execPath, [cli, "explain", "test"], { cwd: ws, encoding: "utf8", env })
      assert.strictEqual(explained.status, 0, explained.stderr)
      assert.include(
        explained.stdout,
        "nothing changed since its last run, which failed (exit 3): a failure is not cached"
      )
    }))

  it.scopedLive("a run that succeeds disarms its spawner before it exits: no post-mortem starts", () =>
    Effect.gen(function*() {
      const { env, root, ws } = yield* workspace
      const runtime = path.join(root, "runtime")
      fs.mkdirSync(runtime, { mode: 0o700 })
      const child = spawn(process.execPath, [cli, "run", "--progress", "none"], {
        cwd: ws,
        env: { ...env, XDG_RUNTIME_DIR: runtime },
        stdio: "ignore"
      })
      yield* Effect.addFinalizer(() => Effect.sync(() => child.exitCode === null && child.kill("SIGKILL")))
      const exit = yield* exitOf(child)
      assert.strictEqual(exit.code, 0)
      yield* eventually("the spawner exits", () => helpersOf("kiln-spawner", child.pid!).length === 0, "20 seconds")
      // A spawner left armed opens the post-mortem's log as it starts it (and nothing else here writes one: these
      // inputs are small enough that no sandboxer is started).
      const logs = fs.readdirSync(runtime, { recursive: true }).map(String).filter((f) => f.endsWith(".log"))
      assert.deepStrictEqual(logs, [], "the spawner started the post-mortem")
    }))

  it.scopedLive("SIGINT while three long processes run: exit 130, and no process, sandbox or helper is left", () =>
    Effect.gen(function*() {
      const { env, root, ws } = yield* workspace
      const marks = path.join(root, "marks")
      const terms = path.join(root, "terms")
      fs.mkdirSync(marks)
      fs.mkdirSync(terms)
      const long = (i: number) => ({
        // Survives SIGTERM (noting it got one): only the SIGKILL that follows the grace period can end it.
        argv: [
          "/bin/sh",
          "-c",
          `echo $$ > ${marks}/${i}; trap 'echo > ${terms}/${i}' TERM; sleep 300 & wait; sleep 300`
        ],
        cache: "never"
      })
      fs.writeFileSync(
        path.join(ws, "kiln.json"),
        JSON.stringify({ processes: { a: long(1), b: long(2), c: long(3) } })
      )
      const child = spawn(process.execPath, [cli, "run", "--concurrency", "3", "--progress", "none"], {
        cwd: ws,
        // The processes note their pids and signals in files of the host, which the strict view hides (its own
        // ending of a process's descendants: test/sandbox/StrictView.test.ts).
        env: { ...env, KILN_STRICT_VIEW: "0" },
        stdio: "ignore"
      })
      yield* Effect.addFinalizer(() => Effect.sync(() => child.exitCode === null && child.kill("SIGKILL")))
      // A marker exists from the shell's `>` on, before `echo` has written the pid (an empty one read as pid 0, and
      // kill(0) is this test's own group): each is waited for until it holds a whole line.
      const written = () =>
        fs.readdirSync(marks).map((f) => fs.readFileSync(path.join(marks, f), "utf8")).filter((t) => /^\d+\n$/.test(t))
      yield* eventually("three processes started", () => written().length === 3, "30 seconds")
      const pids = written().map(Number)
      const helpers = (marker: string) => helpersOf(marker, child.pid!)
      const spawners = helpers("kiln-spawner")
      assert.strictEqual(spawners.length, 1, "one spawner")
      child.kill("SIGINT")
      // Without the escalation to SIGKILL, kiln would wait for processes that outlive SIGTERM (the test times out).
      const exit = yield* exitOf(child)
      assert.strictEqual(exit.code, 130)
      assert.sameMembers(fs.readdirSync(terms), ["1", "2", "3"], "each process got SIGTERM first")
      for (const pid of pids) assert.isFalse(isAlive(pid), `process ${pid} survived`)
      yield* eventually("the spawner exits", () => !isAlive(spawners[0]!), "20 seconds")
      // A clean end (an interrupted run is one) disarms the spawner: no post-mortem sandboxer is started.
      assert.deepStrictEqual(helpers("--parent-pid"), [], "a sandboxer runs")
      assert.deepStrictEqual(fs.readdirSync(path.join(root, "sandboxes")), [])
    }))
})

describe("kiln run: configuration errors (exit 2, one line)", () => {
  const cases: ReadonlyArray<[string, unknown, string]> = [
    [
      "unknown dep",
      { processes: { a: { argv: ["true"], deps: ["x", "gen"] }, gen: { argv: ["true"] } } },
      "kiln.json: processes.a.deps[0]: unknown process \"x\""
    ],
    [
      "cycle",
      { processes: { a: { argv: ["true"], deps: ["b"] }, b: { argv: ["true"], deps: ["a"] } } },
      "kiln.json: processes: dependency cycle: a -> b -> a"
    ],
    [
      "bad glob",
      { processes: { a: { argv: ["true"], inputs: ["../outside/**"] } } },
      "kiln.json: processes.a.inputs[0]: invalid glob \"../outside/**\": globs are relative to the workspace and stay inside it"
    ],
    [
      "bad duration",
      { processes: { a: { argv: ["true"], timeout: "90 parsecs" } } },
      "kiln.json: processes.a.timeout: invalid duration \"90 parsecs\": expected e.g. \"90s\" or \"5m\""
    ],
    [
      "unknown field",
      { processes: { a: { argv: ["true"], output: ["x"] } } },
      "kiln.json: processes.a.output: unknown field: did you mean \"outputs\"?"
    ],
    [
      "empty argv",
      { processes: { a: { argv: [] } } },
      "kiln.json: processes.a.argv: must not be empty: its first element is the command to run"
    ]
  ]
  for (const [what, config, message] of cases) {
    it.scoped(what, () =>
      Effect.gen(function*() {
        const { kiln, ws } = yield* workspace
        fs.writeFileSync(path.join(ws, "kiln.json"), JSON.stringify(config))
        const r = kiln(["run"])
        assert.strictEqual(r.code, 2)
        // The line and column, then the file's line (kiln.json is one line here) and a caret under the place.
        const [head, quoted, caret, ...rest] = r.stderr.trimEnd().split("\n")
        assert.match(head!, /^kiln: kiln\.json:1:\d+: /)
        assert.strictEqual(head!.replace(/^kiln: kiln\.json:1:\d+:/, "kiln: kiln.json:"), `kiln: ${message}`)
        assert.strictEqual(quoted, `  ${JSON.stringify(config)}`.slice(0, 103).replace(/^(.{102}).$/, "$1…"))
        assert.match(caret!, /^ {2,}\^$/)
        assert.deepStrictEqual(rest, [])
      }))
  }

  it.scoped("not JSON", () =>
    Effect.gen(function*() {
      const { kiln, ws } = yield* workspace
      fs.writeFileSync(path.join(ws, "kiln.json"), "{ processes: ")
      const r = kiln(["run"])
      assert.strictEqual(r.code, 2)
      assert.match(
        r.stderr,
        /^kiln: kiln\.json:1:3: not valid JSON: unexpected character\n {2}\{ processes: \n {4}\^\n/
      )
    }))

  it.scoped("a glob that matches nothing names the process and the glob", () =>
    Effect.gen(function*() {
      const { kiln, ws } = yield* workspace
      fs.writeFileSync(
        path.join(ws, "kiln.json"),
        JSON.stringify({ processes: { a: { argv: ["true"], inputs: ["nothing/**/*.c"] } } })
      )
      const r = kiln(["run"])
      assert.strictEqual(r.code, 1)
      assert.include(r.stderr, "kiln.json: processes.a.inputs[0]: glob \"nothing/**/*.c\" matches nothing")
    }))

  it.scoped("explain fails on a glob that matches nothing with the typed config error naming the process and glob", () =>
    Effect.gen(function*() {
      const { root, ws } = yield* workspace
      const config = path.join(ws, "kiln.json")
      fs.writeFileSync(config, JSON.stringify({ processes: { a: { argv: ["true"], inputs: ["nothing/**/*.c"] } } }))
      const error = yield* explainProcess({ names: ["a"], config }).pipe(
        Effect.provide(Engine.layer.pipe(Layer.provideMerge(stack({ root, inProcess: true })))),
        Effect.flip
      )
      assert.instanceOf(error, InvalidConfig)
      assert.strictEqual(error.message, "kiln.json: processes.a.inputs[0]: glob \"nothing/**/*.c\" matches nothing")
      // Through the CLI: that one line, exit 1 (the workspace's state, as for `run`), not a usage error.
      const r = spawnSync(process.execPath, [cli, "explain", "a", "--config", config, "--store-dir", `${root}/store`], {
        encoding: "utf8"
      })
      assert.strictEqual(r.status, 1)
      assert.strictEqual(r.stderr, `kiln: ${error.message}\n`)
    }))
})
