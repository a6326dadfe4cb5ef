/**
 * An execution's inputs on the server: what it lacks of an input root and of the action's messages, sent (a
 * directory the server was given in this run is not walked again), and what it was said to have forgotten when it
 * turns out to have lost some of it.
 *
 * @internal
 */
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Digest from "../../../domain/Digest.js"
import * as Directory from "../../../domain/Directory.js"
import type { UploadError } from "./cacheState.js"
import type { Deps } from "./execution.js"
import type { Blob } from "./transport.js"

/** Directories and messages up to this size are sent without a FindMissingBlobs first (one round trip less). */
const SEND_UNASKED_BYTES = 64 * 1024

/** Blobs sent per upload call, so that a large input tree is never all in memory at once. */
const UPLOAD_CHUNK = 512

/**
 * Every directory and file of a tree the server was not given in this run, with the directories' bytes, and the
 * uploads in flight (another execution's, or the journal's) that are sending some of it: those are waited for, not
 * sent again. A directory in flight is walked all the same: what is under it may be a third upload's.
 */
const walk = (deps: Deps, root: Digest.Digest) =>
  Effect.gen(function*() {
    const { inFlight, present, store } = deps
    const dirs: Array<Blob> = []
    const files = new Map<string, Digest.Digest>()
    const theirs = new Set<Deferred.Deferred<void, UploadError>>()
    const seen = new Set<string>()
    const stack = [root]
    while (stack.length > 0) {
      const digest = stack.pop()!
      if (Digest.isEmpty(digest) || present.has(digest.hash) || seen.has(digest.hash)) continue
      seen.add(digest.hash)
      const dir = yield* store.getDirectory(digest)
      const sending = inFlight.get(digest.hash)
      if (sending !== undefined) theirs.add(sending)
      else dirs.push({ digest, bytes: Directory.encode(dir) })
      for (const f of dir.files) {
        if (f.digest.sizeBytes === 0 || present.has(f.digest.hash)) continue
        const other = inFlight.get(f.digest.hash)
        if (other !== undefined) theirs.add(other)
        else files.set(f.digest.hash, f.digest)
      }
      for (const d of dir.directories) stack.push(d.digest)
    }
    return { dirs, files: [...files.values()], theirs }
  })

/** Sends those of a tree's directories, the action's messages and the tree's files that the server lacks. */
const send = (deps: Deps, inMemory: ReadonlyArray<Blob>, files: ReadonlyArray<Digest.Digest>) =>
  Effect.gen(function*() {
    const { present, store, transport } = deps
    // A few KiB of messages and directories cost less to send than to ask about: they go without a question.
    const askAll = inMemory.reduce((n, b) => n + b.bytes.length, 0) > SEND_UNASKED_BYTES
    const asked = [...(askAll ? inMemory.map((b) => b.digest) : []), ...files]
    const missing = new Set(asked.length === 0 ? [] : (yield* transport.findMissing(asked, "query")).map((d) => d.hash))
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
    yield* (!askAll && deps.gathered !== undefined ? deps.gathered(sendNow) : transport.upload(sendNow))
    deps.calls.counters.uploadedBytes += sendNow.reduce((n, b) => n + b.digest.sizeBytes, 0)
    for (const b of inMemory) present.add(b.digest.hash)
    for (const d of files) present.add(d.hash)
  })

/**
 * Sends what the server lacks of a tree and of the action's messages. What this sends is marked in flight until it is
 * there, so that executions sharing a tree (a `node_modules`) send it once between them, as the journal's uploads do;
 * what others are sending is waited for. @internal
 */
export const uploadInputs = (deps: Deps, root: Digest.Digest, messages: ReadonlyArray<Blob>) =>
  Effect.gen(function*() {
    const { inFlight, present } = deps
    const { dirs, files, theirs } = yield* walk(deps, root)
    const ownMessages = messages.filter((m) => {
      if (present.has(m.digest.hash)) return false
      const other = inFlight.get(m.digest.hash)
      if (other !== undefined) theirs.add(other)
      return other === undefined
    })
    const inMemory = [...dirs, ...ownMessages]
    const mine = [...inMemory.map((b) => b.digest.hash), ...files.map((d) => d.hash)]
    const sending = yield* Deferred.make<void, UploadError>()
    for (const hash of mine) inFlight.set(hash, sending)
    yield* Effect.onExit(send(deps, inMemory, files), (exit) =>
      Effect.zipRight(
        Effect.sync(() => {
          for (const hash of mine) if (inFlight.get(hash) === sending) inFlight.delete(hash)
        }),
        Deferred.done(sending, Exit.asVoid(exit))
      ))
    // The action may name them only once they are there, whoever sent them.
    yield* Effect.forEach(theirs, Deferred.await, { discard: true })
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
