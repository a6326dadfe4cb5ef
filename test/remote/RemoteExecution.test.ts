/**
 * Remote execution against Bazel's REAPI worker on 127.0.0.1 (`scripts/remote/servers.sh`): a graph whose outputs
 * feed the next process runs there, failures and timeouts report as local ones do, an executor that cannot be used
 * falls back to local runs (or fails the run, with fallback off), and inputs the worker lost are sent again. The
 * worker runs actions unsandboxed as root and adds `BAZEL_REMOTE_PLATFORM` to their environment (its quirks, not
 * kiln's); nothing here depends on either.
 */
import { assert, describe, it } from "@effect/vitest"
import * as grpc from "@grpc/grpc-js"
import { Effect } from "effect"
import { createHash, randomBytes } from "node:crypto"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import * as Proto from "../../src/layers/remote/internal/proto.js"
import { eventually } from "../utils/child.js"
import { hostileGrpc } from "../utils/hostile/grpc.js"
import { hostileWorkspace } from "../utils/hostile/workspace.js"
import { deadPort, evictBlob, killVictim, remoteServers, restartVictim, tcpProxy } from "../utils/remote.js"
import { tempDir } from "../utils/temp.js"
import { machine, namespace, outputsOf, sources } from "./workspace.js"

const PATH = { PATH: "/usr/local/bin:/usr/bin:/bin" }
/** A process that runs until it is killed: an open listener keeps Node's event loop alive. */
const HANG = "require('net').createServer().listen(0, '127.0.0.1')"
const executor = () => ["--remote-executor", remoteServers().reapiUrl]

/**
 * A hostile server whose cache a first machine filled, offering execution from then on: its `Execute` answers from
 * that cache (it runs nothing).
 */
const filledExecutor = (ns: string) =>
  Effect.gen(function*() {
    const server = yield* hostileGrpc
    const first = yield* machine(ns)
    const filled = yield* first.run(["--remote-cache", server.url])
    assert.strictEqual(filled.code, 0, filled.stderr)
    assert.strictEqual(filled.summary!.pendingUploads, 0, filled.stderr)
    server.capabilities = { ...server.capabilities, execution_capabilities: { digest_function: 1, exec_enabled: true } }
    return { server, first }
  })

