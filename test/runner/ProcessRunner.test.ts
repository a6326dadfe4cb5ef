/**
 * The runner stack end to end (store, real sandboxer process, sandboxes, process groups), porting the behaviours of
 * Pants's local_tests.rs and cache_tests.rs.
 */
import { afterAll, assert, describe, it, layer } from "@effect/vitest"
import { Context, Effect, Exit, Fiber, Layer, Scope } from "effect"
import { spawnSync } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import * as Digest from "../../src/domain/Digest.js"
import { Process, type ProcessResult } from "../../src/domain/Process.js"
import { StoreError } from "../../src/domain/StoreErrors.js"
import * as HelperLifetime from "../../src/layers/lifetime/HelperLifetime.js"
import * as ProcessRunnerLayer from "../../src/layers/runner/ProcessRunner.js"
import { ProcessRunner } from "../../src/layers/runner/ProcessRunner.js"
import { SandboxMode } from "../../src/layers/runner/SandboxMode.js"
import * as SandboxesLayer from "../../src/layers/sandbox/Sandboxes.js"
import { Sandboxes } from "../../src/layers/sandbox/Sandboxes.js"
import * as Sandboxer from "../../src/layers/sandboxer/Sandboxer.js"
import * as StoreLayer from "../../src/layers/store/Store.js"
import { Store } from "../../src/layers/store/Store.js"
import * as StoreMaintenance from "../../src/layers/store/StoreMaintenance.js"
import * as MountNamespace from "../../src/os/mounts/MountNamespace.js"
import { isAlive } from "../../src/os/Proc.js"
import { childrenOf, eventually, groupAlive } from "../utils/child.js"
import { sandboxesLeft as left } from "../utils/sandboxes.js"
import { cli, stack } from "../utils/stack.js"
import { writeTree } from "../utils/temp.js"

const root = fs.mkdtempSync(path.join(os.tmpdir(), "kiln-runner-"))
const outside = fs.mkdtempSync(path.join(os.tmpdir(), "kiln-outside-"))

/**
 * For the cases whose processes and this test share files of the host (a tool, a pid, a log): without the strict
 * view, which rightly hides them. What they test is the runner's cache, groups and permits; the view's own ending of
 * a process's descendants is tested in test/sandbox/StrictView.test.ts.
 */
const viewOff = Effect.provideService(SandboxMode, "off")
const PATH = "/usr/bin:/bin"
afterAll(() => {
  fs.rmSync(root, { recursive: true, force: true })
  fs.rmSync(outside, { recursive: true, force: true })
})

const sh = (script: string, extra: Partial<ConstructorParameters<typeof Process>[0]> = {}) =>
  new Process({ argv: ["/bin/sh", "-c", script], env: { PATH }, inputDigest: Digest.empty, ...extra })

const text = (digest: Digest.Digest) =>
  Effect.flatMap(Store, (s) => Effect.map(s.getFile(digest), (b) => Buffer.from(b).toString("utf8")))
const tree = (digest: Digest.Digest) =>
  Effect.flatMap(Store, (s) => Effect.map(s.listTree(digest), (es) => es.map((e) => `${e.type}:${e.path}`)))
const run = (p: Process, cache?: { read: boolean; write: boolean }) =>
  Effect.flatMap(ProcessRunner, (r) => r.run(p, cache === undefined ? undefined : { cache }))
/** A unique marker so that no two tests share a cache key. */
let n = 0
const unique = () => `${process.pid}-${++n}-${Date.now()}`
const sandboxesLeft = () => left(path.join(root, "sandboxes")).filter((x) => !x.endsWith(".owner"))

