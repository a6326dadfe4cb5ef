/**
 * Bringing a result's bytes from a server into the local store: its output directories' `Tree` messages (decoded,
 * checked) and the files the local store lacks. Shared by the cache's hits and the executor's results, each over
 * its own endpoint.
 *
 * @internal
 */
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Digest from "../../domain/Digest.js"
import * as Tree from "../../domain/Tree.js"
import type { Service as StoreService } from "../../store/Store.js"
import { RemoteError } from "../RemoteErrors.js"
import type { Calls } from "./calls.js"
import { checkSizes, MAX_TREE_BYTES, type Transport } from "./transport.js"

export const make = (store: StoreService, transport: Transport, calls: Calls, endpoint: string) => {
  /** Output directories' `Tree` messages, fetched (together), checked and decoded. */
  const fetchTrees = (digests: ReadonlyArray<Digest.Digest>) =>
    Effect.gen(function*() {
      const trees = new Map<string, Tree.Tree>()
      if (digests.length === 0) return trees
      // Decoded whole in memory: bounded far below what any blob may be.
      yield* checkSizes(calls, "Tree", digests, MAX_TREE_BYTES)
      const blobs = yield* transport.download(digests)
      for (const b of blobs) {
        const tree = Tree.decode(b.bytes)
        if (Either.isLeft(tree)) {
          return yield* new RemoteError({
            endpoint,
            method: "Tree",
            code: "INVALID_ARGUMENT",
            detail: `${Digest.format(b.digest)}: ${tree.left.reason}`
          })
        }
        trees.set(b.digest.hash, tree.right)
      }
      calls.counters.downloadedBytes += blobs.reduce((n, b) => n + b.digest.sizeBytes, 0)
      return trees
    })

  /** Downloads the files the local store lacks, each checked against its digest, into the store. */
  const downloadFiles = (files: ReadonlyArray<Digest.Digest>) =>
    Effect.gen(function*() {
      const local = yield* Effect.filter(files, (d) => Effect.map(store.hasFile(d), (has) => !has))
      const blobs = yield* transport.download(local)
      calls.counters.downloadedBytes += blobs.reduce((n, b) => n + b.digest.sizeBytes, 0)
      // Checked by the transport already; stored together, one commit per shard rather than one per blob.
      if (blobs.length > 0) yield* store.putFiles(blobs.map((b) => b.bytes))
    })

  return { fetchTrees, downloadFiles }
}
