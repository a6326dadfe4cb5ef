/**
 * The regular files beneath a directory, found and hashed on a thread per CPU by kiln's addon (`hashFiles.c`): a
 * snapshot's first walk of a large directory taken whole (a fresh `node_modules`) otherwise opens, reads and hashes
 * its tens of thousands of files one after another on Node's thread. The walk still lists every directory itself and
 * takes a file's answer from here only where its listing found that file (see `store/internal/snapshot.ts`).
 *
 * Every path is opened beneath the directory without following any symlink (`openat2`, `RESOLVE_BENEATH |
 * RESOLVE_NO_SYMLINKS`), and a file's stat and hash are of the one descriptor that was read. Used only once it proves
 * itself (a file it hashed must be what Node reads and `lstat`s there); where the addon, `openat2` or Node's SHA-256
 * is missing, there is no answer, and the walk reads each file as before.
 *
 * @internal
 */
import { createHash } from "node:crypto"
import * as fs from "node:fs"
import * as NativeAddon from "./Addon.js"

/** What a walk records of a file's stat. */
export type BigStat = Pick<fs.BigIntStats, "dev" | "ino" | "mode" | "size" | "mtimeNs" | "ctimeNs">

/** A file as hashed: its stat when opened, the SHA-256 of the bytes read (hex), and how many there were. */
export interface Hashed {
  readonly st: BigStat
  readonly hash: string
  readonly size: number
}

type ScanFiles = (root: string, max: number) => string | null
type HashMany = (root: string, names: string, stats: BigInt64Array, hashes: Uint8Array, errors: Int32Array) => boolean

const STAT_FIELDS = 7

interface Native {
  readonly scanFiles: ScanFiles
  readonly hashFiles: HashMany
}

let native: Native | undefined | null = null

const hashedAt = (stats: BigInt64Array, hashes: Uint8Array, i: number): Hashed => {
  const at = i * STAT_FIELDS
  return {
    st: {
      dev: stats[at]!,
      ino: stats[at + 1]!,
      mode: stats[at + 2]!,
      size: stats[at + 3]!,
      mtimeNs: stats[at + 4]!,
      ctimeNs: stats[at + 5]!
    },
    hash: Buffer.from(hashes.buffer, hashes.byteOffset + i * 32, 32).toString("hex"),
    size: Number(stats[at + 6]!)
  }
}

/** A file small enough to prove the addon with: read once more by Node, whole. */
const PROOF_MAX_BYTES = 64 * 1024

/**
 * Whether the addon's answer for `root/name` is what Node's own read, hash and `lstat` give: its bytes read up to the
 * size the addon read (a file that grows meanwhile is not followed), and the same stat now.
 */
const provesItself = (root: string, name: string, got: Hashed): boolean => {
  let fd: number | undefined
  try {
    const abs = `${root}/${name}`
    const st = fs.lstatSync(abs, { bigint: true })
    fd = fs.openSync(abs, fs.constants.O_RDONLY | fs.constants.O_NOFOLLOW | fs.constants.O_NONBLOCK)
    const bytes = Buffer.alloc(got.size)
    const read = got.size === 0 ? 0 : fs.readSync(fd, bytes, 0, got.size, 0)
    return read === got.size && got.hash === createHash("sha256").update(bytes).digest("hex") &&
      got.size === bytes.length && got.st.dev === st.dev && got.st.ino === st.ino && got.st.mode === BigInt(st.mode) &&
      got.st.size === st.size && got.st.mtimeNs === st.mtimeNs && got.st.ctimeNs === st.ctimeNs
  } catch {
    return false
  } finally {
    if (fd !== undefined) fs.closeSync(fd)
  }
}

const loaded = (): Native | undefined => {
  if (native !== null) return native
  const e = NativeAddon.exports()
  native = typeof e?.scanFiles === "function" && typeof e.hashFiles === "function"
    ? { scanFiles: e.scanFiles as ScanFiles, hashFiles: e.hashFiles as HashMany }
    : undefined
  return native
}

let proven = false

/**
 * The regular files beneath `root` that `keep` keeps (by path relative to `root`), hashed, by that path: undefined
 * when there are fewer than `min` files or more than `max` files and directories, when `wanted` says no, when a
 * directory beneath cannot be read, or where the addon cannot answer. A file that could not be read is left out (the
 * walk reads it, and says why it cannot).
 */
export const hashTree = (
  root: string,
  o: {
    readonly min: number
    readonly max: number
    readonly keep: (rel: string) => boolean
    /** Asked once the files are listed, before any is read: whether hashing them is worth it. */
    readonly wanted: (rel: ReadonlyArray<string>) => boolean
  }
): Map<string, Hashed> | undefined => {
  const addon = loaded()
  if (addon === undefined) return undefined
  let joined: string | null
  try {
    joined = addon.scanFiles(root, o.max)
  } catch {
    return undefined
  }
  if (joined === null || joined === "") return undefined
  const names = joined.split("\0").filter(o.keep)
  if (names.length < o.min || !o.wanted(names)) return undefined
  const stats = new BigInt64Array(names.length * STAT_FIELDS)
  const hashes = new Uint8Array(names.length * 32)
  const errors = new Int32Array(names.length)
  try {
    if (!addon.hashFiles(root, names.join("\0"), stats, hashes, errors)) return undefined
  } catch {
    return undefined
  }
  const hashed = new Map<string, Hashed>()
  for (let i = 0; i < names.length; i++) {
    if (errors[i] === 0) hashed.set(names[i]!, hashedAt(stats, hashes, i))
  }
  if (!proven) {
    // Once a process, on a small file of the first tree: an addon that answers otherwise than Node is not used again.
    const probe = [...hashed].find(([, h]) => h.size > 0 && h.size <= PROOF_MAX_BYTES)
    if (probe === undefined) return undefined
    if (!provesItself(root, probe[0], probe[1])) {
      native = undefined
      return undefined
    }
    proven = true
  }
  return hashed
}