layer(Layer.fresh(stack({ root })), { timeout: "60 seconds" })("ProcessRunner", (it) => {
  it.effect("captures stdout, stderr and the exit code; a non-zero exit is a result", () =>
    Effect.gen(function*() {
      const r = yield* run(sh(`echo out-${unique()}; echo err >&2; exit 3`))
      assert.strictEqual(r.exitCode, 3)
      assert.match(yield* text(r.stdoutDigest), /^out-/)
      assert.strictEqual(yield* text(r.stderrDigest), "err\n")
      assert.strictEqual(r.source, "ran")
      assert.deepStrictEqual(sandboxesLeft(), [])
    }))

  it.effect("stdout larger than what is kept in memory goes into the store whole, from its file", () =>
    Effect.gen(function*() {
      // 6 MiB of stdout (over the 4 MiB read into memory), and a small stderr beside it.
      const size = 6 * 1024 * 1024
      const r = yield* run(sh(`head -c ${size} /dev/zero | tr '\\0' x; echo ${unique()} >&2`))
      assert.strictEqual(r.exitCode, 0)
      assert.deepStrictEqual(r.stdoutDigest, Digest.ofBytes(Buffer.alloc(size, "x")))
      assert.match(yield* text(r.stderrDigest), /^\d+-\d+-\d+\n$/)
      assert.deepStrictEqual(sandboxesLeft(), [])
    }))

  it.effect("a process killed by a signal reports the signal", () =>
    Effect.gen(function*() {
      const r = yield* run(sh(`: ${unique()}; kill -KILL $$`))
      assert.strictEqual(r.exitCode, null)
      assert.strictEqual(r.signal, "SIGKILL")
    }))

  it.effect("the environment is exactly what is declared: no PATH unless declared", () =>
    Effect.gen(function*() {
      const r = yield* run(
        new Process({
          argv: ["/usr/bin/env"],
          env: { ONLY: `this-${unique()}` },
          inputDigest: Digest.empty
        })
      )
      // The strict view adds its private /tmp as TMPDIR, and nothing else.
      assert.match(
        yield* text(r.stdoutDigest),
        MountNamespace.strictProbe().works ? /^ONLY=this-[^\n]*\nTMPDIR=\/tmp\n$/ : /^ONLY=this-[^\n]*\n$/
      )
    }))

  it.effect("a missing binary is a SpawnError naming it", () =>
    Effect.gen(function*() {
      const err = yield* Effect.flip(
        run(new Process({ argv: [`/no/such/tool-${unique()}`], inputDigest: Digest.empty }))
      )
      assert.strictEqual(err._tag, "SpawnError")
      assert.include(err.message, "/no/such/tool-")
      assert.deepStrictEqual(sandboxesLeft(), [])
    }))

  it.effect("captures declared outputs: files, directories, partial, overlapping, empty dirs, symlinks", () =>
    Effect.gen(function*() {
      const r = yield* run(sh(
        `echo ${unique()} > one.txt; mkdir -p out/sub empty; echo a > out/a; echo b > out/sub/b; ln -s a out/link; echo nope > undeclared`,
        { outputFiles: ["one.txt", "missing.txt", "out/a"], outputDirectories: ["out", "empty", "absent"] }
      ))
      assert.strictEqual(r.exitCode, 0)
      assert.deepStrictEqual(yield* tree(r.outputDigest), [
        "directory:empty",
        "file:one.txt",
        "directory:out",
        "file:out/a",
        "symlink:out/link",
        "directory:out/sub",
        "file:out/sub/b"
      ])
    }))

  it.effect("outputs are captured on failure too, and failures are not cached", () =>
    Effect.gen(function*() {
      const p = sh(`echo partial-${unique()} > out.txt; exit 1`, { outputFiles: ["out.txt"] })
      const first = yield* run(p)
      assert.strictEqual(first.exitCode, 1)
      assert.deepStrictEqual(yield* tree(first.outputDigest), ["file:out.txt"])
      const second = yield* run(p)
      assert.strictEqual(second.source, "ran")
    }))

  it.effect("`always` caches failures", () =>
    Effect.gen(function*() {
      const p = sh(`: ${unique()}; exit 2`, { cache: "always" })
      yield* run(p)
      const again = yield* run(p)
      assert.strictEqual(again.source, "cache-hit")
      assert.strictEqual(again.exitCode, 2)
    }))

  it.effect("a cache hit does not run the tool: it hits after the tool is deleted", () =>
    Effect.gen(function*() {
      const tool = path.join(outside, `tool-${unique()}.sh`)
      fs.writeFileSync(tool, "#!/bin/sh\necho from the tool\n", { mode: 0o755 })
      const p = new Process({ argv: [tool], inputDigest: Digest.empty })
      const first = yield* run(p)
      assert.strictEqual(yield* text(first.stdoutDigest), "from the tool\n")
      fs.rmSync(tool)
      const second = yield* run(p)
      assert.strictEqual(second.source, "cache-hit")
      assert.strictEqual(yield* text(second.stdoutDigest), "from the tool\n")
      assert.strictEqual(Digest.format(second.actionDigest), Digest.format(first.actionDigest))
    }).pipe(viewOff))

  it.effect("a hit whose output bytes are gone is a miss: the process re-runs and its result replaces the entry", () =>
    Effect.gen(function*() {
      const store = yield* Store
      const p = sh(`echo fresh-${unique()} > out.txt`, { outputFiles: ["out.txt"] })
      const first = yield* run(p)
      const [file] = yield* store.listTree(first.outputDigest)
      yield* StoreMaintenance.make(store).remove(file!.digest!)
      const second = yield* run(p)
      assert.strictEqual(second.source, "ran")
      const third = yield* run(p)
      assert.strictEqual(third.source, "cache-hit")
      yield* store.ensureTree(third.outputDigest, { complete: true })
    }))

  it.effect("reads off and writes on (backtracking) re-runs and replaces", () =>
    Effect.gen(function*() {
      const p = sh(`echo ${unique()}`)
      yield* run(p)
      const forced = yield* run(p, { read: false, write: true })
      assert.strictEqual(forced.source, "ran")
    }))

  it.effect("the working directory is where the process runs and what outputs are relative to", () =>
    Effect.gen(function*() {
      const r = yield* run(
        sh(`pwd > where.txt; echo ${unique()}`, { workingDirectory: "a/b", outputFiles: ["where.txt"] })
      )
      const store = yield* Store
      const [entry] = yield* store.listTree(r.outputDigest)
      assert.match(Buffer.from(yield* store.getFile(entry!.digest!)).toString(), /kiln-sandbox-[0-9a-z_-]+\/a\/b\n$/)
    }))

  it.effect("inputs are materialized, executable bits included", () =>
    Effect.gen(function*() {
      const store = yield* Store
      const work = fs.mkdtempSync(path.join(outside, "in-"))
      fs.writeFileSync(path.join(work, "tool.sh"), `#!/bin/sh\ncat data.txt\n`, { mode: 0o755 })
      fs.writeFileSync(path.join(work, "data.txt"), `data ${unique()}\n`)
      const input = yield* store.snapshot(work)
      const r = yield* run(new Process({ argv: ["./tool.sh"], inputDigest: input }))
      assert.strictEqual(r.exitCode, 0)
      assert.match(yield* text(r.stdoutDigest), /^data /)
    }))

  it.effect("{chroot} is replaced in argv and env, and two runs share one cache entry", () =>
    Effect.gen(function*() {
      const u = unique()
      const p = new Process({
        argv: [
          "/bin/sh",
          "-c",
          `test "$0" = "$HERE" && case "$0" in */kiln-sandbox-*) echo ok-${u};; esac`,
          "{chroot}"
        ],
        env: { HERE: "{chroot}", PATH },
        inputDigest: Digest.empty
      })
      const first = yield* run(p)
      assert.strictEqual(yield* text(first.stdoutDigest), `ok-${u}\n`)
      const second = yield* run(p)
      assert.strictEqual(second.source, "cache-hit")
    }))

  it.effect("named caches are shared between runs and live outside the sandbox", () =>
    Effect.gen(function*() {
      const u = unique()
      const write = sh(`echo ${u} > cache/marker-${u}`, { namedCaches: { shared: "cache" }, cache: "never" })
      yield* run(write)
      const read = sh(`cat cache/marker-${u}`, { namedCaches: { shared: "cache" }, cache: "never" })
      const r = yield* run(read)
      assert.strictEqual(yield* text(r.stdoutDigest), `${u}\n`)
      assert.isTrue(fs.existsSync(path.join(root, "named_caches", "shared", `marker-${u}`)))
    }))

  it.effect("a named cache takes the place of what the inputs hold at its path (a tool's cache left by a run by hand)", () =>
    Effect.gen(function*() {
      const store = yield* Store
      const u = unique()
      const work = fs.mkdtempSync(path.join(outside, "in-"))
      // What `vitest run` in a package leaves: its cache under the package's node_modules, which the inputs take.
      fs.mkdirSync(path.join(work, "node_modules", ".vite", "vitest"), { recursive: true })
      fs.writeFileSync(path.join(work, "node_modules", ".vite", "vitest", "results.json"), "stale\n")
      fs.writeFileSync(path.join(work, "node_modules", ".vite", "top.txt"), "stale\n")
      fs.writeFileSync(path.join(work, "src.txt"), `${u}\n`)
      const input = yield* store.snapshot(work)
      const r = yield* run(
        new Process({
          argv: ["/bin/sh", "-c", `ls node_modules/.vite; echo ${u} > node_modules/.vite/seen-${u}`],
          env: { PATH },
          inputDigest: input,
          namedCaches: { vite: "node_modules/.vite" },
          cache: "never"
        })
      )
      assert.strictEqual(r.exitCode, 0, yield* text(r.stderrDigest))
      // The process saw the named cache, not the inputs' copy, and wrote into it.
      assert.notInclude(yield* text(r.stdoutDigest), "top.txt")
      assert.strictEqual(fs.readFileSync(path.join(root, "named_caches", "vite", `seen-${u}`), "utf8"), `${u}\n`)
      // The workspace copy the inputs were taken from is untouched.
      assert.strictEqual(fs.readFileSync(path.join(work, "node_modules", ".vite", "top.txt"), "utf8"), "stale\n")
      assert.deepStrictEqual(sandboxesLeft(), [])
    }))
})

