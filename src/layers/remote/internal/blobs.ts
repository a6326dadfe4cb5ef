/**
 * Bringing a result's bytes from a server into the local store: its output directories' `Tree` messages (decoded,
 * checked) and the files the local store lacks. Shared by the cache's hits and the executor's results, each over
 * its own endpoint.
 *
 * @internal
 */
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import { randomBytes } from "node:crypto"
import * as fs from "node:fs"
import * as path from "node:path"
import * as Digest from "../../../domain/Digest.js"
import * as Tree from "../../../domain/Tree.js"
import { ioError } from "../../../os/IoError.js"
import * as Layout from "../../store/Layout.js"
import type { Service as StoreService } from "../../store/Store.js"
import { RemoteError } from "../RemoteErrors.js"
import type { Calls } from "./calls.js"
import { checkSizes, MAX_TREE_BYTES, type Transport } from "./transport.js"

/** Blobs over this are streamed to disk rather than held in memory. */
export const STREAM_BYTES = 16 * 1024 * 1024
/** The most the small blobs of one group hold in memory together. */
const GROUP_BYTES = 64 * 1024 * 1024

export const make = (store: StoreService, transport: Transport, calls: Calls, endpoint: string) => {
  const largeRoot = Layout.largeFilesDirectory(store.options.root)
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

  /** A blob over {@link STREAM_BYTES}, streamed to a temp file among the store's large files, then stored from it. */
  const downloadLarge = (digest: Digest.Digest) =>
    Effect.acquireUseRelease(
      Effect.sync(() =>
        // A `.tmp` name there is what the store's GC takes for a temp file: one a crash leaves is reclaimed.
        path.join(largeRoot, `remote.${process.pid}.${randomBytes(6).toString("hex")}.tmp`)
      ),
      (file) =>
        Effect.gen(function*() {
          yield* Effect.try({
            try: () => fs.mkdirSync(largeRoot, { recursive: true }),
            catch: ioError(largeRoot, "mkdir")
          })
          yield* transport.downloadFile(digest, file)
          // Checked against its digest on the way in; the store hashes it again as it copies it.
          yield* store.putFilePath(file)
          calls.counters.downloadedBytes += digest.sizeBytes
        }),
      (file) => Effect.sync(() => fs.rmSync(file, { force: true }))
    )

  /**
   * Downloads the files the local store lacks, each checked against its digest, into the store: the small ones in
   * groups held in memory (one commit per shard and group), the large ones streamed through a file, so that what
   * kiln holds at once stays bounded whatever the result's size.
   */
  const downloadFiles = (files: ReadonlyArray<Digest.Digest>) =>
    Effect.gen(function*() {
      const local = yield* Effect.filter(files, (d) => Effect.map(store.hasFile(d), (has) => !has))
      const large = local.filter((d) => d.sizeBytes > STREAM_BYTES)
      const groups: Array<Array<Digest.Digest>> = [[]]
      let held = 0
      for (const d of local) {
        if (d.sizeBytes > STREAM_BYTES) continue
        if (held + d.sizeBytes > GROUP_BYTES && groups[groups.length - 1]!.length > 0) {
          groups.push([])
          held = 0
        }
        groups[groups.length - 1]!.push(d)
        held += d.sizeBytes
      }
      for (const group of groups) {
        if (group.length === 0) continue
        const blobs = yield* transport.download(group)
        calls.counters.downloadedBytes += blobs.reduce((n, b) => n + b.digest.sizeBytes, 0)
        // Checked by the transport already; stored together, one commit per shard rather than one per blob.
        if (blobs.length > 0) yield* store.putFiles(blobs.map((b) => b.bytes))
      }
      yield* Effect.forEach(large, downloadLarge, { concurrency: 2, discard: true })
    })

  return { fetchTrees, downloadFiles }
}
