/**
 * The store's cap and what it holds, known without scanning it. A store is shared by many kiln processes at once and
 * measuring it means reading every entry's lease, so it is measured only by a collection (`gc`), which writes the
 * total it found as the first line of `usage`; every process that adds entries appends how many bytes it added. The
 * estimate (the last measure plus what was added since) is what decides whether a collection is due: it only
 * over-counts (an entry two processes both add, one that a collection will find expired), and a collection
 * measures again. Appends that land while a collection rewrites the file are lost: the next collection counts them.
 *
 * The cap is, in order: the one asked for (`--store-max-size`), the store's own (`cap.json`, set by `kiln store
 * cap`), else the smaller of 20 GiB and a tenth of the disk the store is on.
 *
 * Plain code, no Effect: its callers wrap it.
 *
 * @internal
 */
import * as fs from "node:fs"
import * as path from "node:path"
import * as AtomicFile from "../../../os/AtomicFile.js"
import { errnoOf } from "../../../os/Errno.js"
import { readOwnFile } from "../../../os/TextFile.js"
import type { Cap, Usage } from "../StoreMaintenance.js"

const GiB = 1024 ** 3
const CAP_FILE = "cap.json"
const USAGE_FILE = "usage"

/** The cap of a store that has none of its own, at most: the smaller of this and {@link DISK_SHARE} of its disk. */
export const DEFAULT_CAP_BYTES = 20 * GiB
/** The share of its disk a store without a cap of its own may take. */
export const DISK_SHARE = 0.1
/**
 * Past this many bytes of appended lines, a collection is due whatever the estimate: it measures the store and
 * starts the file again, so that reading it stays cheap however many runs there were.
 */
export const JOURNAL_MAX_BYTES = 64 * 1024

/** Read at most: the usage file starts again past {@link JOURNAL_MAX_BYTES}, the cap file is one line. */
const LARGEST_USAGE = 16 * 1024 * 1024
const LARGEST_CAP_FILE = 64 * 1024

/** Why a cap file cannot be used: its path and what is wrong. @internal */
export class CapFileError extends Error {
  constructor(readonly file: string, readonly problem: string) {
    super(`${file}: ${problem}`)
  }
}

/** The store's own cap (`cap.json`), or undefined when it has none. Throws {@link CapFileError} or an I/O error. */
const ownCap = (root: string): number | undefined => {
  const file = path.join(root, CAP_FILE)
  const text = readOwnFile(file, LARGEST_CAP_FILE)
  if (text === undefined) return undefined
  let parsed: unknown
  try {
    parsed = JSON.parse(text)
  } catch {
    throw new CapFileError(file, "not JSON (set the cap again with `kiln store cap SIZE`)")
  }
  const bytes = (parsed as { maxSizeBytes?: unknown } | null)?.maxSizeBytes
  if (typeof bytes !== "number" || !Number.isSafeInteger(bytes) || bytes <= 0) {
    throw new CapFileError(file, "maxSizeBytes must be a positive integer (set it with `kiln store cap SIZE`)")
  }
  return bytes
}

/** The cap of a store without one of its own: the smaller of 20 GiB and a tenth of its disk. */
export const defaultCap = (root: string): number => {
  let disk: number | undefined
  try {
    const st = fs.statfsSync(root)
    disk = st.blocks * st.bsize
  } catch {
    // A store not yet made, or a file system that does not say: the fixed default.
  }
  return disk === undefined || disk <= 0
    ? DEFAULT_CAP_BYTES
    : Math.min(DEFAULT_CAP_BYTES, Math.floor(disk * DISK_SHARE))
}

/** The cap in force: `explicit` (an option), else the store's own, else {@link defaultCap}. @internal */
export const capOf = (root: string, explicit: number | undefined): Cap => {
  if (explicit !== undefined) return { bytes: explicit, source: "option" }
  const own = ownCap(root)
  return own !== undefined ? { bytes: own, source: "store" } : { bytes: defaultCap(root), source: "default" }
}

/** Sets the store's own cap, or removes it (`undefined`): the default applies again. @internal */
export const setCap = (root: string, bytes: number | undefined): void => {
  const file = path.join(root, CAP_FILE)
  if (bytes === undefined) {
    fs.rmSync(file, { force: true })
    return
  }
  AtomicFile.replace(file, (tmp) => fs.writeFileSync(tmp, JSON.stringify({ maxSizeBytes: bytes }) + "\n"))
}

/** Reads `usage`; lines it does not understand (a torn append) count for nothing. @internal */
export const usageOf = (root: string): Usage => {
  const text = readOwnFile(path.join(root, USAGE_FILE), LARGEST_USAGE) ?? ""
  let measuredBytes: number | undefined
  let measuredAtMs: number | undefined
  let addedBytes = 0
  for (const line of text.split("\n")) {
    const [word, a, b] = line.split(" ")
    const n = Number(a)
    if (!Number.isSafeInteger(n) || n < 0) continue
    if (word === "added") addedBytes += n
    else if (word === "measured" && measuredBytes === undefined) {
      measuredBytes = n
      const at = Number(b)
      measuredAtMs = Number.isSafeInteger(at) ? at : undefined
    }
  }
  return {
    measuredBytes,
    measuredAtMs,
    addedBytes,
    estimateBytes: (measuredBytes ?? 0) + addedBytes,
    journalBytes: Buffer.byteLength(text)
  }
}

/**
 * Appends what this process added. One `write` of a short line on a file opened to append: concurrent appenders
 * never interleave within a line.
 *
 * @internal
 */
export const noteAdded = (root: string, bytes: number): void => {
  if (bytes <= 0) return
  fs.appendFileSync(path.join(root, USAGE_FILE), `added ${bytes}\n`)
}

/**
 * Starts the record of a store just made, which holds nothing; unless a process that opened it meanwhile has already
 * started it (its additions stay counted).
 *
 * @internal
 */
export const startRecord = (root: string): void => {
  try {
    fs.writeFileSync(path.join(root, USAGE_FILE), `measured 0 ${Date.now()}\n`, { flag: "wx" })
  } catch (e) {
    if (errnoOf(e) !== "EEXIST") throw e
  }
}

/** Starts `usage` again from a measure of the whole store. @internal */
export const noteMeasured = (root: string, bytes: number, atMs: number): void => {
  AtomicFile.replace(path.join(root, USAGE_FILE), (tmp) => fs.writeFileSync(tmp, `measured ${bytes} ${atMs}\n`))
}

/**
 * Whether a collection is due: the estimate is over the cap, or the file has grown long, or the store was never
 * measured (a store made before this file, of any size) and a process added to it.
 *
 * @internal
 */
export const collectionDue = (usage: Usage, cap: Cap): boolean =>
  usage.estimateBytes > cap.bytes || usage.journalBytes > JOURNAL_MAX_BYTES ||
  (usage.measuredBytes === undefined && usage.addedBytes > 0)

/**
 * What a collection shrinks an over-cap store to: below the cap, so that the runs after it do not each start one.
 *
 * @internal
 */
export const collectionTarget = (cap: Cap): number => Math.floor(cap.bytes * 0.9)
