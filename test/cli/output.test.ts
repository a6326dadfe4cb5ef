/**
 * What `kiln run` shows of its processes' output (`--failure-lines`, `--output-logs`, `--log-order`), what
 * `kiln logs` prints, and the output digests of `--summary`: through the built CLI, on small workspaces of `node -e`
 * processes.
 */
import { assert, describe, it } from "@effect/vitest"
import { Duration, Effect, Option } from "effect"
import { spawn, spawnSync } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"
import type { Config } from "../../src/domain/config/Config.js"
import * as Progress from "../../src/programs/kiln/run/progress.js"
import { reproduceArgs } from "../../src/programs/kiln/run/reproduce.js"
import { directRunArgs } from "../../src/programs/kiln/run/runDirect.js"
import { eventually, exitOf } from "../utils/child.js"
import { cli } from "../utils/stack.js"
import { tempDir } from "../utils/temp.js"

interface Summary {
  readonly processes: ReadonlyArray<{
    name: string
    source: string
    exitCode: number | null
    stdoutDigest?: string
    stderrDigest?: string
  }>
}

/** A process that runs `script` with node. */
const node = (script: string, extra: Record<string, unknown> = {}) => ({ argv: ["node", "-e", script], ...extra })

/** Lines `first`..`last` of a stream, each `<prefix><n>`, written by a node script. */
const lines = (stream: "stdout" | "stderr", prefix: string, count: number) =>
  `for (let i = 1; i <= ${count}; i++) process.${stream}.write(${JSON.stringify(prefix)} + i + "\\n");`

const workspace = (processes: Record<string, unknown>) =>
  Effect.gen(function*() {
    const root = yield* tempDir("kiln-output-")
    const ws = path.join(root, "ws")
    fs.mkdirSync(ws)
    fs.writeFileSync(
      path.join(ws, "kiln.json"),
      JSON.stringify({ defaults: { env: { PATH: `${path.dirname(process.execPath)}:/usr/bin:/bin` } }, processes })
    )
    const store = path.join(root, "store")
    const sandboxes = path.join(root, "sandboxes")
    fs.mkdirSync(sandboxes)
    // Only through flags: the re-run line must carry them.
    const env: NodeJS.ProcessEnv = {
      ...process.env,
      KILN_NAMED_CACHES_DIR: path.join(root, "named"),
      KILN_LOCK_DIR: path.join(root, "l")
    }
    delete env.KILN_STORE_DIR
    delete env.KILN_SANDBOX_ROOT
    const kiln = (args: ReadonlyArray<string>) => {
      const r = spawnSync(process.execPath, [cli, ...args, "--store-dir", store], { cwd: ws, encoding: "utf8", env })
      return { code: r.status, stdout: r.stdout, stderr: r.stderr }
    }
    const run = (args: ReadonlyArray<string>) => {
      const summaryFile = path.join(root, `summary-${Math.random().toString(36).slice(2)}.json`)
      const r = kiln(["run", "--progress", "plain", ...args, "--sandbox-root", sandboxes, "--summary", summaryFile])
      const summary = fs.existsSync(summaryFile)
        ? JSON.parse(fs.readFileSync(summaryFile, "utf8")) as Summary
        : undefined
      return { ...r, summary }
    }
    return { root, ws, env, store, sandboxes, kiln, run }
  })

const count = (text: string, part: string) => text.split(part).length - 1

