/**
 * Engine.run in process, on a real store, sandboxes and processes: backtracking when bytes are gone, its limit, the
 * error when nothing can make them again, conflicting inputs, keep-going, and interruption.
 */
import { assert, describe, it } from "@effect/vitest"
import { Deferred, Effect, Either, Fiber, Layer, Option, Schedule } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"
import { decode, parse } from "../../src/domain/config/Config.js"
import * as Digest from "../../src/domain/Digest.js"
import { type Process, ProcessResult } from "../../src/domain/Process.js"
import * as Engine from "../../src/layers/engine/Engine.js"
import * as ProcessRunner from "../../src/layers/runner/ProcessRunner.js"
import { SandboxMode } from "../../src/layers/runner/SandboxMode.js"
import * as Sandboxes from "../../src/layers/sandbox/Sandboxes.js"
import * as Store from "../../src/layers/store/Store.js"
import * as StoreMaintenance from "../../src/layers/store/StoreMaintenance.js"
import * as Workspace from "../../src/layers/workspace/Workspace.js"
import { stack } from "../utils/stack.js"
import { tempDir, writeTree } from "../utils/temp.js"

const sh = (script: string, extra: Record<string, unknown> = {}) => ({
  argv: ["/bin/sh", "-c", script],
  env: { PATH: "/usr/bin:/bin" },
  ...extra
})

/** `gen` writes out/gen.txt from src/a.txt (other bytes: its inputs stay when its outputs are removed); `use` reads it (and src/b.txt) into out/use.txt. */
const producerConsumer = {
  gen: sh("mkdir -p out && tr a-z A-Z < src/a.txt > out/gen.txt", { inputs: ["src/a.txt"], outputs: ["out/gen.txt"] }),
  use: sh("mkdir -p out && cat out/gen.txt src/b.txt > out/use.txt", {
    inputs: ["src/b.txt"],
    outputs: ["out/use.txt"],
    deps: ["gen"]
  })
}

/** A workspace of `files` under a fresh root; `processes` may name paths under the root (markers). */
const workspaceOf = (
  processes: Record<string, unknown> | ((root: string) => Record<string, unknown>),
  files: Record<string, string>,
  /** Whether kiln.json's checks run (`parse`); else only its fields are decoded, as a library caller may give one. */
  checked = true
) =>
  Effect.gen(function*() {
    const root = yield* tempDir("kiln-engine-run-")
    const workspace = path.join(root, "ws")
    writeTree(workspace, files)
    fs.mkdirSync(path.join(root, "sandboxes"))
    const declared = typeof processes === "function" ? processes(root) : processes
    const config = Either.getOrThrow((checked ? parse : decode)("kiln.json", JSON.stringify({ processes: declared })))
    return { root, workspace, config }
  })

/**
 * Runs the engine on a whole stack under `root`, with the store at hand for hooks. `sandbox` is the run's mode: `off`
 * for the cases whose processes and the test signal each other through files of the host, which the strict view
 * (rightly) hides from them; what they test is the run's order, not the sandbox.
 */
const runOn = <A, E>(
  root: string,
  body: (engine: Engine.Service, store: Store.Service) => Effect.Effect<A, E>,
  sandbox: "auto" | "off" = "auto"
) =>
  Effect.flatMap(Effect.zip(Engine.Engine, Store.Store), ([engine, store]) => body(engine, store)).pipe(
    Effect.provide(Engine.layer.pipe(Layer.provideMerge(stack({ root, inProcess: true })))),
    Effect.provideService(SandboxMode, sandbox)
  )

/** Removes every file blob of a tree from the store. */
const removeFilesOf = (store: Store.Service, tree: Digest.Digest) =>
  Effect.flatMap(
    store.listTree(tree),
    (entries) =>
      Effect.forEach(entries.filter((e) => e.type === "file"), (e) => StoreMaintenance.make(store).remove(e.digest!), {
        discard: true
      })
  )

const blobOf = (text: string) => Digest.ofBytes(new TextEncoder().encode(text))

/**
 * The producer/consumer workspace run once, `remove` taking bytes out of the store before `use`'s attempts (`times`
 * of them: its first only by default).
 */
