/**
 * The Store's primitive operations over its three sharded LMDB stores and the large-file folder. Tree operations
 * (snapshot, materialize, capture) and maintenance (check, gc, stats) are built on these.
 *
 * @internal
 */
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Digest from "../../../domain/Digest.js"
import * as Directory from "../../../domain/Directory.js"
import { StoreError } from "../../../domain/StoreErrors.js"
import * as LargeFiles from "./largeFiles.js"
import * as LmdbEnvs from "./lmdb/envs.js"
import * as Sharded from "./lmdb/shards.js"
import * as WorkspaceSources from "./workspaceSources.js"

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
  /**
   * Directories this process has read and verified, by hash. Content-addressed bytes never change, so a second read
   * needs only to know the entry is still there (GC or `store rm` may have removed it), not to hash and decode it
   * again: a run lists, validates and leases the same small trees several times per process.
   */
  readonly verified: Map<string, { readonly dir: Directory.Directory; readonly sizeBytes: number }>
  /**
   * Directories this process made and is still committing in the background (a merge's, see `Store.mergeTrees`), by
   * hash, with how many writes of each are in flight: present to this process, from `verified`, until they land.
   */
  readonly committing: Map<string, number>
  /** Files this process's workspace snapshots hashed and left in the workspace (see `workspaceSources.ts`). */
  readonly sources: WorkspaceSources.Sources
}

/** Bytes of the entries this process added to the store (see `usage.ts`). @internal */
export const addedBytes = (core: Core): number =>
  core.files.added.bytes + core.directories.added.bytes + core.actions.added.bytes + core.large.added.bytes

/** The core of each open store, by its service: what `StoreMaintenance` works on. */
const cores = new WeakMap<object, Core>()

/** Records that `service` is the store over `core`. @internal */
export const register = <S extends object>(service: S, core: Core): S => {
  cores.set(service, core)
  return service
}

/** The core of a store `Store.make` returned. @internal */
export const coreOf = (service: object): Core => {
  const core = cores.get(service)
  if (core === undefined) throw new Error("not a store made by Store.make: maintenance needs an open store's own")
  return core
}

/** The core of a store `Store.make` returned, or undefined for another (a test's wrapper). @internal */
export const findCore = (service: object): Core | undefined => cores.get(service)

/** Whether `hash` is a directory this process is still committing (and so has in `verified`). @internal */
const committing = (core: Core, hash: string): boolean => core.committing.has(hash) && core.verified.has(hash)

const VERIFIED_MAX = 100_000

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

/**
 * The bytes of a file the store does not hold, read from where a workspace snapshot of this process hashed it, if
 * they still hash to `digest` (see `workspaceSources.ts`); not stored: a reader that needs the store to hold them
 * (a sandbox another process writes) has `ensureTree` fill them.
 */
const fromSource = (core: Core, digest: Digest.Digest): Uint8Array | undefined => {
  const source = WorkspaceSources.lookup(core.sources, digest)
  if (source === undefined) return undefined
  const bytes = WorkspaceSources.readSized(source, digest)
  return bytes !== undefined && Digest.equals(Digest.ofBytes(bytes), digest) ? bytes : undefined
}

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
    if (bytes === undefined) return Effect.sync(() => Option.fromNullable(fromSource(core, digest)))
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
      if (bytes === undefined) return f(fromSource(core, digest))
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

/** Records a directory this process encoded itself as verified. @internal */
export const rememberDirectory = (core: Core, digest: Digest.Digest, dir: Directory.Directory): void => {
  if (core.verified.size >= VERIFIED_MAX) {
    // Those still committing stay: nothing else vouches for them yet.
    const keep = [...core.committing.keys()].flatMap((h) => {
      const v = core.verified.get(h)
      return v === undefined ? [] : [[h, v] as const]
    })
    core.verified.clear()
    for (const [h, v] of keep) core.verified.set(h, v)
  }
  core.verified.set(digest.hash, { dir, sizeBytes: digest.sizeBytes })
}