describe("ProcessRunner (groups end with their run)", () => {
  it.scopedLive("a timeout ends the whole group (grandchildren that ignore SIGTERM too) and keeps partial output", () =>
    Effect.gen(function*() {
      const pidFile = path.join(outside, `grandchild-${unique()}`)
      const r = yield* run(sh(
        `echo started; (trap '' TERM; echo $$ > /dev/null; sh -c 'echo $$ > ${pidFile}; trap "" TERM; while :; do sleep 1; done') & sleep 60`,
        { timeoutMs: 1500, cache: "never" }
      ))
      assert.isTrue(r.timedOut)
      assert.strictEqual(yield* text(r.stdoutDigest), "started\n")
      assert.include(yield* text(r.stderrDigest), "timed out")
      const grandchild = Number(fs.readFileSync(pidFile, "utf8"))
      assert.isFalse(isAlive(grandchild), "the grandchild survived")
      assert.deepStrictEqual(sandboxesLeft(), [])
    }).pipe(Effect.provide(stack({ root })), viewOff))

  it.scopedLive("a leader that exits leaving a grandchild behind: the grandchild is ended before the result", () =>
    Effect.gen(function*() {
      const pidFile = path.join(outside, `grandchild-${unique()}`)
      // The leader exits once the grandchild has written its pid: it says so on a FIFO, which the leader reads.
      const r = yield* run(sh(
        `mkfifo up; sh -c 'trap "" TERM; echo $$ > ${pidFile}; echo up > up; exec sleep 60' & read _ < up; echo left`,
        { cache: "never" }
      ))
      assert.strictEqual(r.exitCode, 0)
      assert.strictEqual(yield* text(r.stdoutDigest), "left\n")
      const grandchild = Number(fs.readFileSync(pidFile, "utf8"))
      assert.isFalse(isAlive(grandchild), "the grandchild outlived the run")
      assert.deepStrictEqual(sandboxesLeft(), [])
    }).pipe(Effect.provide(stack({ root })), viewOff))

  it.scopedLive("`always` caches failures, but never a timeout", () =>
    Effect.gen(function*() {
      const p = sh(`: ${unique()}; sleep 5`, { cache: "always", timeoutMs: 300 })
      const first = yield* run(p)
      assert.isTrue(first.timedOut)
      const again = yield* run(p)
      assert.strictEqual(again.source, "ran")
      assert.isTrue(again.timedOut)
    }).pipe(Effect.provide(stack({ root }))))

  it.scopedLive("interrupting the run ends the whole group before the interruption returns", () =>
    Effect.gen(function*() {
      const pidFile = path.join(outside, `leader-${unique()}`)
      const fiber = yield* Effect.fork(run(sh(
        `echo $$ > ${pidFile}; sh -c 'trap "" TERM; while :; do sleep 1; done' & wait`,
        { cache: "never" }
      )))
      yield* eventually(
        "the process started",
        () => fs.existsSync(pidFile) && fs.readFileSync(pidFile, "utf8").trim() !== ""
      )
      const pgid = Number(fs.readFileSync(pidFile, "utf8"))
      assert.isTrue(groupAlive(pgid))
      yield* Fiber.interrupt(fiber)
      assert.isFalse(groupAlive(pgid), "a member of the group survived the interruption")
      yield* eventually("the sandbox is removed", () => sandboxesLeft().length === 0)
    }).pipe(Effect.provide(stack({ root })), viewOff))

  it.scopedLive("a spawner killed mid-run: that run fails saying so, its group is ended, the next run gets a new one", () =>
    Effect.gen(function*() {
      const before = new Set(childrenOf(process.pid, "kiln-spawner"))
      const pidFile = path.join(outside, `leader-${unique()}`)
      const fiber = yield* Effect.fork(run(sh(`echo $$ > ${pidFile}; sleep 60 & wait`, { cache: "never" })))
      yield* eventually(
        "the process started",
        () => fs.existsSync(pidFile) && fs.readFileSync(pidFile, "utf8").trim() !== ""
      )
      const pgid = Number(fs.readFileSync(pidFile, "utf8"))
      const spawners = childrenOf(process.pid, "kiln-spawner").filter((pid) => !before.has(pid))
      assert.strictEqual(spawners.length, 1)
      process.kill(spawners[0]!, "SIGKILL")
      const err = yield* Effect.flip(Fiber.join(fiber))
      assert.strictEqual(err._tag, "SpawnError")
      assert.include(err.message, "its exit is unknown")
      assert.isFalse(groupAlive(pgid), "a member of the group outlived the failed run")
      const next = yield* run(sh(`echo again`, { cache: "never" }))
      assert.strictEqual(next.exitCode, 0)
      assert.strictEqual(yield* text(next.stdoutDigest), "again\n")
    }).pipe(Effect.provide(stack({ root })), viewOff))
})

