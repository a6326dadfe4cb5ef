/**
 * The remote cache against a CAS-only server: BuildStream 1.6's bst-artifact-server (`scripts/remote/servers.sh`, on
 * 127.0.0.1). It serves the CAS and ByteStream but registers no ActionCache service (GetActionResult answers
 * UNIMPLEMENTED), and its Capabilities say action cache updates are disabled, so kiln can keep no results there. A
 * run must then go on locally and say so in one clear line, `kiln remote status` must say there is no action cache,
 * and `--remote-required` must end the run with one line that names the endpoint and says why.
 */
import { assert, describe, it } from "@effect/vitest"
import * as grpc from "@grpc/grpc-js"
import { Effect } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"
import { remoteServers, serverAlive } from "../utils/remote.js"
import { machine, namespace, sources } from "./workspace.js"

const bst = () => remoteServers().bstUrl
const escape = (s: string) => s.replace(/[.*+?^${}()|[\]\\/]/g, "\\$&")
const linesOf = (text: string, pattern: RegExp) => text.split("\n").filter((line) => pattern.test(line))

/** A gRPC call with raw bytes: its status code name, or "OK". */
const rawCall = (url: string, method: string, request: Uint8Array) =>
  Effect.acquireUseRelease(
    Effect.sync(() => new grpc.Client(url.replace(/^grpc:\/\//, ""), grpc.credentials.createInsecure())),
    (client) =>
      Effect.async<string>((resume) => {
        const bytes = (b: Buffer) => b
        const call = client.makeUnaryRequest(
          method,
          bytes,
          bytes,
          Buffer.from(request),
          new grpc.Metadata(),
          { deadline: Date.now() + 10_000 },
          (err) => resume(Effect.succeed(err ? grpc.status[err.code] ?? String(err.code) : "OK"))
        )
        return Effect.sync(() => call.cancel())
      }),
    (client) => Effect.sync(() => client.close())
  )

describe("remote cache: a CAS-only server (bst-artifact-server)", () => {
  it.scoped("the server is CAS-only: FindMissingBlobs works, GetActionResult is UNIMPLEMENTED", () =>
    Effect.gen(function*() {
      const s = remoteServers()
      assert.isTrue(serverAlive(s.bstPid), `bst-artifact-server (pid ${s.bstPid}) is not running`)
      // Empty requests: instance "" and no digests.
      const cas = "/build.bazel.remote.execution.v2.ContentAddressableStorage/FindMissingBlobs"
      assert.strictEqual(yield* rawCall(s.bstUrl, cas, new Uint8Array()), "OK")
      const ac = "/build.bazel.remote.execution.v2.ActionCache/GetActionResult"
      assert.strictEqual(yield* rawCall(s.bstUrl, ac, new Uint8Array()), "UNIMPLEMENTED")
    }))

  it.scoped("kiln run: every process runs locally, and one line says the remote has no action cache", () =>
    Effect.gen(function*() {
      const ns = namespace()
      const m = yield* machine(ns)
      const r = yield* m.run(["--remote-cache", bst()])
      assert.strictEqual(r.code, 0, r.stderr)
      assert.strictEqual(r.summary!.ran, 3, r.stderr)
      assert.deepStrictEqual(sources(r.summary), { gen: "ran", use: "ran", big: "ran" })
      assert.strictEqual(r.summary!.remoteCacheHits, 0)
      // A working local run: the outputs are there.
      assert.strictEqual(fs.readFileSync(path.join(m.ws, "res/b.txt"), "utf8"), `ALPHA ${ns.toUpperCase()}\nbeta\n`)
      assert.strictEqual(fs.statSync(path.join(m.ws, "big.bin")).size, 5 * 1024 * 1024 + 17)
      // Said once, as a warning that names the endpoint, and once more in the run's closing line.
      const url = escape(bst())
      assert.strictEqual(
        linesOf(r.stderr, new RegExp(`warning: remote cache ${url} has no action cache`)).length,
        1,
        r.stderr
      )
      assert.match(r.stderr, new RegExp(`remote cache ${url} .*no action cache.*: 3 processes ran locally, 0 uploaded`))
      assert.notMatch(r.stderr, /UNIMPLEMENTED|Method not found/)
    }))

  it.scoped("kiln run: no uploads are left pending for a server that can never take them", () =>
    Effect.gen(function*() {
      const m = yield* machine(namespace())
      const r = yield* m.run(["--remote-cache", bst()])
      assert.strictEqual(r.code, 0, r.stderr)
      // "N uploads … are pending: the next run, or `kiln remote flush`, takes them up" would be a second message, and
      // untrue: the next run and `kiln remote flush` cannot upload a result to a server without an action cache.
      assert.notMatch(r.stderr, /are pending/, r.stderr)
      assert.strictEqual(r.summary!.pendingUploads, 0, r.stderr)
    }))

  it.scoped("kiln remote status: reachable, no action cache, batches up to 1 MiB", () =>
    Effect.gen(function*() {
      const m = yield* machine(namespace())
      const status = yield* m.kiln(["remote", "status", "--remote-cache", bst()])
      assert.strictEqual(status.code, 0, status.stderr)
      assert.match(status.stdout, new RegExp(`${escape(bst())}: reachable in \\d+ ms`))
      assert.match(status.stdout, /action cache: (none|absent)\b/, status.stdout)
      assert.match(status.stdout, /batch[^\n]*\b1048576\b/, status.stdout)
    }))

  it.scoped("--remote-required: exit 1, with one line that names the endpoint and says it has no action cache", () =>
    Effect.gen(function*() {
      const m = yield* machine(namespace())
      const required = new RegExp(`remote cache ${escape(bst())} .*has no action cache.*--remote-required`)
      // With an empty store, and again once the store holds every result (no lookup reaches the remote then).
      for (const when of ["empty store", "results in the local store"]) {
        if (when !== "empty store") {
          const local = yield* m.run(["--remote-cache", bst()])
          assert.strictEqual(local.code, 0, local.stderr)
        }
        const r = yield* m.run(["--remote-cache", bst(), "--remote-required"])
        assert.strictEqual(r.code, 1, `${when}: ${r.stderr}`)
        assert.strictEqual(linesOf(r.stderr, required).length, 1, `${when}: ${r.stderr}`)
        assert.strictEqual(linesOf(r.stderr, /--remote-required/).length, 1, `${when}: ${r.stderr}`)
        assert.notMatch(r.stderr, /UNIMPLEMENTED|Method not found/, when)
      }
    }))
})