describe("a failed process's output", () => {
  it.scoped("a failure that reports on stdout only shows those lines, once, then a re-run line that re-runs it", () =>
    Effect.gen(function*() {
      const { env, run, sandboxes, store } = yield* workspace({
        test: node(`console.log("not ok 1 - adds"); console.log("expected 3, got 4"); process.exit(1)`)
      })
      const r = run([])
      assert.strictEqual(r.code, 1, r.stderr)
      assert.strictEqual(count(r.stderr, "✗ test exit 1"), 1, r.stderr)
      assert.include(r.stderr, "✗ test exit 1\nnot ok 1 - adds\nexpected 3, got 4\nre-run it with: kiln exec ")
      const rerun = r.stderr.split("\n").find((l) => l.startsWith("re-run it with: "))!
      assert.include(rerun, `--store-dir ${store}`)
      assert.include(rerun, `--sandbox-root ${sandboxes}`)
      // The line re-runs it as the run did: same store, same sandbox root, same output and exit code.
      const exec = spawnSync(
        "/bin/sh",
        ["-c", rerun.slice("re-run it with: ".length).replace(/^kiln /, `'${process.execPath}' '${cli}' `)],
        { encoding: "utf8", env }
      )
      assert.strictEqual(exec.status, 1, exec.stderr)
      assert.strictEqual(exec.stdout, "not ok 1 - adds\nexpected 3, got 4\n")
    }))

  it.scoped("both streams are shown, each under its name; --failure-lines N keeps the last N of each", () =>
    Effect.gen(function*() {
      const { run } = yield* workspace({
        build: node(`${lines("stdout", "out ", 30)} ${lines("stderr", "err ", 5)} process.exit(2)`)
      })
      const r = run([])
      assert.strictEqual(r.code, 1, r.stderr)
      assert.include(r.stderr, "--- stdout: its last 20 of 30 lines (`kiln logs build` prints them all) ---\nout 11\n")
      assert.include(r.stderr, "out 30\n--- stderr ---\nerr 1\n")
      assert.notInclude(r.stderr, "out 10\n")
      const few = run(["--failure-lines", "3"])
      assert.strictEqual(few.code, 1, few.stderr)
      assert.include(
        few.stderr,
        "✗ build exit 2\n--- stdout: its last 3 of 30 lines (`kiln logs build` prints them all) ---\nout 28\nout 29\n" +
          "out 30\n--- stderr: its last 3 of 5 lines (`kiln logs build` prints them all) ---\nerr 3\nerr 4\nerr 5\n" +
          "re-run it with: "
      )
    }))

  it.scoped("a failure is shown when it happens: before what runs after it", () =>
    Effect.gen(function*() {
      const { run } = yield* workspace({
        fails: node(`console.log("why it failed"); process.exit(1)`),
        later: node(`console.log("fine")`, { deps: [] })
      })
      const r = run(["--concurrency", "1", "--keep-going", "fails", "later"])
      assert.strictEqual(r.code, 1, r.stderr)
      const shown = r.stderr.indexOf("re-run it with: ")
      assert.isAbove(shown, 0, r.stderr)
      assert.isBelow(shown, r.stderr.indexOf("✓ later"), r.stderr)
      assert.strictEqual(count(r.stderr, "\nwhy it failed\n"), 1, r.stderr)
    }))
})

describe("the re-run line's run options", () => {
  it("carries the remote flags as given, kiln.json's remote as flags, paths absolute, and the cache namespace", () => {
    const args = {
      ...directRunArgs(["run", "--sandbox-root", "sb", "--keep-going", "--concurrency", "3"])!,
      remoteExecutor: Option.some("grpcs://exec:443"),
      remoteHeader: ["Authorization=$TOKEN"],
      remoteTimeout: Option.some(Duration.seconds(5)),
      storeMaxReaders: Option.some(512)
    }
    const config = {
      processes: {},
      cacheNamespace: "ci",
      remote: { cache: "grpcs://cache:443", ca: "certs/ca.pem", instanceName: "main" }
    } as unknown as Config
    assert.deepStrictEqual(reproduceArgs(args, config, "/ws"), [
      "--sandbox-root",
      path.resolve("sb"),
      "--store-max-readers",
      "512",
      "--remote-executor",
      "grpcs://exec:443",
      "--remote-header",
      "Authorization=$TOKEN",
      "--remote-timeout",
      "5000ms",
      "--remote-cache",
      "grpcs://cache:443",
      "--remote-instance-name",
      "main",
      "--remote-ca",
      "/ws/certs/ca.pem",
      "--cache-namespace",
      "ci"
    ])
  })
})

