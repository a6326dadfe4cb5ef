/**
 * The Store's primitive operations over its three sharded LMDB stores and the large-file folder. Tree operations
 * (snapshot, materialize, capture) and maintenance (check, gc, stats) are built on these.
 *
 * @internal
 */
import { Effect, Option } from "effect"
import * as Digest from "../../domain/Digest.js"
import * as Directory from "../../domain/Directory.js"
import { StoreError } from "../../domain/StoreErrors.js"
import * as LargeFiles from "./largeFiles.js"
import * as Sharded from "./shardedLmdb.js"

/** @internal */
export interface Core {
  readonly root: string
  readonly files: Sharded.Shards
  readonly directories: Sharded.Shards
  readonly actions: Sharded.Shards
  /** Action locks: one small environment without fsync (a lock need not survive a machine crash). */
  readonly locks: Sharded.Shards
  readonly large: LargeFiles.LargeFiles
  readonly leaseTimeMs: number
}

/** @internal */
export const leaseUntil = (core: Core): number => Date.now() + core.leaseTimeMs

const mismatch = (expected: Digest.Digest, actual: Digest.Digest) =>
  new StoreError({
    reason: "DigestMismatch",
    detail: `the bytes given hash to ${Digest.format(actual)}, not to the digest they were stored under`,
    digest: Digest.format(expected)
  })

/**
 * Stores file contents, computing (and, when `expected` is given, verifying) each digest. Small files go to LMDB in
 * one transaction per shard; large ones to the large-file folder.
 *
 * @internal
 */
export const putFiles = (
  core: Core,
  blobs: ReadonlyArray<Uint8Array>,
  expected?: ReadonlyArray<Digest.Digest>
): Effect.Effect<Array<Digest.Digest>, StoreError> =>
  Effect.suspend(() => {
    const digests = blobs.map(Digest.ofBytes)
    if (expected !== undefined) {
      for (let i = 0; i < digests.length; i++) {
        if (!Digest.equals(digests[i]!, expected[i]!)) return Effect.fail(mismatch(expected[i]!, digests[i]!))
      }
    }
    const until = leaseUntil(core)
    const small: Array<Sharded.Entry> = []
    const large: Array<[Digest.Digest, Uint8Array]> = []
    blobs.forEach((value, i) => {
      const digest = digests[i]!
      if (Digest.isEmpty(digest)) return
      if (value.length >= LargeFiles.THRESHOLD) large.push([digest, value])
      else small.push({ hash: digest.hash, value })
    })
    return Effect.zipRight(
      Effect.all([
        small.length === 0 ? Effect.void : Sharded.putBatch(core.files, small, until, core.leaseTimeMs),
        Effect.forEach(large, ([d, v]) => LargeFiles.putBytes(core.large, d, v, until, core.leaseTimeMs), {
          discard: true
        })
      ], { discard: true }),
      Effect.succeed(digests)
    )
  })

/** @internal */
export const putDirectories = (
  core: Core,
  dirs: ReadonlyArray<Directory.Directory>
): Effect.Effect<Array<Digest.Digest>, StoreError> =>
  Effect.suspend(() => {
    const encoded = dirs.map(Directory.encode)
    const digests = encoded.map(Digest.ofBytes)
    const entries = encoded.flatMap((value, i) => value.length === 0 ? [] : [{ hash: digests[i]!.hash, value }])
    return Effect.as(
      entries.length === 0
        ? Effect.void
        : Sharded.putBatch(core.directories, entries, leaseUntil(core), core.leaseTimeMs),
      digests
    )
  })

const corrupt = (digest: Digest.Digest, kind: string, detail: string) =>
  Effect.logWarning(`removed a corrupt ${kind} entry ${Digest.format(digest)} from the store: ${detail}`)

/**
 * Reads a file's bytes and checks them against the digest. Bytes that do not match are removed from the store and
 * reported as missing, so a corrupt entry is re-created by its producer instead of poisoning later builds.
 *
 * @internal
 */
