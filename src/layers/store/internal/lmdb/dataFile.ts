/**
 * Checks an LMDB data file before lmdb-js maps it. LMDB trusts its file: a `data.mdb` cut short (a disk that filled
 * up during a copy, a partial restore, a crash on a file system that does not order writes) is mapped anyway, and
 * the first read of a page past its end kills the whole process with SIGBUS or SIGSEGV, past any error handling.
 * So kiln reads the meta pages itself, as LMDB will, and refuses a file that is shorter than the pages they commit,
 * with a one-line error that names the file and says how to recover.
 *
 * The layout, as this lmdb-js fork writes it (checked against files written by the store): a 24-byte page header
 * (page number 8, txnid 8, pad 2, flags 2, lower/upper 4), then on pages 0 and 1 the `MDB_meta`: magic 0xBEEFC0DE
 * at 24, version at 28, the free tree's `md_pad` holding the page size at 48, its `md_flags` at 52, the last used
 * page at 144, the txnid at 152 and the boot id of the machine that wrote it at 160. With overlapping sync a third
 * copy (its fields from the map size on, no magic) sits half a page in: the last meta known to be flushed, which LMDB
 * rolls back to when the machine rebooted since the last write.
 *
 * @internal
 */
import * as Effect from "effect/Effect"
import * as Schedule from "effect/Schedule"
import * as fs from "node:fs"
import * as path from "node:path"
import * as Size from "../../../../domain/Size.js"
import { StoreError } from "../../../../domain/StoreErrors.js"
import { bootIdText } from "../../../../os/BootId.js"
import { describeErrno, errnoOf } from "../../../../os/Errno.js"
import { ioError } from "../../../../os/IoError.js"
import * as Generation from "../../Generation.js"
import type { SetAside } from "../../StoreMaintenance.js"
import * as Unsynced from "./unsynced.js"

const PAGE_HEADER = 24
const MAGIC = 0xbeefc0de
const DATA_VERSION = 2
const P_META = 0x08
const MDB_OVERLAPPINGSYNC = 0x1000
/** Header plus `MDB_meta` up to and including `boot_id`. */
const META_BYTES = PAGE_HEADER + 144

interface Meta {
  readonly lastPage: bigint
  readonly txnid: bigint
  readonly bootId: bigint
  readonly flags: number
}

const metaAt = (b: Buffer): Meta => ({
  flags: b.readUInt16LE(52),
  lastPage: b.readBigUInt64LE(144),
  txnid: b.readBigUInt64LE(152),
  bootId: b.readBigInt64LE(160)
})

let bootId: { readonly id: bigint | undefined } | undefined

/** This boot's id as LMDB reads it: `strtoll` of `/proc/sys/kernel/random/boot_id` in base 16 (up to the first `-`). */
const currentBootId = (): bigint | undefined => (bootId ??= { id: readBootId() }).id

const readBootId = (): bigint | undefined => {
  const text = bootIdText()
  if (text === undefined) return undefined // No boot id (not Linux): LMDB's is 0 then.
  const hex = /^[0-9a-f]+/i.exec(text)
  return hex === null ? undefined : BigInt.asIntN(64, BigInt(`0x${hex[0]}`))
}

const readAt = (fd: number, length: number, position: number): Buffer => {
  const b = Buffer.alloc(length)
  let n = 0
  while (n < length) {
    const r = fs.readSync(fd, b, n, length - n, position + n)
    if (r === 0) break
    n += r
  }
  return b.subarray(0, n)
}

/** The `length` bytes at `position`, from `start` (the file's first bytes) when it holds them. */
const bytesAt = (fd: number, start: Buffer, length: number, position: number): Buffer =>
  position + length <= start.length ? start.subarray(position, position + length) : readAt(fd, length, position)

/** The bytes read first: both meta pages at the usual page size, in one read. */
const START_BYTES = 2 * 4096

/**
 * What is wrong with the data file, or undefined when LMDB can map it safely; `start` is its first bytes.
 */
const inspect = (fd: number, start: Buffer): string | undefined => {
  const head = start.subarray(0, META_BYTES)
  if (head.length < META_BYTES) return `truncated (${head.length} bytes, shorter than an LMDB meta page)`
  if ((head.readUInt16LE(18) & P_META) === 0 || head.readUInt32LE(PAGE_HEADER) !== MAGIC) {
    return "not an LMDB data file (its first page is not a meta page)"
  }
  const version = head.readUInt32LE(PAGE_HEADER + 4)
  if ((version & 0xffff) !== DATA_VERSION) return `LMDB data version ${version & 0xffff}, expected ${DATA_VERSION}`
  const pageSize = head.readUInt32LE(48)
  if (pageSize < 512 || pageSize > 65536 || (pageSize & (pageSize - 1)) !== 0) {
    return `corrupt (its meta page records a page size of ${pageSize})`
  }
  const second = bytesAt(fd, start, META_BYTES, pageSize)
  if (second.length < META_BYTES) {
    return `truncated (${fs.fstatSync(fd).size} bytes, shorter than its two meta pages)`
  }
  if ((second.readUInt16LE(18) & P_META) === 0 || second.readUInt32LE(PAGE_HEADER) !== MAGIC) {
    return "corrupt (its second meta page is not a meta page)"
  }
  const [a, b] = [metaAt(head), metaAt(second)]
  let meta = a.txnid >= b.txnid ? a : b
  // After a reboot, the first opener rolls an overlapping-sync environment back to the last flushed meta (see
  // mdb_pick_meta): a later meta may name pages that never reached the disk, and are not needed.
  const flushed = metaAt(bytesAt(fd, start, META_BYTES, pageSize / 2))
  const sameBoot = meta.bootId !== 0n && meta.bootId === (currentBootId() ?? 0n)
  if (
    (!sameBoot || process.env.LMDB_RESTORE === "safe") && (meta.flags & MDB_OVERLAPPINGSYNC) !== 0 &&
    flushed.txnid !== 0n && flushed.txnid < meta.txnid
  ) {
    meta = flushed
  }
  // Read the size after the metas: a writer in another process writes a commit's pages before its meta, so a meta
  // read first never names pages beyond the size read after it.
  const size = BigInt(fs.fstatSync(fd).size)
  const needed = (meta.lastPage + 1n) * BigInt(pageSize)
  if (size < needed) {
    return `truncated (${size} bytes, but its last transaction uses ${needed})`
  }
  return undefined
}

