/**
 * Files of 512 KiB and more live outside LMDB, one read-only file per digest, so that materializing them is a hard
 * link rather than a copy. Each is written to a temp file beside its final name, made read-only, fsynced (a later
 * hard link of a file whose data is not yet on disk can fail with ENOENT: Pants #18768) and renamed into place, so a
 * reader never sees a partial file. Its lease is its mtime (the time it is leased until).
 *
 * @internal
 */
import * as Effect from "effect/Effect"
import { createHash, randomBytes } from "node:crypto"
import * as fs from "node:fs"
import * as path from "node:path"
import type * as Digest from "../../../domain/Digest.js"
import { StoreError } from "../../../domain/StoreErrors.js"
import * as AtomicFile from "../../../os/AtomicFile.js"
import { errnoOf } from "../../../os/Errno.js"
import { ioError } from "../../../os/IoError.js"
import { mkdirp } from "../../../os/Mkdirp.js"
import { writeAll } from "../../../os/WriteAll.js"
import * as Generation from "../Generation.js"
import { largeFilesDirectory } from "../Layout.js"

/** @internal */
export const THRESHOLD = 512 * 1024

/** @internal */
export interface LargeFiles {
  readonly root: string
  readonly storeRoot: string
  /** Bytes of the files this process added (not those it found stored): what the store's cap counts (see `usage`). */
  readonly added: { bytes: number }
}

/** @internal */
export const make = (storeRoot: string): LargeFiles => ({
  root: largeFilesDirectory(storeRoot),
  storeRoot,
  added: { bytes: 0 }
})

/** @internal */
export const pathOf = (large: LargeFiles, hash: string): string => path.join(large.root, hash.slice(0, 2), hash)

/** @internal */
export const isTempName = (name: string): boolean => name.endsWith(".tmp")

/** Size of the stored file, or undefined when absent. @internal */
export const statSize = (large: LargeFiles, hash: string): number | undefined => {
  try {
    return fs.statSync(pathOf(large, hash)).size
  } catch (e) {
    if (errnoOf(e) === "ENOENT") return undefined
    throw e
  }
}

/** @internal */
export const has = (large: LargeFiles, hash: string): Effect.Effect<boolean, StoreError> =>
  Effect.suspend(() => {
    const r = hasSync(large, hash)
    return typeof r === "boolean" ? Effect.succeed(r) : Effect.fail(r)
  })

/** {@link has} without the Effect, for loops over many files. @internal */
export const hasSync = (large: LargeFiles, hash: string): boolean | StoreError => {
  try {
    return statSize(large, hash) !== undefined
  } catch (e) {
    return ioError(pathOf(large, hash), "stat")(e)
  }
}

const setLease = (file: string, until: number, leaseTimeMs: number) => {
  const st = fs.statSync(file)
  if (st.mtimeMs - Date.now() < leaseTimeMs / 2) fs.utimesSync(file, st.atime, new Date(until))
}

/** @internal */
export const lease = (
  large: LargeFiles,
  hash: string,
  until: number,
  leaseTimeMs: number
): Effect.Effect<boolean, StoreError> =>
  Effect.try({
    try: () => {
      try {
        setLease(pathOf(large, hash), until, leaseTimeMs)
        return true
      } catch (e) {
        if (errnoOf(e) === "ENOENT") return false
        throw e
      }
    },
    catch: ioError(pathOf(large, hash), "lease")
  })

const install = (tmp: string, final: string, until: number) => {
  fs.utimesSync(tmp, new Date(), new Date(until))
  fs.renameSync(tmp, final)
}

const writeTemp = (tmp: string, write: (fd: number) => void) => {
  const fd = fs.openSync(tmp, "wx", 0o644)
  try {
    write(fd)
    fs.fchmodSync(fd, 0o444)
    fs.fsyncSync(fd)
  } finally {
    fs.closeSync(fd)
  }
}

const removeQuietly = (file: string) => {
  try {
    fs.unlinkSync(file)
  } catch {
    // The temp file is ours and may already be gone; GC reclaims any that a crash leaves.
  }
}

/**
 * Stores bytes whose digest the caller has already verified.
 *
 * @internal
 */