describe("ProcessRunner (awaited results)", () => {
  it.scoped("the closings awaited runs leave in the background are all done when the runner ends: no sandbox is left", () =>
    Effect.gen(function*() {
      const dir = fs.mkdtempSync(path.join(os.tmpdir(), "kiln-awaited-"))
      yield* Effect.addFinalizer(() => Effect.sync(() => fs.rmSync(dir, { recursive: true, force: true })))
      // A process with a small sandbox (pooled once closed) and one past the engine's inline size, whose sandbox the
      // spawner removes: both kinds of closing are still pending when the runner's scope ends.
      const ws = path.join(dir, "ws")
      writeTree(ws, Object.fromEntries(Array.from({ length: 1200 }, (_, i) => [`f${i}.txt`, `${i}\n`])))
      const results = yield* Effect.gen(function*() {
        const large = yield* Effect.flatMap(Store, (store) => store.snapshot(ws))
        const runner = yield* ProcessRunner
        return yield* Effect.forEach(
          [Digest.empty, large],
          (inputDigest, i) => runner.run(sh(`ls | wc -l; echo ${unique()}-${i}`, { inputDigest }), { awaited: true }),
          { concurrency: 2 }
        )
      }).pipe(Effect.provide(stack({ root: dir, inProcess: true, runner: { sharedTreeMinFiles: 0 } })))
      assert.deepStrictEqual(results.map((r) => r.exitCode), [0, 0])
      const left = fs.readdirSync(path.join(dir, "sandboxes")).filter((x) => !x.endsWith(".owner"))
      assert.deepStrictEqual(left, [])
    }))
})