const runRemoving = (
  remove: (store: Store.Service, input: Digest.Digest, gen: Digest.Digest) => Effect.Effect<unknown, unknown>,
  options: { readonly times?: number; readonly maxBacktracks?: number } = {}
) =>
  Effect.gen(function*() {
    const files = { "src/a.txt": "a\n", "src/b.txt": "b\n" }
    const { config, root, workspace } = yield* workspaceOf(producerConsumer, files)
    let fired = 0
    const report = yield* runOn(root, (engine, store) =>
      engine.run({
        workspace,
        config,
        ...(options.maxBacktracks !== undefined ? { maxBacktracks: options.maxBacktracks } : {}),
        beforeAttempt: (name, input, resultOf) =>
          name === "use" && fired++ < (options.times ?? 1)
            ? Effect.asVoid(Effect.orDie(remove(store, input, resultOf("gen")!.outputDigest)))
            : Effect.void
      }))
    return { report, workspace }
  })

describe("Engine.run: dependents", () => {
  it.scopedLive("start from a process's outputs in the store: its write-back failing fails it, not them", () =>
    Effect.gen(function*() {
      const { config, root, workspace } = yield* workspaceOf({
        gen: sh("tr a-z A-Z < ../src/a.txt > gen.txt", {
          workingDirectory: "wd",
          inputs: ["src/a.txt"],
          outputs: ["gen.txt"]
        }),
        use: sh("mkdir -p out && cat wd/gen.txt src/b.txt > out/use.txt", {
          inputs: ["src/b.txt"],
          outputs: ["out/use.txt"],
          deps: ["gen"]
        })
      }, { "src/a.txt": "a\n", "src/b.txt": "b\n" })
      // Its working directory made a symlink once the run's checks are done: nothing is written through one, so
      // `gen`'s write-back fails.
      fs.mkdirSync(path.join(root, "elsewhere"))
      const report = yield* runOn(root, (engine) =>
        engine.run({
          workspace,
          config,
          beforeAttempt: (name) =>
            name === "gen"
              ? Effect.sync(() => fs.symlinkSync(path.join(root, "elsewhere"), path.join(workspace, "wd")))
              : Effect.void
        }))
      const gen = report.processes.find((p) => p.name === "gen")!
      const use = report.processes.find((p) => p.name === "use")!
      assert.isFalse(gen.ok)
      assert.strictEqual(gen.exitCode, 0)
      assert.match(gen.detail ?? "", /cannot write outputs back: .*`wd`, which is a symlink/)
      assert.isTrue(use.ok, JSON.stringify(use))
      assert.strictEqual(use.source, "ran")
      assert.strictEqual(report.failed, 1)
      assert.strictEqual(fs.readFileSync(path.join(workspace, "out/use.txt"), "utf8"), "A\nb\n")
      assert.deepStrictEqual(fs.readdirSync(path.join(root, "elsewhere")), [])
    }))
})

describe("Engine.run: backtracking", () => {
  it.scopedLive("a dep's outputs gone before its consumer runs: the producer re-runs and the run succeeds", () =>
    Effect.gen(function*() {
      const { report, workspace } = yield* runRemoving((store, _input, gen) => removeFilesOf(store, gen))
      assert.strictEqual(report.failed, 0, JSON.stringify(report.processes))
      assert.strictEqual(report.backtracks, 1)
      assert.strictEqual(report.processes.find((p) => p.name === "use")!.backtracks, 1)
      assert.strictEqual(fs.readFileSync(path.join(workspace, "out/use.txt"), "utf8"), "A\nb\n")
    }))

  it.scopedLive("bytes that keep going missing: the consumer fails with BacktrackLimit after maxBacktracks", () =>
    Effect.gen(function*() {
      const { report } = yield* runRemoving((store, _input, gen) => removeFilesOf(store, gen), {
        times: Infinity,
        maxBacktracks: 2
      })
      const use = report.processes.find((p) => p.name === "use")!
      assert.isFalse(use.ok)
      assert.strictEqual(use.error?._tag, "BacktrackLimit")
      assert.strictEqual(use.backtracks, 2)
      assert.match(use.detail ?? "", /^use: gave up after 2 backtracks \(missing [0-9a-f]{64}\/\d+\)$/)
    }))

  it.scopedLive("a missing input blob no process produced fails the run with NoProducer naming it", () =>
    Effect.gen(function*() {
      const { config, root, workspace } = yield* workspaceOf(producerConsumer, {
        "src/a.txt": "a\n",
        "src/b.txt": "b\n"
      })
      const b = blobOf("b\n")
      const error = yield* Effect.flip(runOn(root, (engine, store) =>
        engine.run({
          workspace,
          config,
          beforeAttempt: (name) =>
            name === "use" ? Effect.asVoid(Effect.orDie(StoreMaintenance.make(store).remove(b))) : Effect.void
        })))
      if (error._tag !== "NoProducer") return assert.fail(`expected NoProducer, got ${error._tag}`)
      assert.strictEqual(error.consumer, "use")
      assert.strictEqual(error.digest, Digest.format(b))
      assert.isFalse(error.presentNow)
    }))

  it.scopedLive("a merged input root gone before its process runs is made again, and the run succeeds", () =>
    Effect.gen(function*() {
      const { report, workspace } = yield* runRemoving((store, input) => StoreMaintenance.make(store).remove(input))
      assert.strictEqual(report.failed, 0)
      assert.strictEqual(report.processes.find((p) => p.name === "use")!.backtracks, 1)
      assert.strictEqual(fs.readFileSync(path.join(workspace, "out/use.txt"), "utf8"), "A\nb\n")
    }))
})

