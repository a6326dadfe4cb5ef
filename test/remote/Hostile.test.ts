/**
 * Hostile and broken remote caches (test/utils/hostile/), end to end through the built CLI. A server may send an
 * answer without end, drip it a byte at a time, or claim a blob of any size: each is one remote error in the
 * summary and a local run, never a process that grows without bound or waits forever.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { randomUUID } from "node:crypto"
import * as fs from "node:fs"
import * as path from "node:path"
import * as Proto from "../../src/layers/remote/internal/proto.js"
import { MAX_ACTION_RESULT_BYTES } from "../../src/layers/remote/internal/transport.js"
import { hostileGrpc, ReadAnswer } from "../utils/hostile/grpc.js"
import { Answer, hostileHttp } from "../utils/hostile/http.js"
import { digestOf, encodeActionResult, wire } from "../utils/hostile/messages.js"
import { hostileWorkspace, oneProcess, type Ran } from "../utils/hostile/workspace.js"
import { machine, namespace, sources } from "./workspace.js"

describe("hostile servers, answering honestly", () => {
  for (const kind of ["http", "grpc"] as const) {
    it.scoped(`${kind}: a second machine gets every process from the first`, () =>
      Effect.gen(function*() {
        const server = kind === "http" ? yield* hostileHttp : yield* hostileGrpc
        const ns = namespace()
        const first = yield* machine(ns)
        const filled = yield* first.run(["--remote-cache", server.url])
        assert.strictEqual(filled.code, 0, filled.stderr)
        assert.strictEqual(filled.summary!.pendingUploads, 0, filled.stderr)
        const second = yield* machine(ns)
        const served = yield* second.run(["--remote-cache", server.url])
        assert.strictEqual(served.code, 0, served.stderr)
        assert.deepStrictEqual(sources(served.summary), {
          gen: "remote-cache",
          use: "remote-cache",
          big: "remote-cache"
        })
        assert.deepStrictEqual(served.summary!.remoteErrors, {})
      }))
  }
})

describe("RequestMetadata ties a run to others", () => {
  it.scoped("--remote-correlation-id, else $KILN_CORRELATION_ID, is every call's correlated_invocations_id", () =>
    Effect.gen(function*() {
      const server = yield* hostileGrpc
      const w = yield* hostileWorkspace()
      let seen = 0
      /** The ids of the calls since the last look. */
      const correlated = () =>
        new Set(
          server.received.slice(seen, seen = server.received.length).map((r) => {
            const raw = r.metadata["build.bazel.remote.execution.v2.requestmetadata-bin"] as Buffer
            return Proto.decode<{ correlated_invocations_id?: string }>("RequestMetadata", raw)
              .correlated_invocations_id
          })
        )
      const flag = yield* w.kiln(["run", "--remote-cache", server.url, "--remote-correlation-id", "ci-job-7"], {
        KILN_CORRELATION_ID: "from-env"
      })
      assert.strictEqual(flag.code, 0, flag.stderr)
      assert.deepStrictEqual(correlated(), new Set(["ci-job-7"]))
      // A fresh machine: it asks the server again.
      const other = yield* hostileWorkspace(oneProcess(), fs.readFileSync(path.join(w.ws, "a.txt"), "utf8"))
      const env = yield* other.kiln(["run", "--remote-cache", server.url], { KILN_CORRELATION_ID: "from-env" })
      assert.strictEqual(env.code, 0, env.stderr)
      assert.deepStrictEqual(correlated(), new Set(["from-env"]))
    }))
})

describe("large blobs go through a file, not memory", () => {
  for (const kind of ["http", "grpc"] as const) {
    it.scoped(
      `${kind}: a 40 MiB output comes back whole from the remote, and no temp file is left`,
      () =>
        Effect.gen(function*() {
          const server = kind === "http" ? yield* hostileHttp : yield* hostileGrpc
          const config = oneProcess()
          config.processes.p.argv = ["/bin/sh", "-c", "yes kiln | head -c 41943057 > o.txt"]
          const a = `a ${randomUUID()}\n`
          const first = yield* hostileWorkspace(config, a)
          const filled = yield* first.kiln(["run", "--remote-cache", server.url])
          assert.strictEqual(filled.code, 0, filled.stderr)
          const second = yield* hostileWorkspace(config, a)
          const served = yield* second.kiln(["run", "--remote-cache", server.url])
          assert.strictEqual(served.code, 0, served.stderr)
          assert.deepStrictEqual(sources(served.summary), { p: "remote-cache" })
          assert.deepStrictEqual(served.summary!.remoteErrors, {})
          const bytes = fs.readFileSync(path.join(second.ws, "o.txt"))
          assert.strictEqual(bytes.length, 41943057)
          assert.isTrue(bytes.equals(fs.readFileSync(path.join(first.ws, "o.txt"))))
          const large = path.join(second.root, "store", "immutable", "files")
          assert.deepStrictEqual(fs.readdirSync(large).filter((n) => n.endsWith(".tmp")), [])
        }),
      { timeout: 120_000 }
    )
  }
})

/** A kiln without bounds buffers this much of an endless answer before the server goes quiet: its test then fails. */
const SAFETY_STOP = 256 * 1024 * 1024
const MiB = 1024 * 1024

