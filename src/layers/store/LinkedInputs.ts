/**
 * Large inputs hard-linked from the store, watched while their process runs. A file of 512 KiB or more is put in a
 * sandbox as a hard link to the store's own read-only copy (see `materialize`): one inode, so a process that makes
 * it writable (`chmod u+w`) and writes in place changes the store's blob, and every later process that links it
 * reads the changed bytes under the clean digest. Where a process has no mount namespace nothing stops the write;
 * what this does is notice it, so that no result comes from changed bytes and no changed blob stays in the store.
 *
 * Before the process runs, each input that is the blob's inode is recorded with the blob's size, mode and mtime
 * (`watch`); after its process group is gone, the blob is looked at again (`check`). A write in place changes the
 * mtime, a chmod the mode: any change, and the bytes the process had are hashed. Bytes that no longer match their
 * digest are removed from the store (only that inode: a good copy stored since stays), and the caller fails the process
 * ({@link refusal}): what it read was not its input, whoever wrote it (itself, or another process of the run that links
 * the same blob), so its outputs are neither cached nor written back. Links made and removed by other sandboxes change
 * neither, so processes that share a blob do not make each other hash it; a lease renewed meanwhile does, and costs a
 * hash.
 *
 * Two processes of one engine may link the same blob at once. Each compares it with what it was when the first of
 * them linked it (a `Registry` per engine), so one that links a blob another running process has already changed
 * hashes it too, and is refused, even if it ends before the writer does. A process that deliberately writes and then
 * restores the mtime, or writes to the store by its absolute path, is not caught here: only a read-only mount stops
 * those (shared trees are mounted so; `kiln store check` finds what is left).
 */
import * as Effect from "effect/Effect"
import * as fs from "node:fs"
import * as path from "node:path"
import * as Digest from "../../domain/Digest.js"
import { errnoOf } from "../../os/Errno.js"
import * as Core from "./internal/core.js"
import * as LargeFiles from "./internal/largeFiles.js"
import type { Service } from "./Store.js"

/**
 * Files of this size and more are hard-linked from the store.
 */
export const THRESHOLD = LargeFiles.THRESHOLD

/** What is compared: a write in place changes the mtime (and perhaps the size), a chmod the mode. */
interface Seen {
  readonly dev: bigint
  readonly ino: bigint
  readonly size: bigint
  readonly mode: bigint
  readonly mtimeNs: bigint
}

const seen = (st: fs.BigIntStats): Seen => ({
  dev: st.dev,
  ino: st.ino,
  size: st.size,
  mode: st.mode,
  mtimeNs: st.mtimeNs
})

const sameAs = (a: Seen, b: Seen) =>
  a.dev === b.dev && a.ino === b.ino && a.size === b.size && a.mode === b.mode && a.mtimeNs === b.mtimeNs

/** As the store leaves a blob: read-only, of its digest's size. */
const asStored = (s: Seen, digest: Digest.Digest) =>
  (s.mode & 0o7777n) === 0o444n && s.size === BigInt(digest.sizeBytes)

/**
 * The blobs linked into this engine's running sandboxes: how each was when the first process now running linked it.
 */
export interface Registry {
  readonly byHash: Map<string, { users: number; readonly first: Seen }>
}

export const registry = (): Registry => ({ byHash: new Map() })

interface Linked {
  readonly rel: string
  readonly digest: Digest.Digest
  /** The inode the process had. */
  readonly dev: bigint
  readonly ino: bigint
  /** What the blob must still be: as it was when the first running process linked it. */
  readonly expected: Seen
  /** Not as the store leaves a blob already when it was linked: hashed after the process whatever it finds. */
  readonly suspect: boolean
}

/**
 * The inputs of one process that are links to the store's blobs.
 */
export interface Watched {
  readonly sandbox: string
  readonly linked: ReadonlyArray<Linked>
}

/**
 * An input whose blob changed while its process ran: `removed` when this removed the blob from the store (it may
 * have gone already), `verified` false when its bytes could not be read back to be hashed.
 */
export interface Changed {
  readonly rel: string
  readonly digest: Digest.Digest
  readonly removed: boolean
  readonly verified: boolean
}

/** The large-file folder of a store `Store.make` opened; none for another implementation (which links nothing). */
const largeOf = (store: Service): LargeFiles.LargeFiles | undefined => {
  try {
    return Core.coreOf(store).large
  } catch {
    return undefined
  }
}

const lstat = (p: string): fs.BigIntStats | undefined => {
  try {
    return fs.lstatSync(p, { bigint: true })
  } catch (e) {
    if (errnoOf(e) === "ENOENT" || errnoOf(e) === "ENOTDIR") return undefined
    throw e
  }
}

/**
 * Records which of `files` (paths relative to `sandbox`, with their digests) are links to the store's blobs, before
 * the process runs. Release it with {@link release} however the process ends. A file that cannot be looked at is
 * not recorded: the process has its own copy or nothing.
 */