describe("remote execution", () => {
  it.scoped("a graph runs on the executor with the bytes a local run makes; the next machine gets it from its cache", () =>
    Effect.gen(function*() {
      const ns = namespace()
      const local = yield* machine(ns)
      const here = yield* local.run([])
      assert.strictEqual(here.code, 0, here.stderr)
      const remote = yield* machine(ns)
      const r = yield* remote.run(executor())
      assert.strictEqual(r.code, 0, r.stderr)
      assert.deepStrictEqual(sources(r.summary), { gen: "remote", use: "remote", big: "remote" })
      assert.strictEqual(r.summary!.remoteExecuted, 3)
      assert.strictEqual(r.summary!.ran, 3)
      assert.match(r.stderr, /✓ use [\d.]+s \(remote/)
      assert.match(r.stderr, /3 ran \(3 remotely\)/)
      assert.deepStrictEqual(outputsOf(remote.ws), outputsOf(local.ws))
      // The worker cached what it ran: another machine looks it up (local, then remote) and executes nothing.
      const next = yield* machine(ns)
      const again = yield* next.run(executor())
      assert.deepStrictEqual(sources(again.summary), { gen: "remote-cache", use: "remote-cache", big: "remote-cache" })
      assert.deepStrictEqual(outputsOf(next.ws), outputsOf(local.ws))
    }))

  it.scoped("an Execute answered from the executor's cache is a remote hit: counted, its outputs landed, kept here", () =>
    Effect.gen(function*() {
      const ns = namespace()
      const { first, server } = yield* filledExecutor(ns)
      // The executor looks actions up as it executes them (`cached_result`); kiln's own lookups miss.
      server.faults.set("GetActionResult", grpc.status.NOT_FOUND)
      const next = yield* machine(ns)
      const r = yield* next.run(["--remote-executor", server.url])
      assert.strictEqual(r.code, 0, r.stderr)
      assert.deepStrictEqual(sources(r.summary), { gen: "remote-cache", use: "remote-cache", big: "remote-cache" })
      assert.strictEqual(r.summary!.remoteCacheHits, 3)
      assert.strictEqual(r.summary!.cacheHits, 3)
      assert.strictEqual(r.summary!.remoteExecuted, 0)
      assert.strictEqual(r.summary!.ran, 0)
      assert.match(r.stderr, /0 ran, 3 cached \(3 from the remote\)/)
      const executes = server.received.filter((c) => c.method === "Execute")
      assert.strictEqual(executes.length, 3)
      assert.isTrue(executes.every((c) => c.request.skip_cache_lookup !== true))
      // Each call names its action in its RequestMetadata, beside the run's invocation id.
      for (const c of executes) {
        const raw = c.metadata["build.bazel.remote.execution.v2.requestmetadata-bin"] as Buffer
        const md = Proto.decode<{ action_id?: string; tool_invocation_id?: string }>("RequestMetadata", raw)
        assert.strictEqual(md.action_id, (c.request.action_digest as { hash: string }).hash)
        assert.isNotEmpty(md.tool_invocation_id)
      }
      // Its outputs landed as a lookup's hit's do, and the hits were written into the local cache.
      assert.deepStrictEqual(outputsOf(next.ws), outputsOf(first.ws))
      fs.rmSync(path.join(next.ws, "out"), { recursive: true })
      fs.rmSync(path.join(next.ws, "res"), { recursive: true })
      fs.rmSync(path.join(next.ws, "big.bin"))
      const local = yield* next.run([])
      assert.strictEqual(local.code, 0, local.stderr)
      assert.deepStrictEqual(sources(local.summary), { gen: "cache-hit", use: "cache-hit", big: "cache-hit" })
      assert.deepStrictEqual(outputsOf(next.ws), outputsOf(first.ws))
    }))

  it.scopedLive("what goes to the executor is looked up beside the graph: a lookup held back holds back its process only", () =>
    Effect.gen(function*() {
      const ns = namespace()
      const { first, server } = yield* filledExecutor(ns)
      // The next machine's first lookup is held: the others' processes are done while it still is (before kiln gives
      // it up at the lookups' deadline, when a wave's lookups were all waited for).
      const before = server.received.filter((c) => c.method === "GetActionResult").length
      let held: { release: () => void; cancelled: () => boolean } | undefined
      server.faults.set(
        "GetActionResult",
        (n) => (n === before ? { hold: (release, cancelled) => void (held = { release, cancelled }) } : undefined)
      )
      const next = yield* machine(ns)
      const running = yield* next.start(["--remote-executor", server.url])
      const othersDone = () => fs.existsSync(path.join(next.ws, "out")) || fs.existsSync(path.join(next.ws, "big.bin"))
      yield* eventually(
        "a process is done while another's lookup is held",
        () => held !== undefined && !held.cancelled() && othersDone()
      )
      held!.release()
      const r = yield* running
      assert.strictEqual(r.code, 0, r.stderr)
      // Every one a remote hit: from its lookup, or (the held one, had kiln given it up) the executor's cache.
      assert.deepStrictEqual(sources(r.summary), { gen: "remote-cache", use: "remote-cache", big: "remote-cache" })
      assert.strictEqual(r.summary!.remoteCacheHits, 3)
      assert.strictEqual(r.summary!.remoteExecuted, 0)
      assert.deepStrictEqual(outputsOf(next.ws), outputsOf(first.ws))
    }))

  it.scoped("four processes sharing an input tree send it once between them", () =>
    Effect.gen(function*() {
      const n = 4
      const config = {
        processes: Object.fromEntries(Array.from({ length: n }, (_, i) => [`p${i}`, {
          argv: ["/bin/sh", "-c", `cat shared/* a.txt | wc -c > o${i}.txt`],
          inputs: ["shared/**", "a.txt"],
          outputs: [`o${i}.txt`],
          env: PATH
        }]))
      }
      const w = yield* hostileWorkspace(config)
      // Bytes no earlier run has sent the worker: every one of them goes up in this run.
      const files = 8
      const size = 512 * 1024
      fs.mkdirSync(path.join(w.ws, "shared"))
      for (let i = 0; i < files; i++) fs.writeFileSync(path.join(w.ws, "shared", `f${i}`), randomBytes(size))
      const r = yield* w.kiln(["run", ...executor(), "--remote-jobs", String(n)])
      assert.strictEqual(r.code, 0, r.stderr)
      assert.strictEqual(r.summary!.remoteExecuted, n, r.stderr)
      // Once, plus a few KiB of directories and messages: four times over without the in-flight map.
      assert.isAtLeast(r.summary!.uploadedBytes, files * size)
      assert.isBelow(r.summary!.uploadedBytes, files * size * 1.5, r.stderr)
    }))

  it.scoped("a node_modules the snapshot left in the workspace goes to the executor from there, as it was hashed", () =>
    Effect.gen(function*() {
      const config = {
        processes: {
          read: {
            argv: ["/bin/sh", "-c", "cat node_modules/q3/f3.js node_modules/big/blob.bin | sha256sum > o.txt"],
            inputs: ["node_modules/**"],
            outputs: ["o.txt"],
            env: PATH
          }
        }
      }
      const w = yield* hostileWorkspace(config)
      // As large as a shared tree, so its files are hashed and not copied into the store; bytes the worker lacks.
      const salt = randomBytes(8).toString("hex")
      for (let i = 0; i < 1000; i++) {
        fs.mkdirSync(path.join(w.ws, "node_modules", `q${i % 10}`), { recursive: true })
        fs.writeFileSync(path.join(w.ws, "node_modules", `q${i % 10}`, `f${i}.js`), `${salt} ${i}\n`)
      }
      const big = randomBytes(600 * 1024)
      fs.mkdirSync(path.join(w.ws, "node_modules", "big"))
      fs.writeFileSync(path.join(w.ws, "node_modules", "big", "blob.bin"), big)
      const r = yield* w.kiln(["run", ...executor()])
      assert.strictEqual(r.code, 0, r.stderr)
      assert.strictEqual(r.summary!.remoteExecuted, 1, r.stderr)
      const expected = createHash("sha256").update(`${salt} 3\n`).update(big).digest("hex")
      assert.strictEqual(fs.readFileSync(path.join(w.ws, "o.txt"), "utf8").split(" ")[0], expected)
      assert.isAtLeast(r.summary!.uploadedBytes, big.length)
    }))

  it.scoped("the worker lacks BatchReadBlobs: of many downloads at once, one asks it, the rest go by ByteStream", () =>
    Effect.gen(function*() {
      const n = 12
      const w = yield* hostileWorkspace({
        processes: Object.fromEntries(Array.from({ length: n }, (_, i) => [`p${i}`, {
          argv: ["/bin/sh", "-c", `cat a.txt > o${i}.txt; echo ${i} >> o${i}.txt`],
          inputs: ["a.txt"],
          outputs: [`o${i}.txt`],
          env: PATH
        }]))
      })
      const log = path.join(yield* tempDir("kiln-batch-read-"), "remote.log")
      const r = yield* w.kiln(["run", ...executor(), "--remote-jobs", String(n), "--remote-log", log])
      assert.strictEqual(r.code, 0, r.stderr)
      assert.strictEqual(r.summary!.remoteExecuted, n, r.stderr)
      const calls = fs.readFileSync(log, "utf8").trim().split("\n").map((l) => JSON.parse(l) as { method: string })
      // Bazel's worker answers BatchReadBlobs UNIMPLEMENTED: learnt once, not by every download in flight.
      assert.strictEqual(calls.filter((c) => c.method === "BatchReadBlobs").length, 1)
      assert.isAtLeast(calls.filter((c) => c.method === "ByteStream.Read").length, n)
      assert.deepStrictEqual(r.summary!.remoteErrors, {}, r.stderr)
    }))

  it.scoped("an executor apart from the cache: it runs the graph, and the results are kept in the cache", () =>
    Effect.gen(function*() {
      const ns = namespace()
      const cache = ["--remote-cache", remoteServers().httpUrl]
      const local = yield* machine(ns)
      assert.strictEqual((yield* local.run([])).code, 0)
      const remote = yield* machine(ns)
      const r = yield* remote.run([...executor(), ...cache])
      assert.strictEqual(r.code, 0, r.stderr)
      assert.deepStrictEqual(sources(r.summary), { gen: "remote", use: "remote", big: "remote" })
      assert.strictEqual(r.summary!.pendingUploads, 0)
      assert.deepStrictEqual(outputsOf(remote.ws), outputsOf(local.ws))
      // Nginx holds what the worker ran: a machine with only the cache gets every result from it.
      const next = yield* machine(ns)
      const again = yield* next.run(cache)
      assert.strictEqual(again.code, 0, again.stderr)
      assert.deepStrictEqual(sources(again.summary), { gen: "remote-cache", use: "remote-cache", big: "remote-cache" })
      assert.deepStrictEqual(outputsOf(next.ws), outputsOf(local.ws))
    }))

  it.scoped("an executor apart from the cache that cannot be reached: local runs, kept in the cache", () =>
    Effect.gen(function*() {
      const port = yield* Effect.promise(deadPort)
      const m = yield* machine(namespace())
      const r = yield* m.run([
        "--remote-executor",
        `grpc://127.0.0.1:${port}`,
        "--remote-cache",
        remoteServers().httpUrl
      ])
      assert.strictEqual(r.code, 0, r.stderr)
      assert.deepStrictEqual(sources(r.summary), { gen: "ran", use: "ran", big: "ran" })
      assert.strictEqual(r.summary!.remoteFallbacks, 3)
      assert.strictEqual(r.summary!.pendingUploads, 0)
      assert.match(r.stderr, new RegExp(`remote executor grpc://127\\.0\\.0\\.1:${port}: is unreachable`))
    }))

  it.scoped("under defer, an output only a remote process reads never comes here; a target's does", () =>
    Effect.gen(function*() {
      const ns = namespace()
      const local = yield* machine(ns)
      assert.strictEqual((yield* local.run([])).code, 0)
      const genOut = createHash("sha256").update(fs.readFileSync(path.join(local.ws, "out/a.txt"))).digest("hex")
      const remote = yield* machine(ns)
      const log = path.join(remote.root, "remote.jsonl")
      const deferred = [...executor(), "--cache-content", "defer", "--remote-log", log]
      const readsOfGen = () =>
        callsIn(log).filter((c) => /Read/.test(c.method) && (c as { digest?: string }).digest?.startsWith(genOut))
      const r = yield* remote.run(deferred)
      assert.strictEqual(r.code, 0, r.stderr)
      assert.deepStrictEqual(sources(r.summary), { gen: "remote", use: "remote", big: "remote" })
      // `use` read gen's out/ on the worker; nothing here needed it, so it stayed there.
      assert.isFalse(fs.existsSync(path.join(remote.ws, "out")))
      assert.deepStrictEqual(readsOfGen(), [])
      const outputs = outputsOf(local.ws)
      assert.strictEqual(outputsOf(remote.ws)["res/b.txt"], outputs["res/b.txt"])
      assert.strictEqual(outputsOf(remote.ws)["big.bin"], outputs["big.bin"])
      // The next run takes everything from the cache and still brings nothing of gen's.
      const again = yield* remote.run(deferred)
      assert.strictEqual(again.code, 0, again.stderr)
      assert.deepStrictEqual(readsOfGen(), [])
      // Asked for by name, gen's outputs come.
      const named = yield* remote.run([...deferred, "gen"])
      assert.strictEqual(named.code, 0, named.stderr)
      assert.strictEqual(outputsOf(remote.ws)["out/a.txt"], outputs["out/a.txt"])
      assert.isAbove(readsOfGen().length, 0)
    }))

  it.scoped("a failure, a timeout and stderr report as they do for local processes; `remote: false` stays local", () =>
    Effect.gen(function*() {
      // Bazel's worker reports the timeout but leaves the action running, holding one of its slots: killed here.
      const marker = `kiln-timeout-${namespace()}`
      yield* Effect.addFinalizer(() => Effect.sync(() => killMarked(marker)))
      const extra = {
        fails: { argv: ["node", "-e", "console.error('it broke'); process.exit(3)"], env: PATH },
        // A listener keeps it running until it is killed: its timeout must end it.
        slow: { argv: ["node", "-e", HANG, marker], timeout: "2s", env: PATH },
        here: { argv: ["node", "-e", ""], remote: false, env: PATH }
      }
      const m = yield* machine(namespace(), { extra })
      const r = yield* m.run([...executor(), "--keep-going"])
      assert.strictEqual(r.code, 1)
      const byName = Object.fromEntries(r.summary!.processes.map((p) => [p.name, p]))
      assert.strictEqual(byName.fails!.source, "remote")
      assert.strictEqual(byName.fails!.exitCode, 3)
      assert.match(r.stderr, /✗ fails exit 3 \(remote\)\nit broke\nre-run it with: kiln exec/)
      assert.strictEqual(byName.slow!.source, "remote")
      assert.match(r.stderr, /✗ slow timed out after/)
      assert.strictEqual(byName.here!.source, "ran")
      assert.strictEqual(byName.gen!.source, "remote")
    }))

  it.scoped("an executor that cannot be reached: fallback on runs locally and says so; off fails, naming it", () =>
    Effect.gen(function*() {
      const url = `grpc://127.0.0.1:${yield* Effect.promise(deadPort)}`
      const on = yield* machine(namespace())
      const r = yield* on.run(["--remote-executor", url])
      assert.strictEqual(r.code, 0, r.stderr)
      assert.deepStrictEqual(sources(r.summary), { gen: "ran", use: "ran", big: "ran" })
      assert.strictEqual(r.summary!.remoteFallbacks, 3)
      assert.strictEqual(r.stderr.match(/warning: remote executor .* running processes locally instead/g)?.length, 1)
      assert.match(r.stderr, /3 processes the executor grpc:\/\/127\.0\.0\.1:\d+ could not take ran locally/)
      const off = yield* machine(namespace())
      const failed = yield* off.run(["--remote-executor", url, "--remote-fallback", "off"])
      assert.strictEqual(failed.code, 1)
      assert.match(failed.stderr, /remote executor grpc:\/\/127\.0\.0\.1:\d+: it cannot be used/)
    }))

  it.scoped("an input blob the worker lost between runs is sent again", () =>
    Effect.gen(function*() {
      const first = yield* machine(namespace())
      assert.strictEqual((yield* first.run(executor())).code, 0)
      // The same input bytes under another namespace: new actions, whose input the worker no longer has.
      const input = fs.readFileSync(path.join(first.ws, "in/a.txt"))
      evictBlob(createHash("sha256").update(input).digest("hex"))
      const second = yield* machine(namespace())
      fs.writeFileSync(path.join(second.ws, "in/a.txt"), input)
      const r = yield* second.run(executor())
      assert.strictEqual(r.code, 0, r.stderr)
      assert.deepStrictEqual(sources(r.summary), { gen: "remote", use: "remote", big: "remote" })
      assert.deepStrictEqual(outputsOf(second.ws), outputsOf(first.ws))
    }))

  it.scoped("kiln exec --remote-executor runs one process remotely", () =>
    Effect.gen(function*() {
      const m = yield* machine(namespace())
      const r = yield* m.kiln([
        "exec",
        ...executor(),
        "--cache-namespace",
        namespace(),
        "--env",
        "PATH=/usr/bin:/bin",
        "--json",
        "--",
        "sh",
        "-c",
        "echo remote"
      ])
      assert.strictEqual(r.code, 0, r.stderr)
      assert.strictEqual(JSON.parse(r.stdout).source, "remote")
    }))
})

describe("remote execution: the worker's sandbox, and the worker's death", () => {
  it.scoped("on a sandboxed worker, a graph runs, and a process that writes outside its sandbox fails there", () =>
    Effect.gen(function*() {
      const ns = namespace()
      const escape = path.join(os.tmpdir(), `kiln-escape-${ns}`)
      const extra = {
        escapes: { argv: ["node", "-e", `require("fs").writeFileSync(${JSON.stringify(escape)}, "x")`], env: PATH }
      }
      const m = yield* machine(ns, { extra })
      const r = yield* m.run(["--remote-executor", remoteServers().reapiSandboxUrl, "--keep-going"])
      assert.strictEqual(r.code, 1, r.stderr)
      const byName = Object.fromEntries(r.summary!.processes.map((p) => [p.name, p]))
      assert.deepStrictEqual([byName.gen!.source, byName.use!.source, byName.big!.source], [
        "remote",
        "remote",
        "remote"
      ])
      assert.strictEqual(byName.escapes!.source, "remote")
      assert.strictEqual(byName.escapes!.exitCode, 1)
      assert.match(r.stderr, /EROFS/)
      assert.isFalse(fs.existsSync(escape))
    }))

  it.scopedLive("the worker killed while it runs a process: the run goes on locally and succeeds", () =>
    Effect.gen(function*() {
      const gate = yield* tempDir("kiln-gate-")
      const m = yield* machine(namespace(), { gate })
      const running = yield* m.start(["--remote-executor", remoteServers().victimUrl])
      yield* eventually("gen started on the worker", () => fs.existsSync(path.join(gate, "started")), "60 seconds")
      yield* killVictim
      yield* Effect.addFinalizer(() => Effect.promise(restartVictim))
      fs.writeFileSync(path.join(gate, "go"), "")
      const r = yield* running
      assert.strictEqual(r.code, 0, r.stderr)
      assert.strictEqual(sources(r.summary).gen, "ran")
      assert.isAbove(r.summary!.remoteFallbacks, 0)
      assert.match(r.stderr, /warning: remote executor grpc:\/\/127\.0\.0\.1:\d+: .*running processes locally instead/)
      assert.strictEqual(fs.readFileSync(path.join(m.ws, "res/b.txt"), "utf8").startsWith("ALPHA"), true)
    }))
})

describe("remote execution: inputs the worker loses during a run", () => {
  it.scopedLive("an input gone from the worker after it was sent is sent again, and the process runs", () =>
    Effect.gen(function*() {
      const gate = yield* tempDir("kiln-gate-")
      const ns = namespace()
      const waitForGo = `const g=${JSON.stringify(gate)};fs.writeFileSync(g+"/started","");` +
        `while(!fs.existsSync(g+"/go"))Atomics.wait(new Int32Array(new SharedArrayBuffer(4)),0,0,20);`
      const extra = {
        first: {
          argv: [
            "node",
            "-e",
            `const fs=require("fs");${waitForGo}fs.writeFileSync("o1.txt","1:"+fs.readFileSync("shared.txt"))`
          ],
          inputs: ["shared.txt"],
          outputs: ["o1.txt"],
          env: PATH
        },
        second: {
          argv: [
            "node",
            "-e",
            `const fs=require("fs");fs.writeFileSync("o2.txt",fs.readFileSync("o1.txt")+"+"+fs.readFileSync("shared.txt"))`
          ],
          inputs: ["shared.txt"],
          deps: ["first"],
          outputs: ["o2.txt"],
          env: PATH
        }
      }
      const m = yield* machine(ns, { extra })
      const shared = `shared ${ns}\n`
      fs.writeFileSync(path.join(m.ws, "shared.txt"), shared)
      const log = path.join(m.root, "remote.jsonl")
      const running = yield* m.start([...executor(), "--remote-log", log, "second"])
      // `first` runs on the worker with shared.txt, sent once; the worker then loses it, and `second` needs it. (Its
      // output is other bytes: the worker storing first's output must not bring shared.txt back.)
      yield* eventually("first running on the worker", () => fs.existsSync(path.join(gate, "started")), "60 seconds")
      evictBlob(createHash("sha256").update(shared).digest("hex"))
      fs.writeFileSync(path.join(gate, "go"), "")
      const r = yield* running
      assert.strictEqual(r.code, 0, r.stderr)
      assert.deepStrictEqual(sources(r.summary), { first: "remote", second: "remote" })
      assert.strictEqual(fs.readFileSync(path.join(m.ws, "o2.txt"), "utf8"), `1:${shared}+${shared}`)
      const executes = fs.readFileSync(log, "utf8").trim().split("\n").map((l) => JSON.parse(l) as { method: string })
        .filter((c) => c.method === "Execute")
      assert.strictEqual(executes.length, 3, "first, then second twice: the worker lacked an input the first time")
    }))
})

/** A process that says it started (and counts its runs) in `gate`, then waits for `gate/go` before its output. */
const gated = (gate: string) => ({
  argv: [
    "node",
    "-e",
    `const fs=require("fs");const g=${JSON.stringify(gate)};fs.appendFileSync(g+"/runs","run\\n");` +
    `fs.writeFileSync(g+"/started","");` +
    `while(!fs.existsSync(g+"/go"))Atomics.wait(new Int32Array(new SharedArrayBuffer(4)),0,0,20);` +
    `fs.writeFileSync("gated.txt","gated")`
  ],
  outputs: ["gated.txt"],
  env: PATH
})

const callsIn = (log: string) =>
  fs.existsSync(log)
    ? fs.readFileSync(log, "utf8").trim().split("\n").filter((l) => l !== "").map((l) =>
      JSON.parse(l) as { method: string; status: string }
    )
    : []

describe("remote execution: streams that break or go silent", () => {
  it.scopedLive("a dropped Execute stream is re-attached with WaitExecution: the action runs once", () =>
    Effect.gen(function*() {
      const gate = yield* tempDir("kiln-gate-")
      const proxy = yield* tcpProxy(Number(new URL(remoteServers().reapiUrl).port))
      const m = yield* machine(namespace(), { extra: { gated: gated(gate) } })
      const log = path.join(m.root, "remote.jsonl")
      const running = yield* m.start(["--remote-executor", proxy.url, "--remote-log", log, "gated"])
      yield* eventually("gated running on the worker", () => fs.existsSync(path.join(gate, "started")), "60 seconds")
      const before = proxy.accepted()
      yield* proxy.cut
      // kiln comes back on a new connection (to re-attach); the action finishes whether or not it is there yet.
      yield* eventually("kiln reconnecting", () => proxy.accepted() > before, "30 seconds")
      fs.writeFileSync(path.join(gate, "go"), "")
      const r = yield* running
      assert.strictEqual(r.code, 0, r.stderr)
      assert.deepStrictEqual(sources(r.summary), { gated: "remote" })
      assert.strictEqual(fs.readFileSync(path.join(m.ws, "gated.txt"), "utf8"), "gated")
      assert.strictEqual(fs.readFileSync(path.join(gate, "runs"), "utf8"), "run\n", "executed once, not again")
      const calls = callsIn(log)
      assert.isTrue(calls.some((c) => c.method === "WaitExecution"), JSON.stringify(calls))
      assert.strictEqual(calls.filter((c) => c.method === "Execute").length, 1, JSON.stringify(calls))
    }))

  it.scopedLive("an Execute stream silent for --remote-timeout is re-attached until the action finishes", () =>
    Effect.gen(function*() {
      const gate = yield* tempDir("kiln-gate-")
      const m = yield* machine(namespace(), { extra: { gated: gated(gate) } })
      const log = path.join(m.root, "remote.jsonl")
      const running = yield* m.start([...executor(), "--remote-timeout", "1s", "--remote-log", log, "gated"])
      yield* eventually("gated running on the worker", () => fs.existsSync(path.join(gate, "started")), "60 seconds")
      // Bazel's worker says nothing while an action runs: each second of silence is a stall, and a re-attach.
      yield* eventually(
        "a stalled stream re-attached",
        () => callsIn(log).some((c) => c.method === "WaitExecution" && c.status === "DEADLINE_EXCEEDED"),
        "30 seconds"
      )
      fs.writeFileSync(path.join(gate, "go"), "")
      const r = yield* running
      assert.strictEqual(r.code, 0, r.stderr)
      assert.deepStrictEqual(sources(r.summary), { gated: "remote" })
      assert.strictEqual(fs.readFileSync(path.join(gate, "runs"), "utf8"), "run\n", "executed once, not again")
      assert.strictEqual(callsIn(log).filter((c) => c.method === "Execute").length, 1)
    }))
})

describe("remote execution: interruption", () => {
  it.scopedLive("Ctrl-C while a process runs remotely: exit 130, its operation cancelled", () =>
    Effect.gen(function*() {
      const marker = `kiln-cancel-${namespace()}`
      const extra = { slow: { argv: ["node", "-e", HANG, marker], env: PATH } }
      const m = yield* machine(namespace(), { extra })
      const log = path.join(m.root, "remote.jsonl")
      const running = yield* m.start([...executor(), "--remote-log", log, "slow"])
      // Bazel's worker cannot cancel (it has no Operations service): what it started is killed here, afterwards.
      yield* Effect.addFinalizer(() => Effect.sync(() => killMarked(marker)))
      yield* eventually("slow running on the worker", () => markedPids(marker).length > 0, "60 seconds")
      process.kill(m.lastPid(), "SIGINT")
      const r = yield* running
      assert.strictEqual(r.code, 130, r.stderr)
      const calls = fs.readFileSync(log, "utf8").trim().split("\n").map((l) => JSON.parse(l) as { method: string })
      assert.isTrue(calls.some((c) => c.method === "CancelOperation"), JSON.stringify(calls))
    }))
})

/** Processes whose command line holds `marker` (the worker's children running a test's action). */
const markedPids = (marker: string): Array<number> =>
  fs.readdirSync("/proc").filter((d) => /^\d+$/.test(d)).flatMap((d) => {
    try {
      return fs.readFileSync(`/proc/${d}/cmdline`, "utf8").includes(marker) ? [Number(d)] : []
    } catch {
      return []
    }
  })

const killMarked = (marker: string) => {
  for (const pid of markedPids(marker)) {
    try {
      process.kill(pid, "SIGKILL")
    } catch {
      // Gone meanwhile.
    }
  }
}
