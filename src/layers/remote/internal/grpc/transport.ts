/**
 * REAPI v2 over gRPC (`@grpc/grpc-js`) as a `Transport`: one connection (`connection.ts`) and the call kinds
 * over it, Capabilities (`capabilities.ts`), the action cache (`actionCache.ts`), the CAS's FindMissing and
 * batches (`cas.ts`), ByteStream for large blobs (`byteStream.ts`) and `Execute` (`execute.ts`).
 *
 * @internal
 */
import * as Effect from "effect/Effect"
import type { Settings } from "../../RemoteSettings.js"
import type { Calls } from "../calls.js"
import type { Transport } from "../transport.js"
import * as ActionCache from "./actionCache.js"
import * as ByteStream from "./byteStream.js"
import * as Capabilities from "./capabilities.js"
import * as Cas from "./cas.js"
import { connect, type ToolInfo } from "./connection.js"
import * as Execute from "./execute.js"

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
    findMissing: (digests, kind) => Cas.findMissing(conn, digests, kind),
    upload: (blobs) => Cas.upload(conn, blobs),
    download: (digests) => Cas.download(conn, digests),
    prepareDownloads: Cas.learnBatchRead(conn),
    close: Effect.sync(() => conn.client.close())
  }
}