describe("ProcessRunner (kept sandboxes)", () => {
  it.scoped("keep: on-failure keeps a failed run's sandbox with a __run.sh that reproduces it", () =>
    Effect.gen(function*() {
      const dir = fs.mkdtempSync(path.join(os.tmpdir(), "kiln-keep-"))
      yield* Effect.addFinalizer(() => Effect.sync(() => fs.rmSync(dir, { recursive: true, force: true })))
      const result: ProcessResult = yield* Effect.flatMap(
        ProcessRunner,
        (r) => r.run(sh(`echo "$GREETING" > said.txt; exit 4`, { env: { PATH, GREETING: "it's me" } }))
      ).pipe(
        Effect.provide(stack({ root: dir, keep: "on-failure", inProcess: true }))
      )
      assert.strictEqual(result.exitCode, 4)
      const kept = fs.readdirSync(path.join(dir, "sandboxes")).filter((x) => !x.endsWith(".owner"))
      assert.strictEqual(kept.length, 1)
      const sandbox = path.join(dir, "sandboxes", kept[0]!)
      fs.rmSync(path.join(sandbox, "said.txt"))
      const rerun = spawnSync(path.join(sandbox, "__run.sh"))
      assert.strictEqual(rerun.status, 4)
      assert.strictEqual(fs.readFileSync(path.join(sandbox, "said.txt"), "utf8"), "it's me\n")
      yield* Effect.flatMap(Sandboxes, (s) => s.sweep({ kept: true })).pipe(
        Effect.provide(stack({ root: dir, inProcess: true }))
      )
    }))
})