export const getFile = (
  core: Core,
  digest: Digest.Digest
): Effect.Effect<Option.Option<Uint8Array>, StoreError> => {
  if (Digest.isEmpty(digest)) return Effect.succeed(Option.some(new Uint8Array(0)))
  const read = digest.sizeBytes >= LargeFiles.THRESHOLD
    ? LargeFiles.read(core.large, digest)
    : Sharded.get(core.files, digest.hash)
  return Effect.flatMap(read, (bytes) => {
    if (bytes === undefined) return Effect.succeed(Option.none())
    const actual = Digest.ofBytes(bytes)
    if (Digest.equals(actual, digest)) return Effect.succeed(Option.some(bytes))
    return Effect.as(
      Effect.zipRight(
        removeFile(core, digest),
        corrupt(digest, "file", `its bytes hash to ${Digest.format(actual)}`)
      ),
      Option.none()
    )
  })
}

/**
 * Lends a small file's verified bytes to `f` without copying (the view dies with the call); large files are read.
 * `f` receives `undefined` when the file is absent or was corrupt (and has been removed).
 *
 * @internal
 */
export const withFile = <A>(
  core: Core,
  digest: Digest.Digest,
  f: (bytes: Uint8Array | undefined) => A
): Effect.Effect<A, StoreError> => {
  if (Digest.isEmpty(digest)) return Effect.sync(() => f(new Uint8Array(0)))
  if (digest.sizeBytes >= LargeFiles.THRESHOLD) {
    return Effect.map(getFile(core, digest), (o) => f(Option.getOrUndefined(o)))
  }
  let bad: Digest.Digest | undefined
  return Effect.flatMap(
    Sharded.withValue(core.files, digest.hash, (bytes) => {
      if (bytes === undefined) return f(undefined)
      const actual = Digest.ofBytes(bytes)
      if (Digest.equals(actual, digest)) return f(bytes)
      bad = actual
      return f(undefined)
    }),
    (a) =>
      bad === undefined ? Effect.succeed(a) : Effect.as(
        Effect.zipRight(removeFile(core, digest), corrupt(digest, "file", `its bytes hash to ${Digest.format(bad)}`)),
        a
      )
  )
}

/** @internal */
export const getDirectory = (
  core: Core,
  digest: Digest.Digest
): Effect.Effect<Option.Option<Directory.Directory>, StoreError> => {
  if (Digest.isEmpty(digest)) return Effect.succeed(Option.some(Directory.empty))
  return Effect.flatMap(Sharded.get(core.directories, digest.hash), (bytes) => {
    if (bytes === undefined) return Effect.succeed(Option.none())
    const actual = Digest.ofBytes(bytes)
    const decoded = Digest.equals(actual, digest) ? Directory.decode(bytes) : undefined
    if (decoded !== undefined && decoded._tag === "Right") return Effect.succeed(Option.some(decoded.right))
    const why = decoded === undefined ? `its bytes hash to ${Digest.format(actual)}` : decoded.left.reason
    return Effect.as(
      Effect.zipRight(Sharded.removeBatch(core.directories, [digest.hash]), corrupt(digest, "directory", why)),
      Option.none()
    )
  })
}

/** @internal */
export const hasFile = (core: Core, digest: Digest.Digest): Effect.Effect<boolean, StoreError> =>
  Digest.isEmpty(digest)
    ? Effect.succeed(true)
    : digest.sizeBytes >= LargeFiles.THRESHOLD
    ? LargeFiles.has(core.large, digest.hash)
    : Sharded.has(core.files, digest.hash)

/** @internal */
export const hasDirectory = (core: Core, digest: Digest.Digest): Effect.Effect<boolean, StoreError> =>
  Digest.isEmpty(digest) ? Effect.succeed(true) : Sharded.has(core.directories, digest.hash)

/** @internal */
export const removeFile = (core: Core, digest: Digest.Digest): Effect.Effect<boolean, StoreError> =>
  digest.sizeBytes >= LargeFiles.THRESHOLD
    ? LargeFiles.remove(core.large, digest.hash)
    : Effect.map(Sharded.removeBatch(core.files, [digest.hash]), (r) => r.length > 0)

/** @internal */
export const removeDirectory = (core: Core, digest: Digest.Digest): Effect.Effect<boolean, StoreError> =>
  Effect.map(Sharded.removeBatch(core.directories, [digest.hash]), (r) => r.length > 0)

