/**
 * A remote cache whose stored entries a test rewrites, as a cache writer would: nginx as Bazel's HTTP cache (the
 * suite's own, its data root on disk) or the hostile REAPI server of `grpc.ts` (an honest cache in memory, whose
 * `UpdateActionResult` replaces).
 */
import { Effect, type Scope } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"
import * as Proto from "../../../src/layers/remote/internal/proto.js"
import { remoteServers } from "../remote.js"
import { hostileGrpc } from "./grpc.js"

/** Which cache: the HTTP one or the gRPC one. */
export type Kind = "http" | "grpc"

/** The flags that name the cache, and its stored entries and blobs to read and rewrite. */
export interface Remote {
  readonly flags: ReadonlyArray<string>
  readonly actionResult: (hash: string) => Record<string, unknown> | undefined
  readonly setActionResult: (hash: string, bytes: Uint8Array) => void
  readonly putBlob: (hash: string, bytes: Uint8Array) => void
}

/** Writes a file nginx serves, whole (a rename), readable as its own files are. */
const plant = (file: string, bytes: Uint8Array) => {
  fs.mkdirSync(path.dirname(file), { recursive: true })
  const tmp = `${file}.planted-${process.pid}`
  fs.writeFileSync(tmp, bytes, { mode: 0o644 })
  fs.renameSync(tmp, file)
}

/** A cache of `kind` whose entries the test may rewrite (the gRPC one started for the scope). */
export const rewritableRemote = (kind: Kind): Effect.Effect<Remote, Error, Scope.Scope> =>
  kind === "http"
    ? Effect.sync(() => {
      const at = (area: "ac" | "cas", hash: string) => path.join(remoteServers().httpDir, area, hash)
      return {
        flags: ["--remote-cache", remoteServers().httpUrl],
        actionResult: (hash) =>
          fs.existsSync(at("ac", hash)) ? Proto.decode("ActionResult", fs.readFileSync(at("ac", hash))) : undefined,
        setActionResult: (hash, bytes) => plant(at("ac", hash), bytes),
        putBlob: (hash, bytes) => plant(at("cas", hash), bytes)
      }
    })
    : Effect.map(hostileGrpc, (server): Remote => ({
      flags: ["--remote-cache", server.url],
      actionResult: (hash) => {
        const r = server.actionResults.get(hash)
        return r instanceof Uint8Array ? Proto.decode("ActionResult", r) : r
      },
      setActionResult: (hash, bytes) => server.actionResults.set(hash, bytes),
      putBlob: (hash, bytes) => server.blobs.set(hash, bytes)
    }))