export const watch = (
  registry: Registry,
  store: Service,
  sandbox: string,
  files: Iterable<{ readonly path: string; readonly digest: Digest.Digest }>
): Watched => {
  const linked: Array<Linked> = []
  const large = largeOf(store)
  if (large === undefined) return { sandbox, linked }
  for (const { digest, path: rel } of files) {
    if (digest.sizeBytes < THRESHOLD) continue
    let input: fs.BigIntStats | undefined
    let blob: fs.BigIntStats | undefined
    try {
      input = lstat(path.join(sandbox, rel))
      blob = input === undefined ? undefined : lstat(LargeFiles.pathOf(large, digest.hash))
    } catch {
      continue
    }
    // A copy (another file system, an executable, a writable input) is the process's own.
    if (input === undefined || blob === undefined || input.dev !== blob.dev || input.ino !== blob.ino) continue
    const now = seen(blob)
    const entry = registry.byHash.get(digest.hash)
    if (entry === undefined) registry.byHash.set(digest.hash, { users: 1, first: now })
    else entry.users++
    const expected = entry?.first ?? now
    linked.push({ rel, digest, dev: now.dev, ino: now.ino, expected, suspect: !asStored(now, digest) })
  }
  return { sandbox, linked }
}

/**
 * Ends what {@link watch} recorded in the registry.
 */
export const release = (registry: Registry, watched: Watched): void => {
  for (const l of watched.linked) {
    const entry = registry.byHash.get(l.digest.hash)
    if (entry !== undefined && --entry.users <= 0) registry.byHash.delete(l.digest.hash)
  }
}

/** Whether the file at `p`, if it is still the inode the process had, holds `digest`'s bytes; undefined if not it. */
const holds = (p: string, l: Linked): boolean | undefined => {
  const st = lstat(p)
  if (st === undefined || st.dev !== l.dev || st.ino !== l.ino) return undefined
  const { hash, size } = LargeFiles.hashFile(p)
  return hash === l.digest.hash && size === l.digest.sizeBytes
}

/**
 * After the process (its group gone): the linked inputs whose blob changed. Each blob that no longer holds its
 * digest's bytes is removed from the store; one whose bytes are intact but whose mode was changed gets its mode back.
 */
export const check = (store: Service, watched: Watched): Effect.Effect<Array<Changed>> =>
  Effect.sync(() => {
    const changed: Array<Changed> = []
    const large = largeOf(store)
    if (large === undefined) return changed
    for (const l of watched.linked) {
      const file = LargeFiles.pathOf(large, l.digest.hash)
      let blob: fs.BigIntStats | undefined
      try {
        blob = lstat(file)
      } catch {
        blob = undefined
      }
      if (!l.suspect && blob !== undefined && sameAs(seen(blob), l.expected)) continue
      // Changed, gone or replaced: the bytes the process had are hashed, from the store or from its sandbox.
      let intact: boolean | undefined
      try {
        intact = holds(file, l) ?? holds(path.join(watched.sandbox, l.rel), l)
      } catch {
        intact = undefined
      }
      if (intact === true) {
        try {
          if (blob !== undefined && blob.ino === l.ino && (blob.mode & 0o7777n) !== 0o444n) fs.chmodSync(file, 0o444)
        } catch {
          // Its bytes are right; `kiln store check` hashes it again.
        }
        continue
      }
      let removed = false
      try {
        removed = LargeFiles.removeInode(large, l.digest.hash, l.dev, l.ino)
      } catch {
        // Left for `kiln store check`, which finds it corrupt; this result is refused all the same.
      }
      changed.push({ rel: l.rel, digest: l.digest, removed, verified: intact === false })
    }
    return changed
  })

/**
 * One line for a changed input, naming the path and the digest.
 */
export const describe = (description: string, c: Changed): string =>
  `${description}: its input ${c.rel}, a hard link to the store's ${Digest.format(c.digest)}, ${
    c.verified ? "was changed while it ran" : "changed while it ran and could not be read back"
  }: ${c.removed ? "removed from the store; " : ""}its result is not cached`

/**
 * Why a process whose linked inputs changed while it ran has no result: one line naming the first input and its
 * digest, saying that a process wrote into it, and how a process that means to is declared.
 */
export const refusal = (changed: ReadonlyArray<Changed>): string => {
  const c = changed[0]!
  const more = changed.length > 1 ? ` (and ${changed.length - 1} more)` : ""
  return `its input ${c.rel}${more}, a hard link to the store's ${Digest.format(c.digest)}, ${
    c.verified ? "was written into while it ran" : "changed while it ran and could not be read back"
  }, by it or by another process of this run: ${
    c.removed ? "removed from the store, and " : ""
  }its result refused (a process that writes into an input declares it in \`writableInputs\`)`
}
