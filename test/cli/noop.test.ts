/**
 * The no-op check end to end, through the built CLI: a run where nothing changed is answered from the run memo (the
 * lines, summary and exit code of a run that found everything cached), and every kind of change, to inputs,
 * outputs, config, options or the store, falls through to the full run, which acts on it. `KILN_NOOP_DEBUG=1` makes
 * the check say what it decided.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { spawn, spawnSync } from "node:child_process"
import { randomUUID } from "node:crypto"
import * as fs from "node:fs"
import * as path from "node:path"
import * as Digest from "../../src/domain/Digest.js"
import { WARM_ENV } from "../../src/layers/spawner/Warm.js"
import * as Store from "../../src/layers/store/Store.js"
import * as StoreMaintenance from "../../src/layers/store/StoreMaintenance.js"
import { eventually, exitOf, firstLine, spawnScoped } from "../utils/child.js"
import { deadPort, remoteServers } from "../utils/remote.js"
import { cli } from "../utils/stack.js"
import { tempDir } from "../utils/temp.js"

interface Summary {
  readonly processes: ReadonlyArray<
    {
      name: string
      source: string
      exitCode: number | null
      durationMs: number
      backtracks: number
      actionDigest: string | null
    }
  >
  readonly ran: number
  readonly cacheHits: number
  readonly failed: number
  readonly backtracks: number
}

const PATH = "/usr/bin:/bin"
const lmdbWorker = path.resolve(".kiln-test/fixtures/lmdbWorker.mjs")

const CONFIG = {
  processes: {
    gen: {
      argv: ["/bin/sh", "-c", "mkdir -p out && cat src/* > out/gen.txt"],
      inputs: ["src/**"],
      outputs: ["out/gen.txt"],
      env: { PATH }
    },
    copy: {
      argv: ["/bin/sh", "-c", "mkdir -p d && cp lib/*.txt d/"],
      inputs: ["lib/*.txt"],
      outputs: ["d/"],
      env: { PATH }
    },
    use: {
      argv: ["/bin/sh", "-c", "wc -c < out/gen.txt > use.txt"],
      deps: ["gen"],
      outputs: ["use.txt"],
      env: { PATH }
    }
  }
}

const workspace = Effect.gen(function*() {
  const root = yield* tempDir("kiln-noop-")
  const ws = path.join(root, "ws")
  for (const [rel, text] of Object.entries({ "src/a.txt": "a\n", "src/b.txt": "b\n", "lib/x.txt": "x\n" })) {
    fs.mkdirSync(path.dirname(path.join(ws, rel)), { recursive: true })
    fs.writeFileSync(path.join(ws, rel), text)
  }
  const writeConfig = (config: unknown) => fs.writeFileSync(path.join(ws, "kiln.json"), JSON.stringify(config))
  writeConfig(CONFIG)
  fs.mkdirSync(path.join(root, "sandboxes"))
  const env = {
    ...process.env,
    KILN_STORE_DIR: path.join(root, "store"),
    KILN_SANDBOX_ROOT: path.join(root, "sandboxes"),
    KILN_NAMED_CACHES_DIR: path.join(root, "named"),
    KILN_NOOP_DEBUG: "1"
  }
  let runs = 0
  const kiln = (args: ReadonlyArray<string> = ["run"], extraEnv: NodeJS.ProcessEnv = {}) => {
    const summaryFile = path.join(root, `summary-${++runs}.json`)
    const r = spawnSync(process.execPath, [cli, ...args, "--progress", "plain", "--summary", summaryFile], {
      cwd: ws,
      encoding: "utf8",
      env: { ...env, ...extraEnv }
    })
    const summary = fs.existsSync(summaryFile) ? JSON.parse(fs.readFileSync(summaryFile, "utf8")) as Summary : undefined
    const check = /^kiln: no-op check: (.*)$/m.exec(r.stderr)?.[1]
    const warmed = r.stderr.includes("kiln: no-op check: a process will run: spawner started")
    const lines = r.stderr.split("\n").filter((l) => l !== "" && !l.startsWith("kiln: no-op check:"))
    return { code: r.status, stderr: r.stderr, summary, check, warmed, lines }
  }
  const read = (rel: string) => fs.readFileSync(path.join(ws, rel), "utf8")
  return { root, ws, env, kiln, read, writeConfig }
})

type Run = ReturnType<Effect.Effect.Success<typeof workspace>["kiln"]>

const answered = (r: Run, after?: string) => {
  assert.strictEqual(r.code, 0, r.stderr)
  assert.strictEqual(r.check, "nothing changed", `${after !== undefined ? `after ${after}: ` : ""}${r.stderr}`)
}

const sourceOf = (r: Run, name: string) => r.summary?.processes.find((p) => p.name === name)?.source

/** What a summary says about each process, without its timings. */
const outcome = (s: Summary | undefined) =>
  [...(s?.processes ?? [])].map(({ actionDigest, backtracks, exitCode, name, source }) => ({
    name,
    actionDigest,
    source,
    exitCode,
    backtracks
  })).sort((a, b) => a.name.localeCompare(b.name))

