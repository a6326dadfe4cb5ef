/**
 * A connection to one endpoint: its call log and breaker (`calls.ts`) and its transport (gRPC or Bazel's HTTP cache),
 * both closed with the scope. The cache's endpoint and an executor apart from it each get one.
 *
 * @internal
 */
import * as Effect from "effect/Effect"
import { randomUUID } from "node:crypto"
import type { Settings } from "../RemoteSettings.js"
import * as Calls from "./calls.js"
import * as Grpc from "./grpc/transport.js"
import * as Http from "./http.js"
import type { Transport } from "./transport.js"

export const connect = (settings: Settings, version: string) =>
  Effect.gen(function*() {
    const { endpoint } = settings
    const calls = yield* Effect.acquireRelease(
      Effect.sync(() =>
        Calls.make({
          endpoint: endpoint.display,
          timeoutMs: settings.timeoutMs,
          ...(settings.logFile !== undefined ? { logFile: settings.logFile } : {})
        })
      ),
      (c) => c.close
    )
    const transport: Transport = yield* Effect.acquireRelease(
      Effect.sync(() =>
        endpoint.scheme === "grpc" || endpoint.scheme === "grpcs"
          ? Grpc.make(settings, calls, {
            version,
            invocationId: randomUUID(),
            ...(settings.correlationId !== undefined ? { correlatedId: settings.correlationId } : {})
          })
          : Http.make(settings, calls, version)
      ),
      (t) => t.close
    )
    return { calls, transport }
  })