describe("ProcessRunner (its spawner's lifetime)", () => {
  /** A runner layer over a Store that stays open; returns its spawner's pid once a process has run. */
  const runnerOver = (dir: string) =>
    Effect.gen(function*() {
      const before = new Set(childrenOf(process.pid, "kiln-spawner"))
      const runner = ProcessRunnerLayer.layer({ namedCachesDir: path.join(dir, "named") }).pipe(
        Layer.provide(Layer.mergeAll(
          Sandboxer.layer({ command: [process.execPath, cli], socketDir: path.join(dir, "sock") }),
          SandboxesLayer.layer({ root: path.join(dir, "sandboxes"), sweepOnStart: false })
        ))
      )
      return yield* Effect.scoped(Effect.gen(function*() {
        const r = Context.get(yield* Layer.build(runner), ProcessRunner)
        assert.strictEqual((yield* r.run(sh("true", { cache: "never" }))).exitCode, 0)
        const spawner = childrenOf(process.pid, "kiln-spawner").filter((p) => !before.has(p))
        assert.strictEqual(spawner.length, 1)
        return spawner[0]!
      }))
    })

  it.scopedLive("ended with its layer under a Store that stays open; with a HelperLifetime, once that ends", () =>
    Effect.gen(function*() {
      const dir = fs.mkdtempSync(path.join(os.tmpdir(), "kiln-life-"))
      yield* Effect.addFinalizer(() => Effect.sync(() => fs.rmSync(dir, { recursive: true, force: true })))
      fs.mkdirSync(path.join(dir, "sandboxes"))
      const storeScope = yield* Scope.make()
      const storeLayer = StoreLayer.layer({ root: path.join(dir, "store") })
      const store = Layer.succeedContext(yield* Layer.buildWithScope(storeLayer, storeScope))
      const ended = yield* Effect.provide(runnerOver(dir), store)
      yield* eventually("the spawner of a closed runner layer exits", () => !isAlive(ended), "20 seconds")
      const lifetimeScope = yield* Scope.make()
      const withLifetime = Layer.succeedContext(
        yield* Layer.buildWithScope(storeLayer.pipe(Layer.provideMerge(HelperLifetime.layer)), lifetimeScope)
      )
      const kept = yield* Effect.provide(runnerOver(dir), withLifetime)
      assert.isTrue(isAlive(kept), "with a HelperLifetime, the spawner went before the lifetime ended")
      yield* Scope.close(lifetimeScope, Exit.void)
      yield* eventually("it exits once the lifetime has ended", () => !isAlive(kept), "20 seconds")
      yield* Scope.close(storeScope, Exit.void)
    }))
})