describe("the no-op check", () => {
  it.scoped("a run where nothing changed is answered as a fully cached run would be, right after the cold run", () =>
    Effect.gen(function*() {
      const { kiln, root } = yield* workspace
      const cold = kiln()
      assert.strictEqual(cold.code, 0, cold.stderr)
      assert.strictEqual(cold.summary!.ran, 3)
      const noop = kiln()
      answered(noop)
      // The full run, made to look (`--trace` is an option the check leaves to it), finds the same.
      const full = kiln(["run", "--trace", path.join(root, "trace.json")])
      assert.strictEqual(full.code, 0, full.stderr)
      assert.match(full.check ?? "", /^option --trace/)
      assert.strictEqual(full.summary!.cacheHits, 3)
      assert.deepStrictEqual(outcome(noop.summary), outcome(full.summary))
      assert.deepStrictEqual(outcome(noop.summary).map((p) => p.source), ["cache-hit", "cache-hit", "cache-hit"])
      assert.deepStrictEqual(
        outcome(noop.summary).map((p) => p.actionDigest),
        outcome(cold.summary).map((p) => p.actionDigest)
      )
      assert.deepStrictEqual([...noop.lines.slice(0, -1)].sort(), [...full.lines.slice(0, -1)].sort())
      assert.match(noop.lines.at(-1)!, /^kiln: 3 processes: 0 ran, 3 cached, 0 failed in \d+\.\d\ds$/)
      // Only the targets and their deps, as the full run would.
      const one = kiln(["run", "use"])
      answered(one)
      assert.deepStrictEqual(one.summary!.processes.map((p) => p.name), ["use", "gen"])
      assert.deepStrictEqual(one.lines.slice(0, -1), ["✓ gen (cached)", "✓ use (cached)"])
    }))

  it.scoped("outputs deleted from inside the directory a process globs are written back without snapshotting it", () =>
    Effect.gen(function*() {
      const { kiln, read, root, writeConfig, ws } = yield* workspace
      fs.mkdirSync(path.join(ws, "pkg"))
      fs.writeFileSync(path.join(ws, "pkg", "a.txt"), "a\n")
      writeConfig({
        processes: {
          build: {
            argv: ["/bin/sh", "-c", "mkdir -p pkg/dist && cat pkg/*.txt > pkg/dist/all.txt"],
            inputs: ["pkg/**"],
            outputs: ["pkg/dist/"],
            env: { PATH }
          }
        }
      })
      assert.strictEqual(kiln().code, 0)
      // The cold run saw the package's directory before its own outputs were made in it, which its glob never takes.
      answered(kiln(), "the cold run")
      // The full run finds the same inputs: a glob that took its own process's outputs would make every re-run differ.
      const full = kiln(["run", "--trace", path.join(root, "trace.json")])
      assert.strictEqual(sourceOf(full, "build"), "cache-hit")
      // The package's directory lists other names now; only an output of a process is gone from it.
      fs.rmSync(path.join(ws, "pkg", "dist"), { recursive: true })
      const restore = kiln()
      assert.strictEqual(restore.code, 0, restore.stderr)
      assert.strictEqual(restore.check, "build: pkg/dist/all.txt changed")
      assert.isFalse(restore.warmed, "its inputs hold: nothing will run")
      assert.strictEqual(sourceOf(restore, "build"), "cache-hit")
      assert.strictEqual(restore.summary!.processes[0]!.durationMs, 0, "taken from the memo, not snapshotted")
      assert.strictEqual(read("pkg/dist/all.txt"), "a\n")
      answered(kiln(), "the restore")
      // A name added beside the outputs is one the glob may take: the inputs are looked at again.
      fs.rmSync(path.join(ws, "pkg", "dist"), { recursive: true })
      fs.writeFileSync(path.join(ws, "pkg", "b.txt"), "b\n")
      const added = kiln()
      assert.strictEqual(added.check, "build: pkg changed")
      assert.strictEqual(sourceOf(added, "build"), "ran")
      assert.strictEqual(read("pkg/dist/all.txt"), "a\nb\n")
    }))

  it.scoped("under --pending-deprecation it answers the same from public fs calls, and prints no warning", () =>
    Effect.gen(function*() {
      const { kiln, ws } = yield* workspace
      assert.strictEqual(kiln().code, 0)
      const pending = { NODE_OPTIONS: "--pending-deprecation" }
      const noop = kiln(["run"], pending)
      answered(noop)
      assert.notMatch(noop.stderr, /Warning/)
      assert.notMatch(kiln().stderr, /Warning/)
      fs.appendFileSync(path.join(ws, "src/a.txt"), "more\n")
      const edited = kiln(["run"], pending)
      assert.strictEqual(edited.code, 0, edited.stderr)
      assert.match(edited.check ?? "", /src\/a\.txt changed/)
      assert.notMatch(edited.stderr, /Warning/)
      answered(kiln(["run"], pending), "the edit ran")
    }))

  it.scoped("every change to inputs, outputs or config falls through to the full run, which acts on it", () =>
    Effect.gen(function*() {
      const { kiln, read, writeConfig, ws } = yield* workspace
      assert.strictEqual(kiln().code, 0)
      answered(kiln())
      const changes: ReadonlyArray<
        { what: string; change: () => void; check: RegExp; after: (r: Run) => void }
      > = [
        {
          what: "an input edited, same size",
          change: () => fs.writeFileSync(path.join(ws, "src/a.txt"), "A\n"),
          check: /^gen: src\/a\.txt changed$/,
          after: (r) => {
            assert.isTrue(r.warmed, "a process will run: its spawner starts before the engine loads")
            assert.strictEqual(sourceOf(r, "gen"), "ran")
            assert.strictEqual(read("out/gen.txt"), "A\nb\n")
          }
        },
        {
          what: "an input added to a globbed directory",
          change: () => fs.writeFileSync(path.join(ws, "src/c.txt"), "c\n"),
          check: /^gen: src changed$/,
          after: (r) => {
            assert.strictEqual(sourceOf(r, "gen"), "ran")
            assert.strictEqual(sourceOf(r, "use"), "ran")
            assert.strictEqual(read("use.txt").trim(), "6")
          }
        },
        {
          what: "an output deleted from the workspace",
          change: () => fs.rmSync(path.join(ws, "use.txt")),
          check: /^use: use\.txt changed$/,
          after: (r) => {
            assert.isFalse(r.warmed, "only outputs to write back: nothing runs, so no spawner is started")
            assert.strictEqual(sourceOf(r, "use"), "cache-hit")
            assert.strictEqual(read("use.txt").trim(), "6")
          }
        },
        {
          what: "an output overwritten in the workspace",
          change: () => fs.writeFileSync(path.join(ws, "out/gen.txt"), "junk"),
          check: /^gen: out\/gen\.txt changed$/,
          after: (r) => {
            assert.strictEqual(sourceOf(r, "gen"), "cache-hit")
            assert.strictEqual(read("out/gen.txt"), "A\nb\nc\n")
          }
        },
        {
          // Written back from the memo only while its inputs hold: here they do not, so it runs.
          what: "an output deleted and an input of its process edited",
          change: () => {
            fs.rmSync(path.join(ws, "out/gen.txt"))
            fs.writeFileSync(path.join(ws, "src/c.txt"), "C\n")
          },
          check: /^gen: src\/c\.txt changed$/,
          after: (r) => {
            assert.strictEqual(sourceOf(r, "gen"), "ran")
            assert.strictEqual(read("out/gen.txt"), "A\nb\nC\n")
          }
        },
        {
          what: "a stray file in a declared output directory",
          change: () => fs.writeFileSync(path.join(ws, "d/stray.txt"), ""),
          check: /^copy: d changed$/,
          after: (r) => {
            assert.strictEqual(sourceOf(r, "copy"), "cache-hit")
            assert.deepStrictEqual(fs.readdirSync(path.join(ws, "d")), ["x.txt"])
          }
        },
        {
          what: "the config changed",
          change: () =>
            writeConfig({
              processes: { ...CONFIG.processes, use: { ...CONFIG.processes.use, env: { PATH, LANG: "C" } } }
            }),
          check: /^kiln\.json changed$/,
          after: (r) => {
            assert.strictEqual(sourceOf(r, "use"), "ran")
            assert.strictEqual(sourceOf(r, "gen"), "cache-hit")
          }
        }
      ]
      for (const { after, change, check, what } of changes) {
        change()
        const r = kiln()
        assert.strictEqual(r.code, 0, `${what}: ${r.stderr}`)
        assert.match(r.check ?? "", check, what)
        after(r)
        answered(kiln(), `${what} (its run: ${r.stderr})`)
      }
    }))

  it.scoped("options it does not know, unknown names, uncached processes and failures go to the full run", () =>
    Effect.gen(function*() {
      const { kiln, writeConfig } = yield* workspace
      assert.strictEqual(kiln().code, 0)
      answered(kiln())
      for (
        const [args, check] of [
          [["run", "--cache", "off"], /^option --cache off$/],
          [["run", "--cache-content=fetch"], /^option --cache-content fetch$/],
          [["run", "--store-shards", "8"], /^option --store-shards$/]
        ] as const
      ) {
        const r = kiln(args)
        assert.match(r.check ?? "", check)
      }
      const unknown = kiln(["run", "nope"])
      assert.strictEqual(unknown.code, 2, unknown.stderr)
      assert.match(unknown.check ?? "", /^unknown process "nope"(: did you mean .*)?$/)

      writeConfig({ processes: { ...CONFIG.processes, copy: { ...CONFIG.processes.copy, cache: "never" } } })
      assert.strictEqual(kiln().code, 0)
      const never = kiln()
      assert.match(never.check ?? "", /^copy is never cached$/)
      assert.strictEqual(sourceOf(never, "copy"), "ran")
      assert.strictEqual(sourceOf(never, "gen"), "cache-hit")

      writeConfig({
        processes: { ...CONFIG.processes, bad: { argv: ["/bin/sh", "-c", "exit 3"], env: { PATH } } }
      })
      for (let i = 0; i < 2; i++) {
        const failed = kiln(["run", "bad", "use"])
        assert.strictEqual(failed.code, 1, failed.stderr)
        assert.notStrictEqual(failed.check, "nothing changed")
      }
    }))

  it.scoped("a remote named by an option is as one from the environment: a no-op asks it nothing, until uploads wait", () =>
    Effect.gen(function*() {
      const { kiln, writeConfig, ws } = yield* workspace
      // Actions of this test's own: the server keeps what other runs sent.
      writeConfig({ ...CONFIG, cacheNamespace: randomUUID() })
      const live = ["--remote-cache", remoteServers().httpUrl, "--remote-jobs", "4"]
      const cold = kiln(["run", ...live])
      assert.strictEqual(cold.code, 0, cold.stderr)
      assert.strictEqual(cold.summary!.ran, 3)
      answered(kiln(["run", ...live]))
      // Nothing to ask a remote about: one that is not there is never found out.
      const dead = ["--remote-cache", `http://127.0.0.1:${yield* Effect.promise(deadPort)}`]
      answered(kiln(["run", ...dead]), "the remote's endpoint changed")
      // A run that left uploads waiting has its next run with a remote take them up.
      fs.writeFileSync(path.join(ws, "src/a.txt"), "a, edited\n")
      const edited = kiln(["run", ...dead])
      assert.strictEqual(edited.code, 0, edited.stderr)
      assert.isAbove((edited.summary as unknown as { pendingUploads: number }).pendingUploads, 0, edited.stderr)
      const next = kiln(["run", ...dead])
      assert.strictEqual(next.check, "uploads to the remote cache are pending")
      assert.strictEqual(next.summary!.cacheHits, 3, next.stderr)
      // Without a remote, they wait: the memo answers.
      answered(kiln(["run"]))
      // A bad endpoint is the full run's to refuse, whether the memo could answer or not.
      for (
        const [args, env] of [[["--remote-cache", "ftp://x"]], [[], { KILN_REMOTE_CACHE: "grpc://h/path" }]] as const
      ) {
        const bad = kiln(["run", ...args], env)
        assert.strictEqual(bad.code, 2, bad.stderr)
        assert.match(bad.check ?? "", /: a bad URL$/)
        assert.match(bad.stderr, /unsupported scheme|has no path/)
      }
    }))

  it.scoped("a store that lost entries is never trusted: the run re-makes what is gone", () =>
    Effect.gen(function*() {
      const { env, kiln, read } = yield* workspace
      assert.strictEqual(kiln().code, 0)
      answered(kiln())
      // Another kiln (here, this test) removes the bytes of an output from the shared store.
      yield* Effect.scoped(Effect.gen(function*() {
        const store = yield* Store.make({ root: env.KILN_STORE_DIR })
        assert.isTrue(
          yield* StoreMaintenance.make(store).remove(Digest.ofBytes(new TextEncoder().encode(read("use.txt"))))
        )
      }))
      const after = kiln()
      assert.strictEqual(after.code, 0, after.stderr)
      assert.match(after.check ?? "", /^the store has changed/)
      assert.strictEqual(sourceOf(after, "use"), "ran")
      assert.strictEqual(sourceOf(after, "gen"), "cache-hit")
      assert.strictEqual(read("use.txt").trim(), "4")
      answered(kiln())
    }))
})

