/**
 * The breaker against half-working servers of the suite's own (test/utils/hostile/grpc.ts), through the built CLI,
 * over a chain of processes (each one's key waits for the one before, so lookups come one at a time, in order):
 * lookups that stall while uploads go through, a `RetryInfo` longer than a lookup's budget, and failures scattered
 * among answers; a server without SHA-256; and the probe answered before the run hashes its workspace. Nothing here waits on a clock: each test counts the calls the server received and reads what kiln
 * printed.
 */
import { assert, describe, it } from "@effect/vitest"
import * as grpc from "@grpc/grpc-js"
import { Context, Deferred, Effect, Exit, Fiber, Layer, Option } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"
import * as RemoteCache from "../../src/layers/remote/RemoteCache.js"
import * as RemoteSettings from "../../src/layers/remote/RemoteSettings.js"
import * as Store from "../../src/layers/store/Store.js"
import { hostileGrpc } from "../utils/hostile/grpc.js"
import { Answer, hostileHttp } from "../utils/hostile/http.js"
import { hostileWorkspace } from "../utils/hostile/workspace.js"
import { tempDir } from "../utils/temp.js"

/** `n` processes, each copying the one before's output (the first copies `a.txt`, unique to the workspace). */
const chain = (n: number) => ({
  processes: Object.fromEntries(Array.from({ length: n }, (_, i) => [
    `p${i}`,
    {
      argv: ["/bin/sh", "-c", i === 0 ? "cat a.txt > o0.txt" : `cat o${i - 1}.txt > o${i}.txt`],
      inputs: ["a.txt"],
      ...(i > 0 ? { deps: [`p${i - 1}`] } : {}),
      outputs: [`o${i}.txt`],
      env: { PATH: "/usr/bin:/bin" }
    }
  ]))
})

const linesOf = (text: string, pattern: RegExp) => text.split("\n").filter((l) => pattern.test(l))
const escape = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")

describe("the breaker against a half-working server", () => {
  it.scoped(
    "lookups that stall while uploads go through: at most five lookups are asked, one line says so, and every upload lands",
    () =>
      Effect.gen(function*() {
        const server = yield* hostileGrpc
        server.faults.set("GetActionResult", "hang")
        const n = 12
        const w = yield* hostileWorkspace(chain(n))
        const ran = yield* w.kiln(["run", "--remote-cache", server.url])
        assert.strictEqual(ran.code, 0, ran.stderr)
        assert.strictEqual(ran.summary!.ran, n, ran.stderr)
        const lookups = server.received.filter((r) => r.method === "GetActionResult").length
        // Five stalls in a row open the lookups' breaker; a stalled lookup is a miss, never retried.
        assert.isAtMost(lookups, 5, ran.stderr)
        // The lookups' breaker is theirs: uploads went on while it was open.
        assert.strictEqual(ran.summary!.pendingUploads, 0, ran.stderr)
        assert.strictEqual(server.received.filter((r) => r.method === "UpdateActionResult").length, n, ran.stderr)
        const endpoint = escape(server.url)
        const opened = linesOf(
          ran.stderr,
          new RegExp(
            `remote cache ${endpoint}: 5 × DEADLINE_EXCEEDED in a row from GetActionResult; lookups are not asked`
          )
        )
        assert.strictEqual(opened.length, 1, ran.stderr)
        const closing = linesOf(ran.stderr, new RegExp(`kiln: remote cache ${endpoint}: .*lookup breaker opened 1×`))
        assert.strictEqual(closing.length, 1, ran.stderr)
        assert.match(
          closing[0]!,
          new RegExp(`turned ${n - 5} lookups away; ${n} processes ran locally, ${n} uploaded`),
          ran.stderr
        )
      }),
    { timeout: 120_000 }
  )

  it.scoped(
    "a RetryInfo of 60 s on a lookup: a miss, and the endpoint's lookups back off; one lookup is asked in the run",
    () =>
      Effect.gen(function*() {
        const server = yield* hostileGrpc
        server.faults.set("GetActionResult", { code: grpc.status.UNAVAILABLE, retryDelayMs: 60_000 })
        const n = 6
        const w = yield* hostileWorkspace(chain(n))
        const ran = yield* w.kiln(["run", "--remote-cache", server.url])
        assert.strictEqual(ran.code, 0, ran.stderr)
        assert.strictEqual(ran.summary!.ran, n, ran.stderr)
        assert.strictEqual(server.received.filter((r) => r.method === "GetActionResult").length, 1, ran.stderr)
        assert.strictEqual(ran.summary!.pendingUploads, 0, ran.stderr)
        const endpoint = escape(server.url)
        assert.strictEqual(
          linesOf(
            ran.stderr,
            new RegExp(`remote cache ${endpoint}: GetActionResult answered UNAVAILABLE asking kiln to wait 60s`)
          ).length,
          2, // the warning as it opens, and the closing line
          ran.stderr
        )
      }),
    { timeout: 120_000 }
  )

  it.scoped(
    "failures scattered among misses never add up: every lookup is asked, and --remote-required passes",
    () =>
      Effect.gen(function*() {
        const server = yield* hostileGrpc
        // Every lookup's first attempt fails, its retry is answered (a miss): as many failures as lookups, none in a row.
        server.faults.set("GetActionResult", (i) => (i % 2 === 0 ? grpc.status.UNAVAILABLE : undefined))
        const n = 8
        const w = yield* hostileWorkspace(chain(n))
        const ran = yield* w.kiln(["run", "--remote-cache", server.url, "--remote-required"])
        assert.strictEqual(ran.code, 0, ran.stderr)
        assert.strictEqual(ran.summary!.ran, n, ran.stderr)
        assert.strictEqual(server.received.filter((r) => r.method === "GetActionResult").length, 2 * n, ran.stderr)
        assert.deepStrictEqual(ran.summary!.remoteErrors, { UNAVAILABLE: n }, ran.stderr)
        assert.notMatch(ran.stderr, /breaker|not asked/, ran.stderr)
      }),
    { timeout: 120_000 }
  )
})