describe("ProcessRunner (concurrency)", () => {
  it.scopedLive("at most `concurrency` processes run at once, and that many do", () =>
    Effect.gen(function*() {
      const dir = fs.mkdtempSync(path.join(os.tmpdir(), "kiln-conc-"))
      yield* Effect.addFinalizer(() => Effect.sync(() => fs.rmSync(dir, { recursive: true, force: true })))
      const log = path.join(dir, "events")
      const r = Context.get(yield* Layer.build(stack({ root: dir, runner: { concurrency: 2 } })), ProcessRunner)
      // Each process notes its start and its end in a log outside its sandbox (appends of a line are atomic), and
      // ends only once a process has started after it (the last to start ends at once): a process holds its permit
      // until another runs beside it, so reaching `concurrency` is certain, and with fewer permits the run never ends.
      const script = (i: number) =>
        `echo "+ ${i}" >> ${log}; mine=$(grep '^+' ${log} | grep -n "^+ ${i}$" | cut -d: -f1); ` +
        `while [ "$mine" -lt 8 ] && [ "$(grep -c '^+' ${log})" -le "$mine" ]; do sleep 0.01; done; ` +
        `echo "- ${i}" >> ${log}; echo ${i}-${unique()}`
      const results = yield* Effect.all(
        Array.from({ length: 8 }, (_, i) => r.run(sh(script(i), { cache: "never" }))),
        { concurrency: "unbounded" }
      )
      assert.isTrue(results.every((x) => x.exitCode === 0))
      let running = 0
      let most = 0
      for (const event of fs.readFileSync(log, "utf8").trim().split("\n")) {
        running += event.startsWith("+") ? 1 : -1
        most = Math.max(most, running)
      }
      assert.strictEqual(running, 0)
      assert.strictEqual(most, 2)
    }).pipe(viewOff))
})

/** A runner (in-process sandboxer) over `store`, a real store whose one operation a test makes fail. */
const runnerOver = <E>(store: Layer.Layer<Store, E>, dir: string) =>
  ProcessRunnerLayer.layer({ namedCachesDir: path.join(dir, "named") }).pipe(
    Layer.provideMerge(Layer.mergeAll(
      Sandboxer.layerInProcess,
      SandboxesLayer.layer({ root: path.join(dir, "sandboxes"), sweepOnStart: false })
    )),
    Layer.provideMerge(store)
  )

