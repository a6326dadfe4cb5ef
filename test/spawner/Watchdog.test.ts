/**
 * The sandboxer as its engine's watchdog, and its life cycle, with real processes and signals.
 *
 * Asserted: after `kill -9` of an engine, its sandboxer exits, and the engine's sandboxes
 * under the root it watches and the process groups working in them are gone, on their own, while other engines'
 * sandboxes and kept ones stay; an engine killed while its sandboxer was still starting is cleaned up once it is up;
 * a sandboxer whose parent is already dead exits at once, making no store where there was none; SIGTERM lets an
 * in-flight materialization finish and answer, then the sandboxer exits 0 and removes its socket; long store and
 * workspace paths do not make the socket path too long.
 * Not promised: how long start-up takes.
 */
import * as NodeSocket from "@effect/platform-node/NodeSocket"
import * as RpcClient from "@effect/rpc/RpcClient"
import * as RpcSerialization from "@effect/rpc/RpcSerialization"
import { assert, describe, it } from "@effect/vitest"
import { Context, Effect, Fiber, Layer, Option } from "effect"
import { spawnSync } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"
import * as SandboxDir from "../../src/layers/sandbox/internal/sandboxDir.js"
import { MAX_SOCKET_PATH } from "../../src/layers/sandboxer/internal/process.js"
import { SandboxerRpcs } from "../../src/layers/sandboxer/Rpc.js"
import * as Sandboxer from "../../src/layers/sandboxer/Sandboxer.js"
import * as Store from "../../src/layers/store/Store.js"
import * as StoreMaintenance from "../../src/layers/store/StoreMaintenance.js"
import { isAlive, self } from "../../src/os/Proc.js"
import { eventually, exitOf, firstLine, groupAlive, spawnScoped } from "../utils/child.js"
import { tempDir, writeTree } from "../utils/temp.js"

const cli = path.resolve("dist/cli.js")
const engineWorker = path.resolve(".kiln-test/fixtures/engineWorker.mjs")

/** A process's state letter from /proc (`T`: stopped). */
const stateOf = (pid: number): string | undefined => {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, "utf8")
    return stat.slice(stat.lastIndexOf(")") + 2)[0]
  } catch {
    return undefined
  }
}

/**
 * Starts the watchdog fixture engine (a process group working in a sandbox under a watched root); the group is
 * killed whatever the test does.
 */
const startEngine = (options: { readonly early?: boolean } = {}) =>
  Effect.gen(function*() {
    const root = yield* tempDir("kiln-wd-")
    const socketDir = yield* tempDir("kiln-sock-")
    const sandboxRoot = path.join(root, "sandboxes")
    fs.mkdirSync(sandboxRoot)
    const engine = yield* spawnScoped(process.execPath, [
      engineWorker,
      JSON.stringify({ storeRoot: path.join(root, "store"), socketDir, cli, sandboxRoot, ...options })
    ])
    const started = JSON.parse(yield* firstLine(engine)) as {
      pgid: number
      sandbox: string
      kept: string
      sandboxerPid: number
    }
    yield* Effect.addFinalizer(() =>
      Effect.sync(() => groupAlive(started.pgid) && process.kill(-started.pgid, "SIGKILL"))
    )
    return { ...started, engine, socketDir, sandboxRoot }
  })