describe("Engine.run: the graph", () => {
  // kiln.json's checks refuse two processes declaring one output (test/domain/Declarations.test.ts); a config that
  // was not checked still cannot make the engine merge them.
  it.scopedLive("two deps that fill one path differently: the consumer fails naming the path; others succeed", () =>
    Effect.gen(function*() {
      const { config, root, workspace } = yield* workspaceOf(
        {
          a: sh("mkdir -p out && echo a > out/x.txt", { outputs: ["out/x.txt"] }),
          b: sh("mkdir -p out && echo b > out/x.txt", { outputs: ["out/x.txt"] }),
          both: sh("cat out/x.txt", { deps: ["a", "b"] })
        },
        {},
        false
      )
      const report = yield* runOn(root, (engine) => engine.run({ workspace, config, keepGoing: true }))
      const both = report.processes.find((p) => p.name === "both")!
      assert.isFalse(both.ok)
      assert.strictEqual(both.error?._tag, "InputConflict")
      assert.include(both.detail ?? "", "out/x.txt")
      assert.strictEqual(report.processes.filter((p) => p.ok).length, 2)
    }))

  const keepGoingCase = (keepGoing: boolean) =>
    Effect.gen(function*() {
      const { config, root, workspace } = yield* workspaceOf((root) => ({
        fails: sh("exit 3"),
        // Ends only once `fails` has finished: the marker is written when the engine reports it.
        slow: sh(`until [ -e ${path.join(root, "fails-finished")} ]; do sleep 0.01; done`),
        after: sh("true", { deps: ["slow"] })
      }), {})
      return yield* runOn(root, (engine) =>
        engine.run({
          workspace,
          config,
          keepGoing,
          onEvent: (e) =>
            e._tag === "Finished" && e.report.name === "fails"
              ? Effect.sync(() => fs.writeFileSync(path.join(root, "fails-finished"), ""))
              : Effect.void
        }), "off")
    })

  it.scopedLive("without keep-going, what has not started after a failure is skipped", () =>
    Effect.gen(function*() {
      const report = yield* keepGoingCase(false)
      const after = report.processes.find((p) => p.name === "after")!
      assert.strictEqual(after.source, "skipped")
      assert.include(after.detail ?? "", "--keep-going")
      assert.strictEqual(report.processes.find((p) => p.name === "fails")!.exitCode, 3)
    }))

  it.scopedLive("with keep-going, everything that does not depend on the failure runs", () =>
    Effect.gen(function*() {
      const report = yield* keepGoingCase(true)
      assert.strictEqual(report.processes.find((p) => p.name === "after")!.source, "ran")
      assert.isTrue(report.processes.find((p) => p.name === "after")!.ok)
      assert.strictEqual(report.failed, 1)
    }))

  it.scopedLive("only processes whose deps are settled are started, at most the runner's inFlight at once", () =>
    Effect.gen(function*() {
      // Dependents listed first (the run's own order: a target, then its deps), and a chain that cannot end until a
      // process outside it has run: taking dependents before they are ready, or holding a turn while waiting for deps,
      // would never finish this run with 2 at a time.
      const { config, root, workspace } = yield* workspaceOf((root) => ({
        c3: sh("cat in.txt > c3.txt", { deps: ["c2"], inputs: ["in.txt"], outputs: ["c3.txt"] }),
        c2: sh("cat in.txt > c2.txt", { deps: ["c1"], inputs: ["in.txt"], outputs: ["c2.txt"] }),
        c1: sh(`while [ ! -e ${root}/free-ran ]; do sleep 0.01; done; cat in.txt > c1.txt`, {
          inputs: ["in.txt"],
          outputs: ["c1.txt"]
        }),
        free: sh(`touch ${root}/free-ran`),
        ...Object.fromEntries(
          Array.from({ length: 8 }, (_, i) => [`w${i}`, sh(`echo ${i} > w${i}.txt`, { outputs: [`w${i}.txt`] })])
        )
      }), { "in.txt": "in\n" })
      let running = 0
      let most = 0
      const counted = Layer.effect(
        ProcessRunner.ProcessRunner,
        Effect.map(ProcessRunner.ProcessRunner, (runner): ProcessRunner.Service => ({
          ...runner,
          inFlight: 2,
          run: (p, options) =>
            Effect.suspend(() => {
              most = Math.max(most, ++running)
              return Effect.ensuring(runner.run(p, options), Effect.sync(() => running--))
            })
        }))
      )
      const report = yield* Effect.flatMap(Engine.Engine, (engine) => engine.run({ workspace, config })).pipe(
        Effect.provide(
          Engine.layer.pipe(Layer.provide(counted), Layer.provideMerge(stack({ root, inProcess: true })))
        ),
        // `c1` waits for a file `free` writes on the host: see `runOn`.
        Effect.provideService(SandboxMode, "off")
      )
      assert.strictEqual(report.failed, 0)
      assert.strictEqual(report.processes.length, 12)
      assert.strictEqual(most, 2)
      assert.strictEqual(fs.readFileSync(path.join(workspace, "c3.txt"), "utf8"), "in\n")
    }))

  it.scopedLive("interrupting a run kills the process it started and leaves no sandbox", () =>
    Effect.gen(function*() {
      const { config, root, workspace } = yield* workspaceOf((root) => ({
        long: sh(
          `echo $$ > ${path.join(root, "long.pid")}.tmp && mv ${path.join(root, "long.pid")}.tmp ${
            path.join(root, "long.pid")
          } && exec sleep 60`
        )
      }), {})
      const pidFile = path.join(root, "long.pid")
      const started = yield* Deferred.make<number>()
      const fiber = yield* Effect.fork(runOn(root, (engine) =>
        Effect.zipRight(
          // The pid file is the tool's own word that it runs (written whole, then renamed): wait for it.
          Effect.forkScoped(
            Effect.suspend(() =>
              fs.existsSync(pidFile)
                ? Deferred.succeed(started, Number(fs.readFileSync(pidFile, "utf8").trim()))
                : Effect.fail("not yet")
            ).pipe(Effect.retry(Schedule.spaced("10 millis")))
          ),
          engine.run({ workspace, config })
        ).pipe(Effect.scoped), "off"))
      const pid = yield* Deferred.await(started)
      yield* Fiber.interrupt(fiber)
      assert.isFalse(runs(pid), "the interrupted run's process is gone once the run has ended")
      assert.deepStrictEqual(fs.readdirSync(path.join(root, "sandboxes")), [])
    }))
})