describe("--output-logs and --log-order", () => {
  const chatty = {
    hello: node(`console.log("hello says hi"); console.error("hello warns")`),
    // One write: followed, its lines cannot be told apart by another process's.
    other: node(`process.stdout.write("other one\\nother two\\n")`)
  }

  it.scoped("full shows every process's output and replays a cached one's; new-only hides hits; none shows none", () =>
    Effect.gen(function*() {
      const { run } = yield* workspace(chatty)
      const quiet = run([])
      assert.strictEqual(quiet.code, 0, quiet.stderr)
      assert.notInclude(quiet.stderr, "hello says hi")
      const fresh = yield* workspace(chatty)
      const first = fresh.run(["--output-logs", "new-only", "--log-order", "grouped"])
      assert.strictEqual(first.code, 0, first.stderr)
      assert.match(first.stderr, /✓ hello [\d.]+s\nhello says hi\nhello warns\n/)
      const hidden = fresh.run(["--output-logs", "new-only"])
      assert.strictEqual(hidden.summary!.processes.every((p) => p.source === "cache-hit"), true, hidden.stderr)
      assert.notInclude(hidden.stderr, "hello says hi")
      const replayed = fresh.run(["--output-logs", "full", "--log-order", "grouped"])
      assert.strictEqual(replayed.code, 0, replayed.stderr)
      assert.include(replayed.stderr, "✓ hello (cached)\ncache hit, replaying logs\nhello says hi\nhello warns\n")
      // As turbo's none: no process's line and no output; the totals still.
      const none = fresh.run(["--output-logs", "none", "--cache", "off"])
      assert.strictEqual(none.code, 0, none.stderr)
      assert.match(none.stderr, /^kiln: 2 processes: 2 ran, 0 cached, 0 failed in [\d.]+s\n$/)
      // Answered from the run memo, as from the engine.
      const noneHit = fresh.run(["--output-logs", "none"])
      assert.match(noneHit.stderr, /^kiln: 2 processes: 0 ran, 2 cached, 0 failed in [\d.]+s\n$/)
    }))

  it.scoped("stream prefixes each line with its process's name; grouped keeps a process's lines together", () =>
    Effect.gen(function*() {
      const { run } = yield* workspace(chatty)
      const streamed = run(["--output-logs", "full", "--concurrency", "2"])
      assert.strictEqual(streamed.code, 0, streamed.stderr)
      assert.include(streamed.stderr, "other: other one\nother: other two\n")
      assert.include(streamed.stderr, "hello: hello says hi\nhello: hello warns\n")
      const grouped = run(["--output-logs", "full", "--concurrency", "2", "--log-order", "grouped"])
      assert.include(grouped.stderr, "✓ other (cached)\ncache hit, replaying logs\nother one\nother two\n")
    }))

  it.scoped("a failure under none: its line and its re-run line, not its output, nor the others' lines", () =>
    Effect.gen(function*() {
      const { run } = yield* workspace({
        fails: node(`console.log("the reason"); process.exit(4)`, { deps: ["fine"] }),
        fine: node(`console.log("fine says hi")`)
      })
      const r = run(["--output-logs", "none"])
      assert.strictEqual(r.code, 1, r.stderr)
      assert.match(
        r.stderr,
        /^✗ fails exit 4\nre-run it with: kiln exec [^\n]*\nkiln: 2 processes: 2 ran, 0 cached, 1 failed in [\d.]+s\n$/
      )
    }))
})