/** @internal */
export const getDirectory = (
  core: Core,
  digest: Digest.Digest
): Effect.Effect<Option.Option<Directory.Directory>, StoreError> => {
  if (Digest.isEmpty(digest)) return Effect.succeed(Option.some(Directory.empty))
  const known = core.verified.get(digest.hash)
  if (known !== undefined && known.sizeBytes === digest.sizeBytes) {
    if (committing(core, digest.hash)) return Effect.succeed(Option.some(known.dir))
    return Effect.map(
      Sharded.has(core.directories, digest.hash),
      (present) => present ? Option.some(known.dir) : Option.none()
    )
  }
  return Effect.flatMap(Sharded.get(core.directories, digest.hash), (bytes) => {
    if (bytes === undefined) return Effect.succeed(Option.none())
    const actual = Digest.ofBytes(bytes)
    const decoded = Digest.equals(actual, digest) ? Directory.decode(bytes) : undefined
    if (decoded !== undefined && decoded._tag === "Right") {
      rememberDirectory(core, digest, decoded.right)
      return Effect.succeed(Option.some(decoded.right))
    }
    const why = decoded === undefined ? `its bytes hash to ${Digest.format(actual)}` : decoded.left.reason
    return Effect.as(
      Effect.zipRight(Sharded.removeBatch(core.directories, [digest.hash]), corrupt(digest, "directory", why)),
      Option.none()
    )
  })
}

/**
 * {@link getDirectory} in plain code, for walks over many directories: the decoded directory, `undefined` when it is
 * absent, or `"slow"` when the bytes are corrupt (the caller goes through {@link getDirectory}, which removes and
 * reports them).
 *
 * @internal
 */
export const getDirectorySync = (
  core: Core,
  digest: Digest.Digest
): Directory.Directory | undefined | "slow" | StoreError => {
  if (Digest.isEmpty(digest)) return Directory.empty
  const shard = Sharded.shardOf(core.directories, digest.hash)
  if (shard instanceof StoreError) return shard
  const known = core.verified.get(digest.hash)
  if (known !== undefined && known.sizeBytes === digest.sizeBytes) {
    if (committing(core, digest.hash)) return known.dir
    const present = LmdbEnvs.readSync(shard, () => shard.content.doesExist(Sharded.keyOf(digest.hash)))
    return typeof present === "boolean" ? (present ? known.dir : undefined) : present
  }
  const bytes = LmdbEnvs.readSync(shard, () => shard.content.getBinary(Sharded.keyOf(digest.hash)))
  if (bytes instanceof StoreError || bytes === undefined) return bytes
  if (!Digest.equals(Digest.ofBytes(bytes), digest)) return "slow"
  const decoded = Directory.decode(bytes)
  if (decoded._tag === "Left") return "slow"
  rememberDirectory(core, digest, decoded.right)
  return decoded.right
}

/**
 * Visits every directory of a tree in pre-order, in plain code; falls back to Effects only for a corrupt directory.
 * Fails with `MissingDigest` naming the first absent directory.
 *
 * @internal
 */
export const walkTree = (
  core: Core,
  root: Digest.Digest,
  visit: (path: string, dir: Directory.Directory) => void
): Effect.Effect<void, Digest.MissingDigest | StoreError> =>
  Effect.suspend(() => {
    const stack: Array<[string, Digest.Digest]> = [["", root]]
    const step = (): Effect.Effect<void, Digest.MissingDigest | StoreError> => {
      while (stack.length > 0) {
        const [relPath, digest] = stack.pop()!
        const dir = getDirectorySync(core, digest)
        if (dir === "slow") {
          return Effect.flatMap(getDirectory(core, digest), (o) => {
            if (Option.isNone(o)) return Effect.fail(new Digest.MissingDigest({ digest, kind: "directory" }))
            enter(relPath, o.value)
            return step()
          })
        }
        if (dir instanceof StoreError) return Effect.fail(dir)
        if (dir === undefined) return Effect.fail(new Digest.MissingDigest({ digest, kind: "directory" }))
        enter(relPath, dir)
      }
      return Effect.void
    }
    const enter = (relPath: string, dir: Directory.Directory) => {
      visit(relPath, dir)
      // Reversed onto the stack, so that directories are visited in name order.
      for (let i = dir.directories.length - 1; i >= 0; i--) {
        const d = dir.directories[i]!
        stack.push([relPath === "" ? d.name : `${relPath}/${d.name}`, d.digest])
      }
    }
    return step()
  })

