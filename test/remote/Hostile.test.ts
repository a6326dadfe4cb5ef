/**
 * Hostile and broken remote caches (test/utils/hostile/), end to end through the built CLI.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { hostileGrpc } from "../utils/hostile/grpc.js"
import { hostileHttp } from "../utils/hostile/http.js"
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