describe("ProcessRunner (a store that cannot lease)", () => {
  it.scopedLive("a failed lease of the inputs fails the run with the store's error, before the process starts", () =>
    Effect.gen(function*() {
      const dir = fs.mkdtempSync(path.join(os.tmpdir(), "kiln-lease-"))
      yield* Effect.addFinalizer(() => Effect.sync(() => fs.rmSync(dir, { recursive: true, force: true })))
      const full = new StoreError({ reason: "NoSpace", detail: "lease: no space left on device (ENOSPC)", path: dir })
      // A real store whose lease writes fail, as they do on a full disk.
      const store = Layer.effect(
        Store,
        Effect.map(Store, (s): Store["Type"] => ({
          ...s,
          ensureTree: (root, options) => options.lease === true ? Effect.fail(full) : s.ensureTree(root, options)
        }))
      ).pipe(Layer.provide(StoreLayer.layer({ root: path.join(dir, "store") })))
      const runner = runnerOver(store, dir)
      const marker = path.join(dir, "ran")
      const error = yield* Effect.flip(run(sh(`touch ${marker}`, { cache: "never" })).pipe(Effect.provide(runner)))
      assert.strictEqual(error.message, full.message)
      assert.strictEqual(error._tag, "StoreError")
      assert.isFalse(fs.existsSync(marker), "the process ran although its inputs could not be leased")
    }))
})

describe("ProcessRunner (a store that cannot fill a sandbox)", () => {
  it.scopedLive("a full disk while the inputs are written is a SandboxError that keeps the store's NoSpace", () =>
    Effect.gen(function*() {
      const dir = fs.mkdtempSync(path.join(os.tmpdir(), "kiln-full-sandbox-"))
      yield* Effect.addFinalizer(() => Effect.sync(() => fs.rmSync(dir, { recursive: true, force: true })))
      const full = (destination: string) =>
        new StoreError({
          reason: "NoSpace",
          detail: "cannot materialize: no space left on device (ENOSPC)",
          path: path.join(destination, "data.txt")
        })
      // A real store whose sandbox writes fail, as they do on a full disk: the runner's own (a small tree) and the
      // sandboxer's (in process, here: a tree of more than 16 MiB is never written by the runner).
      const store = Layer.effect(
        Store,
        Effect.map(Store, (s): Store["Type"] => ({
          ...s,
          materialize: (digest, destination, options) =>
            destination.startsWith(path.join(dir, "sandboxes"))
              ? Effect.fail(full(destination))
              : s.materialize(digest, destination, options)
        }))
      ).pipe(Layer.provide(StoreLayer.layer({ root: path.join(dir, "store") })))
      const runner = runnerOver(store, dir)
      const context = yield* Layer.build(runner)
      const work = path.join(dir, "work")
      fs.mkdirSync(work)
      fs.writeFileSync(path.join(work, "data.txt"), "data\n")
      const small = yield* Effect.provide(Effect.flatMap(Store, (s) => s.snapshot(work)), context)
      fs.writeFileSync(path.join(work, "big.bin"), Buffer.alloc(17 * 1024 * 1024, 1))
      const large = yield* Effect.provide(Effect.flatMap(Store, (s) => s.snapshot(work)), context)
      for (const input of [small, large]) {
        const marker = path.join(dir, `ran-${input.hash}`)
        const error = yield* Effect.flip(
          run(sh(`touch ${marker}`, { cache: "never", inputDigest: input })).pipe(Effect.provide(context))
        )
        assert.strictEqual(error._tag, "SandboxError")
        if (error._tag !== "SandboxError") return
        assert.strictEqual(error.reason, "Materialize")
        assert.strictEqual(error.cause?.reason, "NoSpace", error.message)
        // What the CLI prints of it is the store's message, as before.
        assert.strictEqual(error.message, error.cause?.message)
        assert.isFalse(fs.existsSync(marker), "the process ran although its inputs could not be written")
      }
    }))
})
