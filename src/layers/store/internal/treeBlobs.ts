/**
 * A tree's blobs as a whole: whether the store holds every one (`ensureTree`), their leases, and the files a workspace
 * snapshot left in the workspace (see `workspaceSources.ts`) stored before a reader in another process needs them.
 *
 * @internal
 */
import * as Effect from "effect/Effect"
import * as Digest from "../../../domain/Digest.js"
import { StoreError } from "../../../domain/StoreErrors.js"
import { type Core, hasFileSync, leaseUntil, putHashedSmallFiles, walkTree } from "./core.js"
import * as LargeFiles from "./largeFiles.js"
import * as Sharded from "./lmdb/shards.js"
import * as WorkspaceSources from "./workspaceSources.js"

const FILL_BATCH_BYTES = 32 * 1024 * 1024

/**
 * Stores those of `files` the store lacks and a workspace snapshot of this process left in the workspace, read
 * again and taken only where they still hash to their digests; the others stay missing. Small ones go in batches.
 *
 * @internal
 */
export const fillFromSources = (
  core: Core,
  files: ReadonlyArray<Digest.Digest>
): Effect.Effect<void, StoreError> =>
  Effect.suspend(() => {
    if (WorkspaceSources.isEmpty(core.sources)) return Effect.void
    // Small files are read a batch at a time: a tree written rather than mounted may be a whole node_modules.
    const batches: Array<Array<readonly [Digest.Digest, WorkspaceSources.Source]>> = [[]]
    let batchBytes = 0
    const large: Array<readonly [Digest.Digest, WorkspaceSources.Source]> = []
    for (const digest of files) {
      const present = hasFileSync(core, digest)
      if (present instanceof StoreError) return Effect.fail(present)
      if (present) continue
      const source = WorkspaceSources.lookup(core.sources, digest)
      if (source === undefined) continue
      if (digest.sizeBytes >= LargeFiles.THRESHOLD) {
        large.push([digest, source])
        continue
      }
      batches[batches.length - 1]!.push([digest, source])
      batchBytes += digest.sizeBytes
      if (batchBytes >= FILL_BATCH_BYTES) {
        batches.push([])
        batchBytes = 0
      }
    }
    const readBatch = (batch: ReadonlyArray<readonly [Digest.Digest, WorkspaceSources.Source]>) => {
      const entries: Array<Sharded.Entry> = []
      for (const [digest, source] of batch) {
        const bytes = WorkspaceSources.readSized(source, digest)
        if (bytes !== undefined && Digest.equals(Digest.ofBytes(bytes), digest)) {
          entries.push({ hash: digest.hash, value: bytes })
        }
      }
      return entries
    }
    return Effect.zipRight(
      Effect.forEach(batches, (batch) => Effect.suspend(() => putHashedSmallFiles(core, readBatch(batch))), {
        discard: true
      }),
      Effect.forEach(
        large,
        ([digest, source]) =>
          LargeFiles.putVerified(
            core.large,
            digest,
            () => WorkspaceSources.open(source, digest),
            leaseUntil(core),
            core.leaseTimeMs
          ),
        { discard: true }
      )
    )
  })

/** The blobs of a tree, each once: its directories' hashes (the root's too) and its non-empty files. */
const blobsOf = (
  core: Core,
  root: Digest.Digest
): Effect.Effect<{ dirs: Array<string>; files: Array<Digest.Digest> }, Digest.MissingDigest | StoreError> => {
  const dirs: Array<string> = Digest.isEmpty(root) ? [] : [root.hash]
  const files = new Map<string, Digest.Digest>()
  return Effect.map(
    walkTree(core, root, (_, dir) => {
      for (const d of dir.directories) if (!Digest.isEmpty(d.digest)) dirs.push(d.digest.hash)
      for (const f of dir.files) if (!Digest.isEmpty(f.digest)) files.set(f.digest.hash, f.digest)
    }),
    () => ({ dirs, files: [...files.values()] })
  )
}

const allPresent = (
  core: Core,
  files: ReadonlyArray<Digest.Digest>
): Effect.Effect<void, Digest.MissingDigest | StoreError> =>
  Effect.suspend((): Effect.Effect<void, Digest.MissingDigest | StoreError> => {
    for (const digest of files) {
      const present = hasFileSync(core, digest)
      if (present instanceof StoreError) return Effect.fail(present)
      if (!present) return Effect.fail(new Digest.MissingDigest({ digest, kind: "file" }))
    }
    return Effect.void
  })

/** Extends the leases of these blobs (only stale ones cost a write; absent ones are skipped). */
const leaseBlobs = (
  core: Core,
  blobs: { readonly dirs: ReadonlyArray<string>; readonly files: ReadonlyArray<Digest.Digest> }
): Effect.Effect<void, StoreError> =>
  Effect.suspend(() => {
    const until = leaseUntil(core)
    const small = blobs.files.filter((d) => d.sizeBytes < LargeFiles.THRESHOLD).map((d) => d.hash)
    const large = blobs.files.filter((d) => d.sizeBytes >= LargeFiles.THRESHOLD).map((d) => d.hash)
    return Effect.zipRight(
      Effect.zipRight(
        Sharded.lease(core.directories, blobs.dirs, until, core.leaseTimeMs),
        Sharded.lease(core.files, small, until, core.leaseTimeMs)
      ),
      Effect.forEach(large, (h) => LargeFiles.lease(core.large, h, until, core.leaseTimeMs), { discard: true })
    )
  })

/**
 * {@link fillFromSources} for every file of the tree `root`, before it is written by another process (a sandboxer
 * writing the store's copy of a shared tree). A directory missing is left for that writer to report.
 *
 * @internal
 */
export const fillTree = (core: Core, root: Digest.Digest): Effect.Effect<void, StoreError> =>
  WorkspaceSources.isEmpty(core.sources) ? Effect.void : blobsOf(core, root).pipe(
    Effect.flatMap((blobs) => fillFromSources(core, blobs.files)),
    Effect.catchTag("MissingDigest", () => Effect.void)
  )

/**
 * Walks a tree once: fails with `MissingDigest` on an absent directory, with `complete` on the first absent file too;
 * with `lease`, extends the leases of every directory and file of it there is (only stale leases cost a write). With
 * either, files a workspace snapshot left in the workspace are stored first (see {@link fillFromSources}).
 *
 * @internal
 */
export const ensureTree = (
  core: Core,
  root: Digest.Digest,
  complete: boolean,
  lease: boolean
): Effect.Effect<void, Digest.MissingDigest | StoreError> =>
  Effect.flatMap(blobsOf(core, root), (blobs) => {
    // What is ensured is in the store, for whoever reads it next (a sandboxer, another process): files a snapshot
    // left in the workspace are stored now, once, rather than read there by each reader.
    const filled = fillFromSources(core, blobs.files)
    if (!lease) return complete ? Effect.zipRight(filled, allPresent(core, blobs.files)) : Effect.void
    return Effect.zipRight(
      filled,
      complete ? Effect.zipRight(allPresent(core, blobs.files), leaseBlobs(core, blobs)) : leaseBlobs(core, blobs)
    )
  })