/** Whether `pid` is a live process (a zombie is not: it has ended, and waits only to be reaped). */
const runs = (pid: number): boolean => {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, "utf8")
    return stat.slice(stat.lastIndexOf(")") + 2, stat.lastIndexOf(")") + 3) !== "Z"
  } catch {
    return false
  }
}

/** What a fake runner says it ran: exit 0, nothing written, unless `fields` say otherwise. */
const ranResult = (p: Process, fields: Partial<ConstructorParameters<typeof ProcessResult>[0]> = {}) =>
  new ProcessResult({
    exitCode: 0,
    signal: null,
    timedOut: false,
    stdoutDigest: Digest.empty,
    stderrDigest: Digest.empty,
    outputDigest: Digest.empty,
    actionDigest: Digest.ofBytes(new TextEncoder().encode(p.description ?? "")),
    durationMs: 1,
    source: "ran",
    timings: {},
    ...fields
  })

describe("Engine.run: a failed tool's report", () => {
  it.scopedLive("when its stderr cannot be read back from the store, the report says so instead of an empty tail", () =>
    Effect.gen(function*() {
      const root = yield* tempDir("kiln-engine-run-")
      const config = Either.getOrThrow(parse("kiln.json", JSON.stringify({ processes: { fails: sh("exit 3") } })))
      // A runner whose failed result names a stderr blob no store holds.
      const gone = blobOf("the stderr nobody stored\n")
      const runner = Layer.succeed(ProcessRunner.ProcessRunner, {
        run: (p) => Effect.succeed(ranResult(p, { exitCode: 3, stderrDigest: gone })),
        lookup: (ps) => Effect.succeed(ps.map(() => Option.none())),
        warmUp: Effect.void,
        warmUpSandboxer: Effect.void,
        sandboxerUsed: Effect.succeed(false),
        settleInputs: Effect.succeed(new Set<number>()),
        fetchTree: () => Effect.succeed(false)
      })
      const report = yield* Effect.flatMap(Engine.Engine, (engine) => engine.run({ workspace: root, config })).pipe(
        Effect.provide(
          Engine.layer.pipe(
            Layer.provideMerge(Workspace.layer),
            Layer.provide(Sandboxes.layer({ root: path.join(root, "sandboxes"), sweepOnStart: false })),
            Layer.provideMerge(Layer.merge(runner, Store.layer({ root: path.join(root, "store") })))
          )
        )
      )
      const fails = report.processes.find((p) => p.name === "fails")!
      assert.strictEqual(fails.exitCode, 3)
      assert.include(fails.detail ?? "", `its stderr ${Digest.format(gone)} could not be read`)
    }))
})