describe("the sandboxer as watchdog", () => {
  it.scopedLive("kill -9 of the engine: its sandboxer, process group and sandbox are gone; others' stay", () =>
    Effect.gen(function*() {
      const started = yield* startEngine()
      const { engine, kept, pgid, sandbox, sandboxerPid, sandboxRoot, socketDir } = started
      // Another live engine's sandbox under the same root (this test process owns it).
      const other = SandboxDir.create(sandboxRoot, self())
      assert.isTrue(groupAlive(pgid))
      assert.isTrue(fs.existsSync(sandbox))
      engine.kill("SIGKILL")
      yield* exitOf(engine)
      yield* eventually("the sandboxer exits", () => !isAlive(sandboxerPid), "20 seconds")
      yield* eventually("the process group working in its sandbox is gone", () => !groupAlive(pgid), "20 seconds")
      yield* eventually("its sandbox is gone", () => !fs.existsSync(sandbox), "20 seconds")
      assert.isFalse(fs.existsSync(SandboxDir.ownerFileOf(sandbox)))
      assert.isTrue(fs.existsSync(kept), "a kept sandbox is the user's")
      assert.isTrue(fs.existsSync(other), "another engine's sandbox is not its to remove")
      assert.deepStrictEqual(fs.readdirSync(socketDir).filter((n) => n.endsWith(".sock")), [])
    }))

  it.scopedLive("kill -9 of the engine while its sandboxer starts: cleaned up once the sandboxer is up", () =>
    Effect.gen(function*() {
      const { engine, pgid, sandbox, sandboxerPid, socketDir } = yield* startEngine({ early: true })
      // The premise, held while the engine is killed: its sandboxer is stopped before it listens (no socket yet).
      process.kill(sandboxerPid, "SIGSTOP")
      yield* Effect.addFinalizer(() =>
        Effect.sync(() => isAlive(sandboxerPid) && process.kill(sandboxerPid, "SIGCONT"))
      )
      yield* eventually("the sandboxer is stopped", () => stateOf(sandboxerPid) === "T")
      assert.deepStrictEqual(
        fs.readdirSync(socketDir).filter((n) => n.endsWith(".sock")),
        [],
        "the sandboxer was up before its engine was killed: this test checks nothing"
      )
      engine.kill("SIGKILL")
      yield* exitOf(engine)
      process.kill(sandboxerPid, "SIGCONT")
      // Bounded by the sandboxer's start-up (a Node start) on a loaded machine, not by a promise of speed.
      yield* eventually("the process group working in its sandbox is gone", () => !groupAlive(pgid), "20 seconds")
      yield* eventually("its sandbox is gone", () => !fs.existsSync(sandbox), "20 seconds")
      // And it ends: one still opening the store after this test removed its directory made the store there again.
      yield* eventually("its sandboxer exits", () => !isAlive(sandboxerPid), "20 seconds")
    }))

  it.scopedLive("kill -9 after the sandboxer's layer closed, the store still open: no stale reader slot stays", () =>
    Effect.gen(function*() {
      const root = yield* tempDir("kiln-wd-")
      const socketDir = yield* tempDir("kiln-sock-")
      const storeRoot = path.join(root, "store")
      const sandboxRoot = path.join(root, "sandboxes")
      fs.mkdirSync(sandboxRoot)
      const engine = yield* spawnScoped(process.execPath, [
        engineWorker,
        JSON.stringify({ storeRoot, socketDir, cli, sandboxRoot, storeOutlives: true })
      ])
      const { sandboxerPid } = JSON.parse(yield* firstLine(engine)) as { sandboxerPid: number }
      // Opened before the kill (opening runs LMDB's reader check itself): every shard, through stats.
      const store = yield* Store.make({ root: storeRoot })
      const before = (yield* StoreMaintenance.make(store).stats).readers
      assert.strictEqual(before.stale, 0)
      assert.isTrue(isAlive(sandboxerPid), "the sandboxer went before the store it watches over was closed")
      assert.isAbove(before.inUse, 0)
      engine.kill("SIGKILL")
      yield* exitOf(engine)
      yield* eventually("the sandboxer exits", () => !isAlive(sandboxerPid), "20 seconds")
      assert.strictEqual(
        (yield* StoreMaintenance.make(store).stats).readers.stale,
        0,
        "the killed engine's reader slots were left"
      )
    }))

  it.scopedLive("a sandboxer whose parent died before it started exits at once", () =>
    Effect.gen(function*() {
      const root = yield* tempDir("kiln-wd-")
      const dead = spawnSync("sh", ["-c", "echo $$"], { encoding: "utf8" })
      const deadPid = Number(dead.stdout.trim())
      assert.isFalse(isAlive(deadPid))
      const sandboxer = yield* spawnScoped(process.execPath, [
        cli,
        "sandboxer",
        "--socket",
        path.join(root, "s.sock"),
        "--parent-pid",
        String(deadPid),
        "--store-dir",
        path.join(root, "store")
      ])
      // Bounded so that a sandboxer that adopted its new ppid (it would idle for 15 minutes) fails the test.
      const exit = yield* exitOf(sandboxer).pipe(
        Effect.timeoutFail({ duration: "20 seconds", onTimeout: () => new Error("still running") })
      )
      assert.strictEqual(exit.code, 0)
      assert.isFalse(fs.existsSync(path.join(root, "s.sock")))
      // Its store was never made (or was removed after the engine died): the post-mortem has no reader slots to clear
      // in it, and makes no store there.
      assert.isFalse(fs.existsSync(path.join(root, "store")))
    }))

  it.scopedLive("SIGTERM during a materialization: it finishes and answers, then the sandboxer exits 0", () =>
    Effect.gen(function*() {
      const root = yield* tempDir("kiln-wd-")
      const storeRoot = path.join(root, "store")
      const work = path.join(root, "work")
      const files: Record<string, string> = {}
      for (let i = 0; i < 6000; i++) files[`d${i % 50}/f${i}.txt`] = `file ${i}\n`.repeat(20)
      writeTree(work, files)
      const digest = yield* Effect.scoped(Effect.flatMap(Store.make({ root: storeRoot }), (s) => s.snapshot(work)))
      const socket = path.join(root, "s.sock")
      const log = path.join(root, "sandboxer.log")
      const logFd = fs.openSync(log, "a")
      const sandboxer = yield* spawnScoped(process.execPath, [
        cli,
        "sandboxer",
        "--socket",
        socket,
        "--parent-pid",
        String(process.pid),
        "--store-dir",
        storeRoot,
        // What is tested is that a request in flight is finished, not the default bound on it: writing 6,000 files
        // took longer than the default 5 s on a loaded CI box whose disk creates a file per millisecond.
        "--drain-timeout",
        "60s"
      ], { stdio: ["ignore", "pipe", logFd] })
      assert.match(yield* firstLine(sandboxer), /^ready/)
      const protocol = yield* Layer.build(
        RpcClient.layerProtocolSocket().pipe(
          Layer.provide(NodeSocket.layerNet({ path: socket })),
          Layer.provide(RpcSerialization.layerMsgPack)
        )
      )
      const client = yield* RpcClient.make(SandboxerRpcs).pipe(Effect.provide(protocol))
      const dest = path.join(root, "sandbox")
      const request = yield* Effect.fork(client.Materialize({ digest, destination: dest, mutablePaths: [] }))
      yield* eventually("the request is in flight", () => fs.readFileSync(log, "utf8").includes("materialize "))
      sandboxer.kill("SIGTERM")
      yield* Fiber.join(request)
      assert.strictEqual(fs.readdirSync(path.join(dest, "d7")).length, 120)
      const exit = yield* exitOf(sandboxer)
      assert.strictEqual(exit.code, 0)
      assert.isFalse(fs.existsSync(socket))
    }))

  it.scopedLive("long store and workspace paths still give a working socket", () =>
    Effect.gen(function*() {
      const root = yield* tempDir("kiln-wd-")
      const deep = path.join(root, ...Array.from({ length: 8 }, (_, i) => `a-rather-long-directory-name-${i}`))
      const ctx = yield* Layer.build(
        Sandboxer.layer({ command: [process.execPath, cli] }).pipe(
          Layer.provideMerge(Store.layer({ root: path.join(deep, "store") }))
        )
      )
      assert.isAbove(deep.length, MAX_SOCKET_PATH)
      const store = Context.get(ctx, Store.Store)
      const sandboxer = Context.get(ctx, Sandboxer.Sandboxer)
      writeTree(path.join(deep, "ws"), { "x.txt": "x" })
      yield* sandboxer.materialize(yield* store.snapshot(path.join(deep, "ws")), path.join(deep, "ws-sandbox"))
      assert.strictEqual(fs.readFileSync(path.join(deep, "ws-sandbox", "x.txt"), "utf8"), "x")
      assert.isTrue(Option.isSome(yield* sandboxer.pid))
    }))
})
