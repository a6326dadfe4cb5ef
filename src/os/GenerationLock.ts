/**
 * A lock between processes that outlives none of them: Node has no `flock`, and a lock file that its holder's
 * `kill -9` leaves behind must not stop everyone after it. The lock is a directory of numbered files (generations);
 * the highest-numbered one (the top) says who holds the lock: a holder's identity (pid and start time, see
 * `Proc.ts`), and whether it has released it. The lock is free when the top is released or its holder is dead.
 *
 * Taking it is creating the next number, with the holder's identity already in it (`link(2)` of a complete temp
 * file: atomic, and it fails when the name exists), so two that find the lock free race for one name and one wins.
 * Nobody ever removes the top: removing a stale lock by name, as plain lock files do, races with its next holder
 * (two that both found it stale, one removing it after the other took it). Only numbers below the top are removed, by
 * whoever takes the top; and a taker that finds a higher number than its own once it has made it (it read an old
 * listing, and took a number freed below the top) gives it back. A holder that dies keeps its top until the next
 * taker supersedes it, which is how that taker knows that the previous holder died holding it (`stale`).
 *
 * Portable POSIX (`link`, `rename`), but for the identity of a process, which comes from `/proc` (see `Proc.ts`);
 * without it a recycled pid keeps a dead holder's lock until that pid is gone. Plain code without Effect:
 * {@link tryTake} never waits, its caller does.
 *
 * @internal
 */
import * as fs from "node:fs"
import * as path from "node:path"
import * as AtomicFile from "./AtomicFile.js"
import { errnoOf } from "./Errno.js"
import { randomHex } from "./LazyCrypto.js"
import { mkdirp } from "./Mkdirp.js"
import * as Proc from "./Proc.js"

/** What a generation file holds. */
interface Record {
  readonly pid: number
  readonly startTime: string
  readonly state: "held" | "released"
  /** For a person reading the directory: what the lock is for. */
  readonly what?: string
}

/** The outcome of one attempt to take the lock. */
export type Attempt =
  | {
    readonly _tag: "Taken"
    /** The generation this holder made: what {@link release} is given. */
    readonly generation: number
    /** The holder found holding it, dead: it died before releasing it. */
    readonly stale?: Proc.Owner
  }
  | { readonly _tag: "Held"; readonly by: Proc.Owner }

const GENERATION = /^\d+$/
/** `tmp-<pid>-<start time>-<random>`: a generation being written, by its writer. */
const TEMP = /^tmp-(\d+)-(\d*)-[0-9a-f]+$/

const parse = (text: string): Record | undefined => {
  try {
    const r = JSON.parse(text) as Partial<Record>
    if (typeof r.pid !== "number" || typeof r.startTime !== "string") return undefined
    return r.state === "held" || r.state === "released" ? r as Record : undefined
  } catch {
    return undefined
  }
}

/**
 * Removes the file `file` if it is there. Every file here is a plain file: `unlink` does it in one call, where
 * `fs.rmSync` loads and runs its recursive remover (a module load on every run's first lock).
 */
const removeFile = (file: string): void => {
  try {
    fs.unlinkSync(file)
  } catch (e) {
    if (errnoOf(e) !== "ENOENT") throw e
  }
}

const tempName = (me: Proc.Owner) => `tmp-${me.pid}-${me.startTime}-${randomHex(4)}`

/** The generations in `dir`, highest last; temp files of dead writers are removed on the way. */
const generations = (dir: string): Array<number> => {
  const found: Array<number> = []
  for (const name of fs.readdirSync(dir)) {
    if (GENERATION.test(name)) found.push(Number(name))
    else {
      const m = TEMP.exec(name)
      if (m !== null && !Proc.ownerAlive({ pid: Number(m[1]), startTime: m[2]! })) {
        removeFile(path.join(dir, name))
      }
    }
  }
  return found.sort((a, b) => a - b)
}

/** The record of generation `n`; "gone" when a taker superseded and removed it since the listing. */
const read = (dir: string, n: number): Record | "gone" | undefined => {
  try {
    return parse(fs.readFileSync(path.join(dir, String(n)), "utf8"))
  } catch (e) {
    if (errnoOf(e) === "ENOENT") return "gone"
    throw e
  }
}

/** Makes generation `n` hold `record`, complete, unless it exists: false then. */
const create = (dir: string, n: number, record: Record, me: Proc.Owner): boolean => {
  const tmp = path.join(dir, tempName(me))
  fs.writeFileSync(tmp, JSON.stringify(record) + "\n", { flag: "wx", mode: 0o600 })
  try {
    fs.linkSync(tmp, path.join(dir, String(n)))
    return true
  } catch (e) {
    if (errnoOf(e) === "EEXIST") return false
    throw e
  } finally {
    removeFile(tmp)
  }
}

/**
 * One attempt to take the lock in `dir` (made 0700 if missing) for `me`: taken, or held by someone alive (`me`
 * itself, for another holder in this process). Throws what the file system says when it cannot be read or written.
 */
export const tryTake = (
  dir: string,
  me: Proc.Owner,
  what?: string,
  /** Called after the top was read, before the next number is made: tests race another taker there. */
  afterRead?: () => void
): Attempt => {
  mkdirp(dir, 0o700)
  for (;;) {
    const all = generations(dir)
    const top = all.length === 0 ? -1 : all[all.length - 1]!
    let stale: Proc.Owner | undefined
    if (top >= 0) {
      const record = read(dir, top)
      if (record === "gone") continue
      if (record?.state === "held") {
        const holder = { pid: record.pid, startTime: record.startTime }
        if (Proc.ownerAlive(holder)) return { _tag: "Held", by: holder }
        stale = holder
      }
    }
    afterRead?.()
    const mine = top + 1
    const record: Record = {
      pid: me.pid,
      startTime: me.startTime,
      state: "held",
      ...(what !== undefined ? { what } : {})
    }
    if (!create(dir, mine, record, me)) continue
    const now = generations(dir)
    if (now[now.length - 1]! > mine) {
      // Taken from an old listing: a newer generation exists, so this one was never the top. Given back.
      removeFile(path.join(dir, String(mine)))
      continue
    }
    for (const n of now) if (n < mine) removeFile(path.join(dir, String(n)))
    return { _tag: "Taken", generation: mine, ...(stale !== undefined ? { stale } : {}) }
  }
}

/**
 * Releases generation `generation` of the lock in `dir`, taken by `me`: its file is replaced by a released record
 * (renamed over it, so the top never goes missing). Nothing happens if it is not `me`'s any more.
 */
export const release = (dir: string, generation: number, me: Proc.Owner): void => {
  const file = path.join(dir, String(generation))
  const record = read(dir, generation)
  if (record === "gone" || record === undefined || record.pid !== me.pid || record.startTime !== me.startTime) return
  const text = JSON.stringify({ ...record, state: "released" }) + "\n"
  AtomicFile.replace(
    file,
    (tmp) => fs.writeFileSync(tmp, text, { flag: "wx", mode: 0o600 }),
    path.join(dir, tempName(me))
  )
}
