/**
 * REAPI v2 over gRPC (`@grpc/grpc-js`) as a `Transport`: one connection (`grpcConnection.ts`) and the call kinds
 * over it, Capabilities (`grpcCapabilities.ts`), the action cache (`grpcActionCache.ts`), the CAS's FindMissing and
 * batches (`grpcCas.ts`), ByteStream for large blobs (`grpcByteStream.ts`) and `Execute` (`grpcExecute.ts`).
 *
 * @internal
 */
import * as Effect from "effect/Effect"
import type { Settings } from "../RemoteSettings.js"
import type { Calls } from "./calls.js"
import * as ActionCache from "./grpcActionCache.js"
import * as ByteStream from "./grpcByteStream.js"
import * as Capabilities from "./grpcCapabilities.js"
import * as Cas from "./grpcCas.js"
import { connect, type ToolInfo } from "./grpcConnection.js"
import * as Execute from "./grpcExecute.js"
import type { Transport } from "./transport.js"

export type { ToolInfo }

export const make = (settings: Settings, calls: Calls, tool: ToolInfo): Transport => {
  const conn = connect(settings, calls, tool)
  return {
    calls,
    downloadFile: (digest, file) => ByteStream.downloadFile(conn, digest, file),
    execute: (action, stallMs, skipCache) => Execute.execute(conn, action, stallMs, skipCache),
    capabilities: Capabilities.capabilities(conn),
    getActionResult: (action) => ActionCache.getActionResult(conn, action),
    updateActionResult: (action, result) => ActionCache.updateActionResult(conn, action, result),
    findMissing: (digests) => Cas.findMissing(conn, digests),
    upload: (blobs) => Cas.upload(conn, blobs),
    download: (digests) => Cas.download(conn, digests),
    close: Effect.sync(() => conn.client.close())
  }
}
