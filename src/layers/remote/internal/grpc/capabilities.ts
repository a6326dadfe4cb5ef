/**
 * What a REAPI server supports: `GetCapabilities`, and, for a server that disables action-cache updates, whether it
 * has an action cache at all. The server's batch limit is kept in the connection for the CAS's batches.
 *
 * @internal
 */
import * as Effect from "effect/Effect"
import * as Digest from "../../../../domain/Digest.js"
import type { RemoteError } from "../../RemoteErrors.js"
import type { Capabilities } from "../transport.js"
import { BATCH_FRAMING, type Connection, digestArg, GRPC_MESSAGE_LIMIT, unary, V2 } from "./connection.js"

/**
 * A server that disables action-cache updates may have no action cache at all (bst-artifact-server registers none):
 * one lookup of a digest nobody has tells them apart (NOT_FOUND: a read-only cache; UNIMPLEMENTED: none).
 */
const hasActionCache = (conn: Connection): Effect.Effect<boolean, RemoteError> =>
  unary(
    conn,
    `${V2}ActionCache`,
    "GetActionResult",
    ["GetActionResultRequest", {
      instance_name: conn.settings.instanceName,
      action_digest: digestArg(Digest.empty)
    }],
    "ActionResult",
    "probe"
  ).pipe(
    Effect.as(true),
    Effect.catchIf((e) => e.code === "NOT_FOUND", () => Effect.succeed(true)),
    Effect.catchIf((e) => e.code === "UNIMPLEMENTED", () => Effect.succeed(false))
  )

/** REAPI's `DigestFunction.Value`s by number, as a server's capabilities list them. */
const DIGEST_FUNCTIONS = [
  "UNKNOWN",
  "SHA256",
  "SHA1",
  "MD5",
  "VSO",
  "SHA384",
  "SHA512",
  "MURMUR3",
  "SHA256TREE",
  "BLAKE3"
]

/** The server's `ServerCapabilities`, as kiln reports them; learns the server's batch limit on the way. */
const described = (conn: Connection, caps: any): Capabilities => {
  const cache = caps.cache_capabilities
  const max = Number(cache?.max_batch_total_size_bytes ?? 0)
  conn.learned.batchLimit = Math.min(max > 0 ? max : GRPC_MESSAGE_LIMIT, GRPC_MESSAGE_LIMIT) - BATCH_FRAMING
  const functions: Array<number> = cache?.digest_function ?? []
  // A REAPI 2.0 server may name none: SHA-256 was then the only one.
  const sha256 = functions.includes(1) || functions.length === 0
  const names = functions.map((n) => DIGEST_FUNCTIONS[n] ?? `DIGEST_FUNCTION_${n}`)
  const actionCache: Capabilities["actionCache"] = cache === undefined
    ? "none"
    : cache.action_cache_update_capabilities?.update_enabled === true
    ? "read-write"
    : "read"
  const v = (s: any) => (s === undefined ? "?" : `${s.major ?? 0}.${s.minor ?? 0}`)
  return {
    maxBatchBytes: max,
    actionCache,
    execution: caps.execution_capabilities?.exec_enabled === true,
    ...(sha256 ? {} : { withoutSha256: names }),
    lines: [
      `REAPI ${v(caps.low_api_version)}–${v(caps.high_api_version)}, digest functions: ${
        sha256 ? "SHA256" : `${names.join(", ")}, no SHA256 (kiln needs it)`
      }`,
      `action cache: ${
        actionCache === "read-write"
          ? "read and write"
          : actionCache === "read"
          ? "read only (updates disabled)"
          : "none"
      }`,
      `batches up to ${max > 0 ? max : "4194304 (default)"} bytes`,
      `remote execution: ${caps.execution_capabilities?.exec_enabled === true ? "enabled" : "not offered"}`
    ]
  }
}

export const capabilities = (conn: Connection): Effect.Effect<Capabilities, RemoteError> =>
  Effect.map(
    unary<any>(
      conn,
      `${V2}Capabilities`,
      "GetCapabilities",
      ["GetCapabilitiesRequest", { instance_name: conn.settings.instanceName }],
      "ServerCapabilities",
      "probe"
    ),
    (caps) => described(conn, caps)
  ).pipe(
    Effect.flatMap((caps) =>
      caps.actionCache !== "read"
        ? Effect.succeed(caps)
        : Effect.map(hasActionCache(conn), (has): Capabilities =>
          has ? caps : {
            ...caps,
            actionCache: "none",
            lines: caps.lines.map((l) => l.startsWith("action cache:") ? "action cache: none (a CAS-only server)" : l)
          })
    )
  )