describe("a server that does not offer SHA-256", () => {
  it.scoped(
    "BLAKE3 only: one line naming the endpoint, a local run, nothing sent or left pending; --remote-required exits 1",
    () =>
      Effect.gen(function*() {
        const server = yield* hostileGrpc
        server.capabilities = {
          cache_capabilities: {
            digest_function: [9],
            action_cache_update_capabilities: { update_enabled: true },
            max_batch_total_size_bytes: 4 * 1024 * 1024
          },
          low_api_version: { major: 2 },
          high_api_version: { major: 2, minor: 3 }
        }
        const w = yield* hostileWorkspace(chain(2))
        const endpoint = escape(server.url)
        const line = new RegExp(`remote cache ${endpoint} does not offer SHA-256 \\(only BLAKE3\\)`)
        const ran = yield* w.kiln(["run", "--remote-cache", server.url])
        assert.strictEqual(ran.code, 0, ran.stderr)
        assert.strictEqual(ran.summary!.ran, 2, ran.stderr)
        assert.strictEqual(ran.summary!.pendingUploads, 0, ran.stderr)
        // The warning as the remote is turned off, and the closing line's costs.
        assert.strictEqual(linesOf(ran.stderr, line).length, 2, ran.stderr)
        assert.deepStrictEqual([...new Set(server.received.map((r) => r.method))], ["GetCapabilities"])
        const required = yield* w.kiln(["run", "--remote-cache", server.url, "--remote-required"])
        assert.strictEqual(required.code, 1, required.stderr)
        assert.strictEqual(linesOf(required.stderr, line).length, 1, required.stderr)
        const status = yield* w.kiln(["remote", "status", "--remote-cache", server.url])
        assert.match(status.stdout, /digest functions: BLAKE3, no SHA256/, status.stdout)
      }),
    { timeout: 120_000 }
  )
})

describe("the probe measures the server, not kiln", () => {
  it.scoped("the remote layer is ready only once the probe is answered: the run hashes its workspace after it", () =>
    Effect.gen(function*() {
      const server = yield* hostileGrpc
      const arrived = yield* Deferred.make<() => void>()
      server.faults.set("GetCapabilities", { hold: (release) => Deferred.unsafeDone(arrived, Exit.succeed(release)) })
      const root = yield* tempDir("kiln-probe-first-")
      const settings: RemoteSettings.Settings = {
        endpoint: yield* RemoteSettings.parseEndpoint(server.url, "test"),
        instanceName: "",
        headers: [],
        mode: "read-write",
        required: false,
        timeoutMs: RemoteSettings.DEFAULT_TIMEOUT_MS,
        executor: false,
        remoteJobs: RemoteSettings.DEFAULT_REMOTE_JOBS,
        fallback: true
      }
      const building = yield* Effect.fork(
        Layer.build(
          RemoteCache.layer(settings, { version: "test" }).pipe(
            Layer.provide(Store.layer({ root: path.join(root, "store") }))
          )
        )
      )
      const release = yield* Deferred.await(arrived)
      // The probe's call is at the server, unanswered: nothing that needs the layer (the run's snapshot) has begun.
      assert.isTrue(Option.isNone(yield* Fiber.poll(building)))
      release()
      const context = yield* Fiber.join(building)
      const caps = yield* Context.get(context, RemoteCache.RemoteCache).capabilities
      assert.strictEqual(caps.actionCache, "read-write")
    }))
})