/**
 * Walks the tree under `root` (directories loaded from the store, checked) and gives every directory, with its
 * path, to `visit` in pre-order. A directory that is absent fails with `MissingDigest`.
 *
 * @internal
 */
export const walkTree = (
  core: Core,
  root: Digest.Digest,
  visit: (path: string, dir: Directory.Directory) => void
): Effect.Effect<void, Digest.MissingDigest | StoreError> => {
  const go = (relPath: string, digest: Digest.Digest): Effect.Effect<void, Digest.MissingDigest | StoreError> =>
    Effect.flatMap(getDirectory(core, digest), (o) => {
      if (Option.isNone(o)) return Effect.fail(new Digest.MissingDigest({ digest, kind: "directory" }))
      visit(relPath, o.value)
      return Effect.forEach(
        o.value.directories,
        (d) => go(relPath === "" ? d.name : `${relPath}/${d.name}`, d.digest),
        { discard: true }
      )
    })
  return go("", root)
}

/**
 * Fails with `MissingDigest` naming the first blob (directory or file) of the tree that is absent.
 *
 * @internal
 */
export const ensureDownloaded = (
  core: Core,
  root: Digest.Digest
): Effect.Effect<void, Digest.MissingDigest | StoreError> =>
  Effect.gen(function*() {
    const files = new Map<string, Digest.Digest>()
    yield* walkTree(core, root, (_, dir) => {
      for (const f of dir.files) files.set(f.digest.hash, f.digest)
    })
    for (const digest of files.values()) {
      if (!(yield* hasFile(core, digest))) return yield* new Digest.MissingDigest({ digest, kind: "file" })
    }
  })

/**
 * Stores small file contents whose digests the caller computed from these very bytes (snapshot and capture hash
 * as they read, and must not pay for it twice).
 *
 * @internal
 */
export const putHashedSmallFiles = (
  core: Core,
  entries: ReadonlyArray<Sharded.Entry>
): Effect.Effect<void, StoreError> =>
  entries.length === 0 ? Effect.void : Sharded.putBatch(core.files, entries, leaseUntil(core), core.leaseTimeMs)

const CHECKSUM = 32

/**
 * Action-cache entries are keyed by the action digest, not by their own bytes, so each value carries the SHA-256 of
 * its payload in front: `check` and every read can tell a damaged entry from a good one.
 *
 * @internal
 */
export const sealActionResult = (payload: Uint8Array): Buffer =>
  Buffer.concat([Buffer.from(Digest.ofBytes(payload).hash, "hex"), payload])

/** The payload of a sealed entry, or undefined when the seal does not match. @internal */
export const unsealActionResult = (value: Uint8Array): Uint8Array | undefined => {
  if (value.length < CHECKSUM) return undefined
  const payload = value.subarray(CHECKSUM)
  const expected = Buffer.from(value.subarray(0, CHECKSUM)).toString("hex")
  return Digest.ofBytes(payload).hash === expected ? payload : undefined
}

/** @internal */
export const putActionResult = (
  core: Core,
  actionDigest: Digest.Digest,
  payload: Uint8Array
): Effect.Effect<void, StoreError> =>
  Sharded.putBatch(
    core.actions,
    [{ hash: actionDigest.hash, value: sealActionResult(payload) }],
    leaseUntil(core),
    core.leaseTimeMs,
    true
  )

/** @internal */
export const getActionResult = (
  core: Core,
  actionDigest: Digest.Digest
): Effect.Effect<Option.Option<Uint8Array>, StoreError> =>
  Effect.flatMap(Sharded.get(core.actions, actionDigest.hash), (value) => {
    if (value === undefined) return Effect.succeed(Option.none())
    const payload = unsealActionResult(value)
    if (payload !== undefined) return Effect.succeed(Option.some(payload))
    return Effect.as(
      Effect.zipRight(
        Sharded.removeBatch(core.actions, [actionDigest.hash]),
        Effect.logWarning(`removed a corrupt action-cache entry ${Digest.format(actionDigest)}`)
      ),
      Option.none()
    )
  })
