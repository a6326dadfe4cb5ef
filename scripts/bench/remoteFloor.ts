/**
 * The floor of the remote-execution figure (`remoteExec.ts`): a bare REAPI client, run as a program of its own
 * (`node dist/bench/remoteFloor.mjs URL JOBS PROCESSES SLEEP_MS`), that sends the same processes to the same worker
 * with nothing else: no store, no cache lookups, no sandbox, no engine. It uploads every Command and Action in one
 * BatchUpdateBlobs, then keeps JOBS Executes in flight until all have finished, and prints its wall time from its
 * own start (Node's included, as kiln's figure includes kiln's) as JSON. What kiln takes beyond it is kiln's; what
 * it takes beyond the ideal is the worker's (and the machine's).
 */
import * as grpc from "@grpc/grpc-js"
import { createHash, randomBytes } from "node:crypto"
import { encodeAction, encodeCommand } from "../../src/domain/Action.js"
import type * as Digest from "../../src/domain/Digest.js"
import * as Proto from "../../src/layers/remote/internal/proto.js"

const V2 = "/build.bazel.remote.execution.v2."

const [url, jobsArg, processesArg, sleepArg] = process.argv.slice(2)
if (url === undefined || !url.startsWith("grpc://")) {
  throw new Error("usage: remoteFloor.mjs grpc://HOST:PORT JOBS N MS")
}
const jobs = Number(jobsArg ?? 20)
const processes = Number(processesArg ?? 100)
const sleepMs = Number(sleepArg ?? 300)

const digestOf = (bytes: Uint8Array): Digest.Digest => ({
  hash: createHash("sha256").update(bytes).digest("hex"),
  sizeBytes: bytes.length
})
const wire = (d: Digest.Digest) => ({ hash: d.hash, size_bytes: d.sizeBytes })

// Actions of their own: the worker's cache must answer none of them.
const salt = randomBytes(8).toString("hex")
const empty = new Uint8Array(0)
const emptyDir = digestOf(empty)
const blobs: Array<{ digest: ReturnType<typeof wire>; data: Uint8Array }> = [{ digest: wire(emptyDir), data: empty }]
const actions = Array.from({ length: processes }, (_, i) => {
  const command = encodeCommand({
    arguments: ["/bin/sh", "-c", `sleep ${sleepMs / 1000}; echo ${i} ${salt} > out/p${i}.txt`],
    environmentVariables: { PATH: "/usr/bin:/bin" },
    outputFiles: [`out/p${i}.txt`]
  })
  const action = encodeAction({ commandDigest: digestOf(command), inputRootDigest: emptyDir })
  blobs.push({ digest: wire(digestOf(command)), data: command }, { digest: wire(digestOf(action)), data: action })
  return digestOf(action)
})

const client = new grpc.Client(url.slice("grpc://".length), grpc.credentials.createInsecure())
const bytes = (b: Uint8Array) => Buffer.from(b)
// Bazel's worker refuses a call without RequestMetadata.
const metadata = () => {
  const m = new grpc.Metadata()
  m.set(
    "build.bazel.remote.execution.v2.requestmetadata-bin",
    Buffer.from(Proto.encode("RequestMetadata", {
      tool_details: { tool_name: "kiln-bench-floor", tool_version: "0" },
      tool_invocation_id: salt
    }))
  )
  return m
}
const unary = (method: string, request: string, value: Record<string, unknown>) =>
  new Promise<void>((resolve, reject) =>
    client.makeUnaryRequest(
      `${V2}${method}`,
      bytes,
      bytes,
      Buffer.from(Proto.encode(request, value)),
      metadata(),
      (e) => (e ? reject(e) : resolve())
    )
  )
const execute = (action: Digest.Digest) =>
  new Promise<void>((resolve, reject) => {
    const call = client.makeServerStreamRequest(
      `${V2}Execution/Execute`,
      bytes,
      bytes,
      Buffer.from(Proto.encode("ExecuteRequest", { skip_cache_lookup: true, action_digest: wire(action) })),
      metadata()
    )
    let done = false
    call.on("data", (b: Buffer) => {
      done = Proto.decode<{ done?: boolean }>("google.longrunning.Operation", b).done === true
    })
    call.on("error", reject)
    call.on("end", () => (done ? resolve() : reject(new Error("an Execute stream ended before its operation did"))))
  })

await unary("Capabilities/GetCapabilities", "GetCapabilitiesRequest", {})
await unary("ContentAddressableStorage/BatchUpdateBlobs", "BatchUpdateBlobsRequest", { requests: blobs })
let next = 0
const lane = async () => {
  while (next < actions.length) await execute(actions[next++]!)
}
await Promise.all(Array.from({ length: jobs }, lane))
client.close()
process.stdout.write(`${JSON.stringify({ ms: Math.round(performance.now()) })}\n`)