export const putBytes = (
  large: LargeFiles,
  digest: Digest.Digest,
  bytes: Uint8Array,
  until: number,
  leaseTimeMs: number
): Effect.Effect<void, StoreError> => {
  const final = pathOf(large, digest.hash)
  return Effect.try({
    try: () => {
      if (statSize(large, digest.hash) === digest.sizeBytes) {
        try {
          return setLease(final, until, leaseTimeMs)
        } catch (e) {
          // GC removed it between the stat and the lease: write it again below.
          if (errnoOf(e) !== "ENOENT") throw e
        }
      }
      mkdirp(path.dirname(final))
      // Named `<hash>.<pid>.<random>.tmp` meanwhile: what GC takes for a temp file.
      AtomicFile.write(final, bytes, {
        mode: 0o444,
        fsync: true,
        beforeRename: (tmp) => fs.utimesSync(tmp, new Date(), new Date(until))
      })
      large.added.bytes += bytes.length
    },
    catch: ioError(final, "cannot store a large file")
  })
}

const CHUNK = 1024 * 1024

/** A new temp file's name in the large-file folder, this process's. */
const tempIn = (large: LargeFiles): string =>
  path.join(large.root, `incoming.${process.pid}.${randomBytes(6).toString("hex")}.tmp`)

/**
 * Copies what is left to read of `src` into the new file `tmp` (synced, read-only) while hashing it, in one pass;
 * stops once past `limit` bytes, so that a file that grew is not read whole.
 */
const copyHashing = (src: number, tmp: string, limit = Infinity): { hash: string; size: number } => {
  const hasher = createHash("sha256")
  const buf = Buffer.allocUnsafe(CHUNK)
  let size = 0
  writeTemp(tmp, (fd) => {
    for (;;) {
      const n = fs.readSync(src, buf, 0, Math.min(CHUNK, limit + 1 - size), null)
      if (n === 0) break
      hasher.update(buf.subarray(0, n))
      writeAll(fd, buf, n)
      size += n
      if (size > limit) break
    }
  })
  return { hash: hasher.digest("hex"), size }
}

/**
 * Copies a file into the store while hashing it, in one pass. A source that changes while it is read (its size or
 * mtime differ afterwards) is read again, a bounded number of times.
 *
 * @internal
 */
export const putFromPath = (
  large: LargeFiles,
  source: string,
  until: number,
  leaseTimeMs: number
): Effect.Effect<Digest.Digest, StoreError> =>
  Effect.try({
    try: () => {
      mkdirp(large.root)
      const stored = alreadyStored(large, source, until, leaseTimeMs)
      if (stored !== undefined) return stored
      for (let attempt = 0; attempt < 5; attempt++) {
        const before = fs.statSync(source)
        const tmp = tempIn(large)
        try {
          const src = fs.openSync(source, "r")
          let copied: { hash: string; size: number }
          try {
            copied = copyHashing(src, tmp)
          } finally {
            fs.closeSync(src)
          }
          const size = copied.size
          const after = fs.statSync(source)
          if (after.size !== before.size || after.mtimeMs !== before.mtimeMs || after.size !== size) {
            removeQuietly(tmp)
            continue
          }
          const digest = { hash: copied.hash, sizeBytes: size }
          const final = pathOf(large, digest.hash)
          let kept = false
          if (statSize(large, digest.hash) === size) {
            try {
              setLease(final, until, leaseTimeMs)
              kept = true
              removeQuietly(tmp)
            } catch (e) {
              if (errnoOf(e) !== "ENOENT") throw e
            }
          }
          if (!kept) {
            mkdirp(path.dirname(final))
            install(tmp, final, until)
            large.added.bytes += size
          }
          return digest
        } catch (e) {
          removeQuietly(tmp)
          throw e
        }
      }
      throw new StoreError({ reason: "Io", detail: "the file kept changing while it was being stored", path: source })
    },
    catch: (e) =>
      e instanceof StoreError
        ? e
        : errnoOf(e) === "ENOSPC" || errnoOf(e) === "EDQUOT"
        // The store's disk is full, not the source's: name the store (a sandbox's file is gone by the time one reads it).
        ? ioError(large.root, "cannot store a large file")(e)
        : ioError(source, "cannot store")(e)
  })

/**
 * Stores the file `open` gives (a descriptor the caller opened and vouched is a regular file of the digest's size) if
 * its bytes hash to `digest`; otherwise stores nothing and says false. `open` giving undefined is false too.
 *
 * @internal
 */