/** The run went on: `p` ran locally, the build succeeded, and the remote's failure is one of `code` in the summary. */
const ranLocallyAfter = (ran: Ran, output: string | undefined, code: string) => {
  assert.strictEqual(ran.code, 0, ran.stderr)
  assert.deepStrictEqual(sources(ran.summary), { p: "ran" }, ran.stderr)
  assert.strictEqual(output, "local\n")
  assert.isAtLeast(ran.summary!.remoteErrors[code] ?? 0, 1, JSON.stringify(ran.summary!.remoteErrors))
}

describe("a hostile or broken cache neither exhausts memory nor hangs the run", () => {
  it.scoped(
    "HTTP: an endless body for an action-cache lookup fails as too large, and the process runs",
    () =>
      Effect.gen(function*() {
        const server = yield* hostileHttp
        server.answer("ac/*", Answer.endless(SAFETY_STOP))
        const w = yield* hostileWorkspace()
        const ran = yield* w.kiln(["run", "--remote-cache", server.url, "--remote-timeout", "5s"])
        ranLocallyAfter(ran, w.output(), "TOO_LARGE")
        // The server wrote no more than the bound and what the sockets' buffers took.
        const sent = server.received.filter((r) => r.method === "GET" && r.path.startsWith("ac/"))
          .reduce((n, r) => n + server.sent(r.path), 0)
        assert.isBelow(sent, MAX_ACTION_RESULT_BYTES + 64 * MiB)
      }),
    { timeout: 120_000 }
  )

  it.scoped(
    "HTTP: a body that drips for an action-cache lookup runs out its deadline, and the process runs",
    () =>
      Effect.gen(function*() {
        const server = yield* hostileHttp
        server.answer("ac/*", Answer.drip(500))
        const w = yield* hostileWorkspace()
        const ran = yield* w.kiln(["run", "--remote-cache", server.url])
        ranLocallyAfter(ran, w.output(), "DEADLINE_EXCEEDED")
      }),
    { timeout: 120_000 }
  )

  it.scoped(
    "HTTP: a blob whose body goes on past its digest's size fails as too large, and the process runs",
    () =>
      Effect.gen(function*() {
        const server = yield* hostileHttp
        const blob = digestOf("remote\n")
        server.answer(
          "ac/*",
          Answer.bytes(encodeActionResult({ output_files: [{ path: "o.txt", digest: wire(blob) }] }))
        )
        server.answer(`cas/${blob.hash}`, Answer.endless(SAFETY_STOP))
        const w = yield* hostileWorkspace()
        const ran = yield* w.kiln(["run", "--remote-cache", server.url, "--remote-timeout", "5s"])
        ranLocallyAfter(ran, w.output(), "TOO_LARGE")
        assert.match(ran.stderr, /GET cas failed: TOO_LARGE/, ran.stderr)
      }),
    { timeout: 120_000 }
  )

  it.scoped("gRPC: a blob claiming 10^12 bytes is refused unread, and the process runs", () =>
    Effect.gen(function*() {
      const server = yield* hostileGrpc
      server.actionResults.set("*", {
        output_files: [{ path: "o.txt", digest: { hash: "cd".repeat(32), size_bytes: 1e12 } }]
      })
      server.findMissing = "none"
      server.batchRead = false
      server.reads.set("*", ReadAnswer.endless(SAFETY_STOP))
      const w = yield* hostileWorkspace()
      const ran = yield* w.kiln(["run", "--remote-cache", server.url, "--remote-timeout", "5s"])
      ranLocallyAfter(ran, w.output(), "TOO_LARGE")
      assert.match(ran.stderr, /ByteStream.Read failed: TOO_LARGE: (cd)+\/1000000000000 is over/, ran.stderr)
      assert.strictEqual(server.readBytes(), 0)
    }), { timeout: 120_000 })

  it.scoped(
    "gRPC: an ActionResult over its bound fails as too large, and the process runs",
    () =>
      Effect.gen(function*() {
        const server = yield* hostileGrpc
        const remote = Buffer.from("remote\n")
        const blob = digestOf(remote)
        server.blobs.set(blob.hash, remote)
        // A usable entry but for its size: without the bound, it is a hit.
        server.actionResults.set(
          "*",
          encodeActionResult({
            output_files: [{ path: "o.txt", digest: wire(blob) }],
            execution_metadata: { worker: "w".repeat(MAX_ACTION_RESULT_BYTES + MiB) }
          })
        )
        const w = yield* hostileWorkspace()
        const ran = yield* w.kiln(["run", "--remote-cache", server.url])
        ranLocallyAfter(ran, w.output(), "TOO_LARGE")
      }),
    { timeout: 120_000 }
  )

  it.scoped(
    "gRPC: a blob read that drips runs out its total deadline, and the process runs",
    () =>
      Effect.gen(function*() {
        const server = yield* hostileGrpc
        const remote = Buffer.from("remote, but never all of it\n")
        const blob = digestOf(remote)
        server.actionResults.set("*", { output_files: [{ path: "o.txt", digest: wire(blob) }] })
        server.findMissing = "none"
        server.batchRead = false
        server.reads.set("*", ReadAnswer.drip(200))
        const w = yield* hostileWorkspace()
        const ran = yield* w.kiln(["run", "--remote-cache", server.url, "--remote-timeout", "1s"])
        ranLocallyAfter(ran, w.output(), "DEADLINE_EXCEEDED")
      }),
    { timeout: 120_000 }
  )
})
