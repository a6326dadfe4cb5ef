/**
 * An execution's inputs on the server: what it lacks of an input root and of the action's messages, sent (a
 * directory the server was given in this run is not walked again), and what it was said to have forgotten when it
 * turns out to have lost some of it.
 *
 * @internal
 */
import * as Effect from "effect/Effect"
import * as Digest from "../../../domain/Digest.js"
import * as Directory from "../../../domain/Directory.js"
import type { Deps } from "./execution.js"
import type { Blob } from "./transport.js"

/** Directories and messages up to this size are sent without a FindMissingBlobs first (one round trip less). */
const SEND_UNASKED_BYTES = 64 * 1024

/** Blobs sent per upload call, so that a large input tree is never all in memory at once. */
const UPLOAD_CHUNK = 512

/** Every directory and file of a tree the server was not given in this run, with the directories' bytes. */
const walk = (deps: Deps, root: Digest.Digest) =>
  Effect.gen(function*() {
    const { present, store } = deps
    const dirs: Array<Blob> = []
    const files = new Map<string, Digest.Digest>()
    const stack = [root]
    while (stack.length > 0) {
      const digest = stack.pop()!
      if (Digest.isEmpty(digest) || present.has(digest.hash)) continue
      const dir = yield* store.getDirectory(digest)
      dirs.push({ digest, bytes: Directory.encode(dir) })
      for (const f of dir.files) {
        if (f.digest.sizeBytes > 0 && !present.has(f.digest.hash)) files.set(f.digest.hash, f.digest)
      }
      for (const d of dir.directories) stack.push(d.digest)
    }
    return { dirs, files: [...files.values()] }
  })

/** Sends what the server lacks of a tree and of the action's messages. @internal */
export const uploadInputs = (deps: Deps, root: Digest.Digest, messages: ReadonlyArray<Blob>) =>
  Effect.gen(function*() {
    const { present, store, transport } = deps
    const { dirs, files } = yield* walk(deps, root)
    const inMemory = [...dirs, ...messages.filter((m) => !present.has(m.digest.hash))]
    // A few KiB of messages and directories cost less to send than to ask about: they go without a question.
    const askAll = inMemory.reduce((n, b) => n + b.bytes.length, 0) > SEND_UNASKED_BYTES
    const asked = [...(askAll ? inMemory.map((b) => b.digest) : []), ...files]
    const missing = new Set(asked.length === 0 ? [] : (yield* transport.findMissing(asked)).map((d) => d.hash))
    const sendNow = askAll ? inMemory.filter((b) => missing.has(b.digest.hash)) : inMemory
    const fromStore = files.filter((d) => missing.has(d.hash))
    for (let i = 0; i < fromStore.length; i += UPLOAD_CHUNK) {
      const chunk = yield* Effect.forEach(
        fromStore.slice(i, i + UPLOAD_CHUNK),
        (digest) => Effect.map(store.getFile(digest), (bytes): Blob => ({ digest, bytes }))
      )
      yield* transport.upload(chunk)
      deps.calls.counters.uploadedBytes += chunk.reduce((n, b) => n + b.digest.sizeBytes, 0)
    }
    yield* transport.upload(sendNow)
    deps.calls.counters.uploadedBytes += sendNow.reduce((n, b) => n + b.digest.sizeBytes, 0)
    for (const b of inMemory) present.add(b.digest.hash)
    for (const d of files) present.add(d.hash)
  })

/** Forgets what the server was said to have of a tree: it lost some of it. @internal */
export const forget = (deps: Deps, root: Digest.Digest) =>
  Effect.gen(function*() {
    const { present, store } = deps
    const stack = [root]
    while (stack.length > 0) {
      const digest = stack.pop()!
      if (!present.delete(digest.hash)) continue
      const dir = yield* store.getDirectory(digest)
      for (const f of dir.files) present.delete(f.digest.hash)
      for (const d of dir.directories) stack.push(d.digest)
    }
  })