describe("an HTTP cache that answers 409 (Apache, when a directory of the prefix is missing)", () => {
  it.scoped("a configuration error: said once, naming the endpoint; never retried, never an outage", () =>
    Effect.gen(function*() {
      const server = yield* hostileHttp
      server.answer("cas/*", Answer.status(409))
      const w = yield* hostileWorkspace()
      const ran = yield* w.kiln(["run", "--remote-cache", server.url])
      assert.strictEqual(ran.code, 0, ran.stderr)
      const line = new RegExp(
        `remote cache ${
          escape(server.url)
        } refused an upload \\(.*FAILED_PRECONDITION: HTTP 409: .*prefix is missing\\)`
      )
      assert.strictEqual(linesOf(ran.stderr, line).length, 1, ran.stderr)
      assert.strictEqual(ran.summary!.pendingUploads, 1, ran.stderr)
      const cas = server.received.filter((r) => r.path.startsWith("cas/")).map((r) => `${r.method} ${r.path}`)
      assert.isAbove(cas.length, 0)
      assert.strictEqual(new Set(cas).size, cas.length, `no request is retried: ${cas.join(", ")}`)
      assert.deepStrictEqual(Object.keys(ran.summary!.remoteErrors), ["FAILED_PRECONDITION"], ran.stderr)
    }))
})

describe("BatchUpdateBlobs that answers OK but refuses its blobs one by one", () => {
  it.scoped(
    "a refusal (INVALID_ARGUMENT): counted, logged with its code, said once; the closing line and `remote flush` say why",
    () =>
      Effect.gen(function*() {
        const server = yield* hostileGrpc
        server.batchUpdateRefusal = grpc.status.INVALID_ARGUMENT
        const w = yield* hostileWorkspace()
        const log = path.join(yield* tempDir("kiln-refusal-log-"), "remote.log")
        const ran = yield* w.kiln(["run", "--remote-cache", server.url, "--remote-log", log])
        assert.strictEqual(ran.code, 0, ran.stderr)
        const endpoint = escape(server.url)
        const updates = server.received.filter((r) => r.method === "BatchUpdateBlobs").length
        // A refusal is not retried: one call, and one error for it.
        assert.strictEqual(updates, 1, ran.stderr)
        assert.deepStrictEqual(ran.summary!.remoteErrors, { INVALID_ARGUMENT: 1 }, ran.stderr)
        assert.strictEqual(ran.summary!.pendingUploads, 1, ran.stderr)
        assert.strictEqual(server.received.filter((r) => r.method === "UpdateActionResult").length, 0)
        assert.strictEqual(
          linesOf(ran.stderr, new RegExp(`remote cache ${endpoint} refused an upload \\(BatchUpdateBlobs: INVALID_ARG`))
            .length,
          1,
          ran.stderr
        )
        assert.strictEqual(
          linesOf(ran.stderr, new RegExp(`1 upload to ${endpoint} is pending \\(INVALID_ARGUMENT ×1\\)`)).length,
          1,
          ran.stderr
        )
        const logged = fs.readFileSync(log, "utf8").trim().split("\n").map((l) => JSON.parse(l) as { method: string })
          .filter((l) => l.method === "BatchUpdateBlobs")
        assert.deepStrictEqual(logged.map((l) => (l as { status?: string }).status), ["INVALID_ARGUMENT"])
        const flushed = yield* w.kiln(["remote", "flush", "--remote-cache", server.url])
        assert.strictEqual(flushed.code, 1, flushed.stderr)
        assert.match(flushed.stderr, /1 uploads? to .* (is|are) still pending \(INVALID_ARGUMENT ×1\)/, flushed.stderr)
        const required = yield* w.kiln(["run", "--remote-cache", server.url, "--remote-required"])
        assert.strictEqual(required.code, 1, required.stderr)
        assert.match(
          required.stderr,
          /BatchUpdateBlobs failed: INVALID_ARGUMENT.*\(--remote-required\)/,
          required.stderr
        )
      }),
    { timeout: 120_000 }
  )

  it.scoped(
    "an outage code per blob (RESOURCE_EXHAUSTED): retried as the call's own would be, every attempt counted, no blob-by-blob fallback",
    () =>
      Effect.gen(function*() {
        const server = yield* hostileGrpc
        server.batchUpdateRefusal = grpc.status.RESOURCE_EXHAUSTED
        const w = yield* hostileWorkspace()
        const ran = yield* w.kiln(["run", "--remote-cache", server.url])
        assert.strictEqual(ran.code, 0, ran.stderr)
        const updates = server.received.filter((r) => r.method === "BatchUpdateBlobs").length
        assert.isAbove(updates, 1, ran.stderr)
        assert.deepStrictEqual(ran.summary!.remoteErrors, { RESOURCE_EXHAUSTED: updates }, ran.stderr)
        // A blob refused for the server's quota is no batch over its message limit: nothing goes by ByteStream.
        assert.strictEqual(server.received.filter((r) => r.method === "Write").length, 0, ran.stderr)
        assert.strictEqual(ran.summary!.pendingUploads, 1, ran.stderr)
        assert.match(ran.stderr, /uploads? to .* (is|are) pending \(RESOURCE_EXHAUSTED ×\d+\)/, ran.stderr)
      }),
    { timeout: 120_000 }
  )
})
