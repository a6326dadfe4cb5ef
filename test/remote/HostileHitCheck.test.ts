/**
 * Checking a remote hit (`--cache-content validate`, the default: FindMissingBlobs over the blobs it names) is part
 * of its lookup, and bounded like it: a server whose FindMissingBlobs never answers costs one remote error and a
 * local run, not the retries an upload gets for every hit, and once the breaker opens, later lookups wait for
 * nothing. End to end through the built CLI against the hostile gRPC server; counts, never timings.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import * as path from "node:path"
import { hostileGrpc } from "../utils/hostile/grpc.js"
import { digestOf, wire } from "../utils/hostile/messages.js"
import { hostileWorkspace, type Ran } from "../utils/hostile/workspace.js"
import { sources } from "./workspace.js"

/** `n` processes writing `o0.txt`…, each after the one before when `chained`, else all in one wave. */
const processes = (n: number, chained: boolean) => ({
  processes: Object.fromEntries(Array.from({ length: n }, (_, i) => [`p${i}`, {
    argv: ["/bin/sh", "-c", `echo ${i} > o${i}.txt`],
    inputs: ["a.txt"],
    outputs: [`o${i}.txt`],
    env: { PATH: "/usr/bin:/bin" },
    ...(chained && i > 0 ? { deps: [`p${i - 1}`] } : {})
  }]))
})

/** Every process ran locally, and the remote gave no hit. */
const allRanLocally = (n: number, ran: Ran) => {
  assert.strictEqual(ran.code, 0, ran.stderr)
  assert.deepStrictEqual(
    sources(ran.summary),
    Object.fromEntries(Array.from({ length: n }, (_, i) => [`p${i}`, "ran"])),
    ran.stderr
  )
  assert.strictEqual(ran.summary!.remoteCacheHits, 0)
}

describe("a hit whose check never answers is given up as one remote error", () => {
  it.scoped("gRPC: FindMissingBlobs hangs: one DEADLINE_EXCEEDED, and the process runs", () =>
    Effect.gen(function*() {
      const server = yield* hostileGrpc
      const remote = Buffer.from("remote\n")
      const blob = digestOf(remote)
      server.blobs.set(blob.hash, remote)
      server.actionResults.set("*", { output_files: [{ path: "o.txt", digest: wire(blob) }] })
      server.faults.set("FindMissingBlobs", "hang")
      const w = yield* hostileWorkspace()
      const ran = yield* w.kiln(["run", "--remote-cache", server.url, "--remote-cache-mode", "read"])
      assert.strictEqual(ran.code, 0, ran.stderr)
      assert.deepStrictEqual(sources(ran.summary), { p: "ran" }, ran.stderr)
      assert.strictEqual(w.output(), "local\n")
      assert.deepStrictEqual(ran.summary!.remoteErrors, { DEADLINE_EXCEEDED: 1 })
      assert.strictEqual(server.received.filter((r) => r.method === "FindMissingBlobs").length, 1)
    }), { timeout: 120_000 })

  for (const chained of [false, true]) {
    it.scoped(
      chained
        ? "eight chained hits: the breaker opens after its five failures, and the last three lookups ask nothing"
        : "eight hits in one wave: one check, one error, never one check per hit",
      () =>
        Effect.gen(function*() {
          const server = yield* hostileGrpc
          const w = yield* hostileWorkspace(processes(8, chained))
          // A first machine fills the cache honestly.
          const first = yield* w.kiln(["run", "--remote-cache", server.url])
          assert.strictEqual(first.code, 0, first.stderr)
          assert.strictEqual(first.summary!.pendingUploads, 0)
          // A second, with a store of its own, finds every entry, but its check never answers.
          server.faults.set("FindMissingBlobs", "hang")
          const asked = (method: string) => server.received.filter((r) => r.method === method).length
          const before = { find: asked("FindMissingBlobs"), get: asked("GetActionResult") }
          const ran = yield* w.kiln(["run", "--remote-cache", server.url, "--remote-cache-mode", "read"], {
            KILN_STORE_DIR: path.join(w.root, "store2")
          })
          allRanLocally(8, ran)
          if (chained) {
            // Each of the first five hits costs its check's one error; then the breaker is open.
            assert.deepStrictEqual(ran.summary!.remoteErrors, { DEADLINE_EXCEEDED: 5 })
            assert.strictEqual(asked("FindMissingBlobs") - before.find, 5)
            assert.strictEqual(asked("GetActionResult") - before.get, 5)
          } else {
            assert.deepStrictEqual(ran.summary!.remoteErrors, { DEADLINE_EXCEEDED: 1 })
            assert.strictEqual(asked("FindMissingBlobs") - before.find, 1)
          }
        }),
      { timeout: 120_000 }
    )
  }
})