/**
 * The spawners (warm or not) working for the engine of this pid, found by their command lines and their parent (a
 * child the spawner has forked but not yet exec'd shows the spawner's command line too).
 */
const spawnersOf = (pid: number): Array<number> =>
  fs.readdirSync("/proc").filter((d) => /^\d+$/.test(d)).flatMap((d) => {
    try {
      const argv = fs.readFileSync(`/proc/${d}/cmdline`, "utf8").split("\0").filter((a) => a !== "")
      const stat = fs.readFileSync(`/proc/${d}/stat`, "utf8")
      const ppid = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1])
      return argv.at(-2) === "kiln-spawner" && argv.at(-1) === String(pid) && ppid === pid ? [Number(d)] : []
    } catch {
      return [] // Gone meanwhile.
    }
  })

describe("the warm spawner", () => {
  const slowConfig = {
    processes: {
      slow: {
        argv: ["/bin/sh", "-c", "sleep 1 && cat src/* > slow.txt"],
        inputs: ["src/**"],
        outputs: ["slow.txt"],
        env: { PATH }
      }
    }
  }

  /** `kiln run` of `slow` in the background, in workspace `w` (SIGKILLed with the scope). */
  const startSlowIn = ({ env, root, writeConfig, ws }: Effect.Effect.Success<typeof workspace>) =>
    Effect.gen(function*() {
      writeConfig(slowConfig)
      const child = yield* Effect.acquireRelease(
        Effect.sync(() =>
          spawn(process.execPath, [cli, "run", "--progress", "none"], { cwd: ws, env, stdio: "ignore" })
        ),
        (c) => Effect.sync(() => c.exitCode === null && c.kill("SIGKILL"))
      )
      return { child, root, ws }
    })
  const startSlow = Effect.flatMap(workspace, startSlowIn)

  it.scopedLive("a run that will run something starts its spawner before the engine loads, and the engine uses it", () =>
    Effect.gen(function*() {
      const { child, root, ws } = yield* startSlow
      // While `slow` runs, the engine has exactly one spawner: the one its loader started (the only kind whose
      // environment says so).
      yield* eventually("the process runs", () =>
        fs.existsSync(path.join(root, "sandboxes")) &&
        fs.readdirSync(path.join(root, "sandboxes")).length > 0)
      const spawners = spawnersOf(child.pid!)
      assert.strictEqual(spawners.length, 1)
      assert.include(fs.readFileSync(`/proc/${spawners[0]}/environ`, "utf8"), `${WARM_ENV}=1`)
      assert.deepStrictEqual(yield* exitOf(child), { code: 0, signal: null })
      assert.strictEqual(fs.readFileSync(path.join(ws, "slow.txt"), "utf8"), "a\nb\n")
      yield* eventually("the spawner is gone", () => spawnersOf(child.pid!).length === 0, "20 seconds")
    }))

  it.scopedLive("an engine killed before it takes its warm spawner over leaves no spawner", () =>
    Effect.gen(function*() {
      // The premise, made certain: the engine takes the spawner over at its first process, after opening the store,
      // and opening it waits (lmdb-js opens its databases in a write transaction) while another process holds the
      // write lock of one of its shards.
      const w = yield* workspace
      const storeRoot = w.env.KILN_STORE_DIR!
      yield* Effect.scoped(Store.make({ root: storeRoot }))
      const options = Store.defaultOptions({ root: storeRoot })
      const locker = yield* spawnScoped(process.execPath, [
        lmdbWorker,
        JSON.stringify({
          mode: "hold-write-lock",
          path: path.join(storeRoot, "files", "0"),
          mapSize: options.filesMapSize,
          maxReaders: options.maxReaders,
          puts: 0,
          marker: path.join(storeRoot, "locked")
        })
      ])
      assert.match(yield* firstLine(locker), /^LOCKED \d+$/)
      const { child, root } = yield* startSlowIn(w)
      yield* eventually("the warm spawner starts", () => spawnersOf(child.pid!).length > 0)
      assert.strictEqual(locker.exitCode, null, "the lock holder ended: the engine could have opened the store")
      assert.deepStrictEqual(fs.readdirSync(path.join(root, "sandboxes")), [], "the engine ran a process already")
      child.kill("SIGKILL")
      yield* exitOf(child)
      yield* eventually("the spawner is gone", () => spawnersOf(child.pid!).length === 0, "20 seconds")
    }))
})