/** @internal */
export const hasFile = (core: Core, digest: Digest.Digest): Effect.Effect<boolean, StoreError> =>
  Effect.suspend(() => {
    const r = hasFileSync(core, digest)
    return typeof r === "boolean" ? Effect.succeed(r) : Effect.fail(r)
  })

/** {@link hasFile} without the Effect, for loops over many files. @internal */
export const hasFileSync = (core: Core, digest: Digest.Digest): boolean | StoreError => {
  if (Digest.isEmpty(digest)) return true
  if (digest.sizeBytes >= LargeFiles.THRESHOLD) return LargeFiles.hasSync(core.large, digest.hash)
  const shard = Sharded.shardOf(core.files, digest.hash)
  if (shard instanceof StoreError) return shard
  return LmdbEnvs.readSync(shard, () => shard.content.doesExist(Sharded.keyOf(digest.hash)))
}

/** @internal */
export const hasDirectory = (core: Core, digest: Digest.Digest): Effect.Effect<boolean, StoreError> =>
  Digest.isEmpty(digest) || committing(core, digest.hash)
    ? Effect.succeed(true)
    : Sharded.has(core.directories, digest.hash)

/** @internal */
export const removeFile = (core: Core, digest: Digest.Digest): Effect.Effect<boolean, StoreError> =>
  digest.sizeBytes >= LargeFiles.THRESHOLD
    ? LargeFiles.remove(core.large, digest.hash)
    : Effect.map(Sharded.removeBatch(core.files, [digest.hash]), (r) => r.length > 0)

/** @internal */
export const removeDirectory = (core: Core, digest: Digest.Digest): Effect.Effect<boolean, StoreError> =>
  Effect.map(Sharded.removeBatch(core.directories, [digest.hash]), (r) => r.length > 0)

/** @internal */
export const removeActionResult = (core: Core, actionDigest: Digest.Digest): Effect.Effect<boolean, StoreError> =>
  Effect.map(Sharded.removeBatch(core.actions, [actionDigest.hash]), (r) => r.length > 0)

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
  const expected = Buffer.from(value.buffer, value.byteOffset, CHECKSUM).toString("hex")
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

/**
 * Reads many action-cache entries at once: one read transaction per shard, however many keys it holds (a run looks
 * up every process of a wave together). A damaged entry is removed and reads as absent.
 *
 * @internal
 */
export const getActionResults = (
  core: Core,
  actionDigests: ReadonlyArray<Digest.Digest>
): Effect.Effect<Array<Option.Option<Uint8Array>>, StoreError> =>
  Effect.suspend(() => {
    const out: Array<Option.Option<Uint8Array>> = actionDigests.map(() => Option.none())
    const corrupt: Array<Digest.Digest> = []
    const byShard = new Map<LmdbEnvs.SharedEnv, Array<number>>()
    for (let i = 0; i < actionDigests.length; i++) {
      const shard = Sharded.shardOf(core.actions, actionDigests[i]!.hash)
      if (shard instanceof StoreError) return Effect.fail(shard)
      const group = byShard.get(shard)
      if (group === undefined) byShard.set(shard, [i])
      else group.push(i)
    }
    for (const [shard, group] of byShard) {
      const values = LmdbEnvs.readSync(shard, () =>
        group.map((i) => shard.content.getBinary(Sharded.keyOf(actionDigests[i]!.hash))))
      if (values instanceof StoreError) {
        return Effect.fail(values)
      }
      group.forEach((i, j) => {
        const value = values[j]
        if (value === undefined) {
          return
        }
        const payload = unsealActionResult(value)
        if (payload === undefined) {
          corrupt.push(actionDigests[i]!)
        } else out[i] = Option.some(payload)
      })
    }
    if (corrupt.length === 0) {
      return Effect.succeed(out)
    }
    return Effect.as(
      Effect.zipRight(
        Sharded.removeBatch(
          core.actions,
          corrupt.map((d) =>
            d.hash
          )
        ),
        Effect.forEach(corrupt, (d) => Effect.logWarning(`removed a corrupt action-cache entry ${Digest.format(d)}`), {
          discard: true
        })
      ),
      out
    )
  })

/** @internal */
export const getActionResult = (
  core: Core,
  actionDigest: Digest.Digest
): Effect.Effect<Option.Option<Uint8Array>, StoreError> =>
  Effect.map(getActionResults(core, [actionDigest]), (r) => r[0]!)