describe("Engine.run: the sandboxer's start", () => {
  /** Runs `p` twice through a runner that logs its calls, editing its input between; the second run's log. */
  const secondRunLog = (sandboxerRan: boolean) =>
    Effect.gen(function*() {
      const { config, root, workspace } = yield* workspaceOf({ p: sh("true", { inputs: ["a.txt"] }) }, {
        "a.txt": "one\n"
      })
      const log: Array<string> = []
      const runner = Layer.succeed(ProcessRunner.ProcessRunner, {
        run: (p) =>
          Effect.sync(() => {
            log.push("run")
            return ranResult(p)
          }),
        lookup: (ps) => Effect.succeed(ps.map(() => Option.none())),
        warmUp: Effect.sync(() => void log.push("warmUp")),
        warmUpSandboxer: Effect.sync(() => void log.push("warmUpSandboxer")),
        sandboxerUsed: Effect.succeed(sandboxerRan),
        settleInputs: Effect.succeed(new Set<number>()),
        fetchTree: () => Effect.succeed(false)
      })
      const engineLayer = Engine.layer.pipe(
        Layer.provideMerge(Workspace.layer),
        Layer.provide(Sandboxes.layer({ root: path.join(root, "sandboxes"), sweepOnStart: false })),
        Layer.provideMerge(Layer.merge(runner, Store.layer({ root: path.join(root, "store") })))
      )
      const once = Effect.flatMap(Engine.Engine, (engine) => engine.run({ workspace, config })).pipe(
        Effect.provide(engineLayer)
      )
      yield* once
      fs.writeFileSync(path.join(workspace, "a.txt"), "two\n")
      log.length = 0
      const report = yield* once
      assert.strictEqual(report.ran, 1)
      return log
    })

  it.scoped("starts at once, before the snapshot, when the last run that ran needed it", () =>
    Effect.gen(function*() {
      const log = yield* secondRunLog(true)
      assert.deepStrictEqual(log.slice(0, 2), ["warmUp", "warmUpSandboxer"])
      assert.include(log, "run")
    }))

  it.scoped("is left to the first process that needs it when the last run did not", () =>
    Effect.gen(function*() {
      const log = yield* secondRunLog(false)
      assert.notInclude(log, "warmUpSandboxer")
      assert.include(log, "run")
    }))
})