describe("kiln logs and the summary's output digests", () => {
  it.scoped("kiln logs NAME prints its last run's output, a failure's and a cache hit's; --summary names the digests", () =>
    Effect.gen(function*() {
      const { kiln, run, store, ws } = yield* workspace({
        says: node(`console.log("to stdout"); console.error("to stderr")`),
        reads: node(`console.log(require("fs").readFileSync("in.txt", "utf8").trim())`, { inputs: ["in.txt"] }),
        fails: node(`console.log("failing on stdout"); process.exit(5)`)
      })
      const never = kiln(["logs", "says"])
      assert.strictEqual(never.code, 1)
      assert.match(never.stderr, /^kiln: says has no run recorded in .* on this store: `kiln run says` runs it\n$/)
      fs.writeFileSync(path.join(ws, "in.txt"), "first\n")
      const first = run(["--keep-going"])
      assert.strictEqual(first.code, 1, first.stderr)
      const says = first.summary!.processes.find((p) => p.name === "says")!
      assert.match(says.stdoutDigest ?? "", /^[0-9a-f]{64}\/10$/)
      assert.match(says.stderrDigest ?? "", /^[0-9a-f]{64}\/10$/)
      const cat = spawnSync(process.execPath, [cli, "store", "cat", says.stdoutDigest!, "--store-dir", store], {
        encoding: "utf8"
      })
      assert.strictEqual(cat.stdout, "to stdout\n", cat.stderr)
      const logs = kiln(["logs", "says"])
      assert.strictEqual(logs.code, 0, logs.stderr)
      assert.strictEqual(logs.stdout, "to stdout\n")
      assert.match(logs.stderr, /^to stderr\nkiln: says's last run, action [0-9a-f]{64}\/\d+: stdout /)
      const failed = kiln(["logs", "fails"])
      assert.strictEqual(failed.stdout, "failing on stdout\n")
      assert.include(failed.stderr, "kiln: fails's last run (exit 5), action ")
      // A cache hit: the logs are the cached result's, and the summary's digests the same.
      const hit = run(["says"])
      assert.strictEqual(hit.summary!.processes[0]!.source, "cache-hit", hit.stderr)
      assert.strictEqual(hit.summary!.processes[0]!.stdoutDigest, says.stdoutDigest)
      assert.strictEqual(kiln(["logs", "reads"]).stdout, "first\n")
      fs.writeFileSync(path.join(ws, "in.txt"), "second\n")
      assert.strictEqual(run(["reads"]).summary!.processes[0]!.source, "ran")
      assert.strictEqual(kiln(["logs", "reads"]).stdout, "second\n")
      fs.writeFileSync(path.join(ws, "in.txt"), "first\n")
      const back = run(["reads"])
      assert.strictEqual(back.summary!.processes[0]!.source, "cache-hit", back.stderr)
      const fromHit = kiln(["logs", "reads"])
      assert.strictEqual(fromHit.stdout, "first\n", fromHit.stderr)
    }))
})

describe("followed output", () => {
  it.scopedLive("under --output-logs full, a process's lines are printed as it writes them, before it ends", () =>
    Effect.gen(function*() {
      const { env, root, sandboxes, store, ws } = yield* workspace({})
      const go = path.join(root, "go")
      const waits = `process.stdout.write("early line\\n"); ` +
        `const t = setInterval(() => { if (require("fs").existsSync(${JSON.stringify(go)})) { ` +
        `clearInterval(t); console.log("late line") } }, 20)`
      fs.writeFileSync(
        path.join(ws, "kiln.json"),
        JSON.stringify({
          // The test tells the process to go on through a file of the host, which the strict view would hide.
          sandbox: "off",
          processes: {
            live: {
              argv: ["node", "-e", waits],
              cache: "never",
              env: { PATH: `${path.dirname(process.execPath)}:/bin` }
            },
            other: { argv: ["/bin/sh", "-c", "echo other"], env: { PATH: "/bin" } }
          }
        })
      )
      const child = spawn(
        process.execPath,
        [
          cli,
          "run",
          "--output-logs",
          "full",
          "--concurrency",
          "2",
          "--progress",
          "plain",
          "--store-dir",
          store,
          "--sandbox-root",
          sandboxes
        ],
        { cwd: ws, env, stdio: ["ignore", "ignore", "pipe"] }
      )
      yield* Effect.addFinalizer(() => Effect.sync(() => child.exitCode === null && child.kill("SIGKILL")))
      let stderr = ""
      child.stderr!.on("data", (d: Buffer) => void (stderr += d.toString()))
      // The process waits for this file, made only once its first line has been shown: it cannot have ended first.
      yield* eventually("its first line shown while it runs", () => stderr.includes("live: early line\n"), "30 seconds")
      assert.notInclude(stderr, "✓ live")
      fs.writeFileSync(go, "")
      const exit = yield* exitOf(child)
      yield* eventually("stderr read to its end", () => child.stderr!.readableEnded, "10 seconds")
      assert.strictEqual(exit.code, 0, stderr)
      assert.match(stderr, /live: early line\n(.*\n)*live: late line\n✓ live /)
      assert.strictEqual(count(stderr, "early line"), 1, stderr)
    }))
})

describe("what is running, and what Ctrl-C cut short", () => {
  it("the status line counts as running only processes whose tool has a slot, each timed from its start", () => {
    const running = new Map([["compile", 1_000], ["test", 3_000]])
    assert.strictEqual(
      Progress.statusLine({ total: 10, done: 3, cached: 1, failed: 0, running, ending: 1 }, 4_500),
      "3/10 done, 1 cached, 2 running, 4 queued, 0 failed | compile 3.5s, test 1.5s"
    )
    assert.strictEqual(Progress.interruptedLine(["a", "b"], 3), "kiln: interrupted a, b; 3 not started")
    assert.strictEqual(Progress.interruptedLine([], 2), "kiln: interrupted 2 not started")
  })

  it.scopedLive("Ctrl-C names the processes it interrupted, and counts those that had not started", () =>
    Effect.gen(function*() {
      const { env, root, sandboxes, store, ws } = yield* workspace({})
      const marks = path.join(root, "marks")
      fs.mkdirSync(marks)
      const long = (name: string) => ({
        argv: ["/bin/sh", "-c", `echo > ${marks}/${name}; exec sleep 300`],
        cache: "never",
        env: { PATH: "/usr/bin:/bin" }
      })
      // Each process marks its start in a directory of the host, which the strict view would hide.
      fs.writeFileSync(
        path.join(ws, "kiln.json"),
        JSON.stringify({ sandbox: "off", processes: { a: long("a"), b: long("b") } })
      )
      const child = spawn(
        process.execPath,
        [cli, "run", "--concurrency", "1", "--progress", "plain", "--store-dir", store, "--sandbox-root", sandboxes],
        { cwd: ws, env, stdio: ["ignore", "ignore", "pipe"] }
      )
      yield* Effect.addFinalizer(() => Effect.sync(() => child.exitCode === null && child.kill("SIGKILL")))
      let stderr = ""
      child.stderr!.on("data", (d: Buffer) => void (stderr += d.toString()))
      yield* eventually("a process started", () => fs.readdirSync(marks).length === 1, "30 seconds")
      const first = fs.readdirSync(marks)[0]!
      child.kill("SIGINT")
      const exit = yield* exitOf(child)
      yield* eventually("stderr read to its end", () => child.stderr!.readableEnded, "10 seconds")
      assert.strictEqual(exit.code, 130, stderr)
      assert.include(stderr, `kiln: interrupted ${first}; 1 not started\n`)
    }))
})