/** What {@link check} found wrong, by the error it returned. */
const refused = new WeakMap<object, string>()

/**
 * Free bytes on the file system holding `dir` (for root, counting the blocks reserved for root, which it may use).
 *
 * @internal
 */
export const freeBytes = (dir: string): number | undefined => {
  try {
    const st = fs.statfsSync(dir)
    return (process.getuid?.() === 0 ? st.bfree : st.bavail) * st.bsize
  } catch {
    return undefined
  }
}

/**
 * LMDB maps `lock.mdb` and writes a new environment's first pages through the map: on a full disk (tmpfs above all)
 * that is SIGBUS, not an error. So an environment is created only with room for its lock file (64 bytes a reader
 * slot), its two meta pages and some slack.
 */
const roomToCreate = (dir: string, maxReaders: number, roomAt: string): StoreError | undefined => {
  const free = freeBytes(roomAt)
  const needed = maxReaders * 64 + 256 * 1024
  if (free === undefined || free >= needed) return undefined
  return new StoreError({
    reason: "NoSpace",
    detail: `cannot create an LMDB environment: no space left on device (${Size.format(free)} free)`,
    path: dir
  })
}

/**
 * Checks that LMDB can open the environment in `dir` safely: a data file it would map must hold every page its
 * meta pages commit (a truncated one is a `Corrupt` StoreError naming it, with what to do), and a new environment
 * needs room on the disk (a `NoSpace` one), measured at `roomAt`: the directory itself, or, for one about to be made
 * and renamed into place (see `envs.ts`' `createInPlace`), its parent.
 *
 * @internal
 */
export const check = (dir: string, maxReaders: number, roomAt = dir): StoreError | undefined => {
  const file = path.join(dir, "data.mdb")
  let fd: number
  try {
    fd = fs.openSync(file, "r")
  } catch (e) {
    if (errnoOf(e) === "ENOENT") return roomToCreate(dir, maxReaders, roomAt)
    return new StoreError({ reason: "Io", detail: `cannot read: ${describeErrno(e)}`, path: file })
  }
  try {
    const start = readAt(fd, START_BYTES, 0)
    if (start.length === 0 || !fs.existsSync(path.join(dir, "lock.mdb"))) {
      const full = roomToCreate(dir, maxReaders, roomAt)
      if (full !== undefined || start.length === 0) return full
    }
    const problem = Unsynced.problemOf(dir) ?? inspect(fd, start)
    if (problem === undefined) return undefined
    const error = new StoreError({
      reason: "Corrupt",
      detail: `${problem}; \`kiln store check --repair\` sets the shard aside, and re-running makes again what it ` +
        `held (the store is a cache)`,
      path: file
    })
    refused.set(error, problem)
    return error
  } catch (e) {
    return new StoreError({ reason: "Io", detail: `cannot read: ${describeErrno(e)}`, path: file })
  } finally {
    fs.closeSync(fd)
  }
}

/**
 * Retries an open that {@link check} refused, a few times and briefly, before reporting it: a data file another
 * process is creating at this moment is shorter than its meta pages for an instant (LMDB writes both in one
 * `pwrite`, which the kernel extends the file with page by page). A truncated file stays truncated.
 *
 * @internal
 */
export const settling = <A, E, R>(open: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
  Effect.retry(open, {
    while: (e) => typeof e === "object" && e !== null && refused.has(e),
    times: 3,
    schedule: Schedule.spaced("30 millis")
  })

/**
 * Moves every shard of the store under `root` that {@link check} refuses out of the store, into `<root>/corrupt/`,
 * and says where each went. The next open creates the shard afresh; a process that still has the old one open keeps
 * using its own files. For `kiln store check --repair`, which a person runs: kiln never discards a shard on its own.
 *
 * @internal
 */
export const setAsideUnsafe = (
  root: string
): Effect.Effect<Array<SetAside>, StoreError> =>
  Effect.try({
    try: () => {
      const moved: Array<SetAside> = []
      for (const kind of Unsynced.KINDS) {
        let shards: Array<fs.Dirent>
        try {
          shards = fs.readdirSync(path.join(root, kind), { withFileTypes: true })
        } catch (e) {
          if (errnoOf(e) === "ENOENT") continue
          throw e
        }
        for (const shard of shards) {
          if (!shard.isDirectory()) continue
          const dir = path.join(root, kind, shard.name)
          const error = check(dir, 0)
          const problem = error === undefined ? undefined : refused.get(error)
          if (problem === undefined) continue
          const into = path.join(root, "corrupt")
          Generation.bump(root)
          fs.mkdirSync(into, { recursive: true })
          const movedTo = path.join(into, `${kind}-${shard.name}-${new Date().toISOString().replace(/[:.]/g, "")}`)
          fs.renameSync(dir, movedTo)
          moved.push({ file: path.join(dir, "data.mdb"), problem, movedTo })
        }
      }
      // Every shard a crash may have torn is aside now: what marked them so has done its work.
      Unsynced.clearEarlierBoots(root)
      return moved
    },
    catch: ioError(root, "cannot set a corrupt shard aside")
  })