export const putVerified = (
  large: LargeFiles,
  digest: Digest.Digest,
  open: () => number | undefined,
  until: number,
  leaseTimeMs: number
): Effect.Effect<boolean, StoreError> =>
  Effect.try({
    try: () => {
      if (statSize(large, digest.hash) === digest.sizeBytes) {
        setLease(pathOf(large, digest.hash), until, leaseTimeMs)
        return true
      }
      const src = open()
      if (src === undefined) return false
      mkdirp(large.root)
      const tmp = tempIn(large)
      try {
        const copied = copyHashing(src, tmp, digest.sizeBytes)
        if (copied.size !== digest.sizeBytes || copied.hash !== digest.hash) {
          removeQuietly(tmp)
          return false
        }
        const final = pathOf(large, digest.hash)
        mkdirp(path.dirname(final))
        install(tmp, final, until)
        large.added.bytes += copied.size
        return true
      } catch (e) {
        removeQuietly(tmp)
        throw e
      } finally {
        fs.closeSync(src)
      }
    },
    catch: ioError(large.root, "cannot store a large file")
  })

/**
 * Hashes what is left to read of `fd`, in chunks, or at most `limit` bytes of it (what its `fstat` said: a file that
 * grows while it is read is not followed for ever). @internal
 */
export const hashFd = (fd: number, limit = Infinity): { hash: string; size: number } => {
  const hasher = createHash("sha256")
  let size = 0
  const buf = Buffer.allocUnsafe(CHUNK)
  while (size < limit) {
    const n = fs.readSync(fd, buf, 0, Math.min(CHUNK, limit - size), null)
    if (n === 0) break
    hasher.update(buf.subarray(0, n))
    size += n
  }
  return { hash: hasher.digest("hex"), size }
}

/** Reads a stored file, checking its length and hash. @internal */
export const read = (large: LargeFiles, digest: Digest.Digest): Effect.Effect<Buffer | undefined, StoreError> => {
  const file = pathOf(large, digest.hash)
  return Effect.try({
    try: () => {
      try {
        return fs.readFileSync(file)
      } catch (e) {
        if (errnoOf(e) === "ENOENT") return undefined
        throw e
      }
    },
    catch: ioError(file, "cannot read a large file")
  })
}

/**
 * The digest of `source` if the store holds it already (then leased): a second copy of a workspace, or a file that
 * changed back, costs a read, where storing it would cost a write and an fsync. Undefined otherwise, or if the file
 * changed while it was read.
 */
const alreadyStored = (
  large: LargeFiles,
  source: string,
  until: number,
  leaseTimeMs: number
): Digest.Digest | undefined => {
  const before = fs.statSync(source)
  const { hash, size } = hashFile(source)
  const after = fs.statSync(source)
  if (after.size !== before.size || after.mtimeMs !== before.mtimeMs || after.size !== size) return undefined
  if (statSize(large, hash) !== size) return undefined
  try {
    setLease(pathOf(large, hash), until, leaseTimeMs)
  } catch (e) {
    if (errnoOf(e) === "ENOENT") return undefined
    throw e
  }
  return { hash, sizeBytes: size }
}

/** Hashes a stored file without loading it whole. @internal */
export const hashFile = (file: string): { hash: string; size: number } => {
  const fd = fs.openSync(file, "r")
  try {
    return hashFd(fd)
  } finally {
    fs.closeSync(fd)
  }
}

/** @internal */
export const remove = (large: LargeFiles, hash: string): Effect.Effect<boolean, StoreError> =>
  Effect.try({
    try: () => {
      if (!fs.existsSync(pathOf(large, hash))) return false
      Generation.bump(large.storeRoot)
      try {
        fs.unlinkSync(pathOf(large, hash))
        return true
      } catch (e) {
        if (errnoOf(e) === "ENOENT") return false
        throw e
      }
    },
    catch: ioError(pathOf(large, hash), "cannot remove")
  })

/**
 * Removes the stored file of `hash` if it is still the inode `dev`/`ino` (a blob found changed must go, not a good
 * copy stored in its place since). Says whether it did.
 *
 * @internal
 */
export const removeInode = (large: LargeFiles, hash: string, dev: bigint, ino: bigint): boolean => {
  const file = pathOf(large, hash)
  let st: fs.BigIntStats
  try {
    st = fs.lstatSync(file, { bigint: true })
  } catch (e) {
    if (errnoOf(e) === "ENOENT") return false
    throw e
  }
  if (st.dev !== dev || st.ino !== ino) return false
  Generation.bump(large.storeRoot)
  try {
    fs.unlinkSync(file)
    return true
  } catch (e) {
    if (errnoOf(e) === "ENOENT") return false
    throw e
  }
}
