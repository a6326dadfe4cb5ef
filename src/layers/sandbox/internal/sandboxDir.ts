/**
 * Sandbox directories on disk and their owners. A sandbox is `kiln-sandbox-<pid>-<start time>-<random>`: its name
 * says which engine made it, by pid *and* process start time (from /proc), so that after the engine dies, even as a
 * recycled pid, its sandboxer or any later engine can tell the sandbox is orphaned and sweep it. The name is the
 * record, made by the same `mkdir` as the directory: no sandbox is ever ownerless, and making and removing one costs
 * no file beside it (an owner file was four more system calls per process). A kept sandbox gets a sibling
 * `<sandbox>.owner` file saying so, which sweeps read first; so did every sandbox of earlier versions.
 *
 * @internal
 */
import { randomBytes } from "node:crypto"
import * as fs from "node:fs"
import * as path from "node:path"
import { type Kind, scan } from "../../../os/DirScan.js"
import { errnoOf } from "../../../os/Errno.js"
import { mountUnder, refuseMounted } from "../../../os/mounts/Mounts.js"
import * as PrivateDir from "../../../os/PrivateDir.js"
import * as Proc from "../../../os/Proc.js"
import { removeTree } from "../../../os/RemoveTree.js"
import { REUSE_MAX_ENTRIES as STORE_REUSE_MAX_ENTRIES } from "../../store/Store.js"
import type { Owner } from "../Sandboxes.js"

/** @internal */
export const PREFIX = "kiln-sandbox-"
const OWNER_SUFFIX = ".owner"
/** The files a sandbox's process writes its stdout and stderr to, beside the sandbox like the owner file. @internal */
export const STDOUT_SUFFIX = ".stdout"
/** @internal */
export const STDERR_SUFFIX = ".stderr"
const SUFFIXES = [OWNER_SUFFIX, STDOUT_SUFFIX, STDERR_SUFFIX]

/** The sandbox a name under the root belongs to: itself, or the sandbox its owner or log file sits beside. @internal */
export const sandboxNameOf = (name: string): string => {
  for (const suffix of SUFFIXES) if (name.endsWith(suffix)) return name.slice(0, -suffix.length)
  return name
}

/** The sandboxes that names listed in a root belong to (a sandbox, its owner file, its logs: one sandbox). */
const sandboxesAmong = (names: ReadonlyArray<string>): Set<string> => {
  const found = new Set<string>()
  for (const name of names) if (name.startsWith(PREFIX)) found.add(sandboxNameOf(name))
  return found
}

export type { Owner }

/** @internal */
export const ownerFileOf = (sandbox: string): string => `${sandbox}${OWNER_SUFFIX}`

// Pid and start time in base 36, so that paths inside a sandbox stay short (tools put sockets there, and a socket's
// path has 107 bytes): `kiln-sandbox-2ninq-1zxqv-5f0c9a1e`. The random part only tells one engine's sandboxes apart.
const NAME = /^kiln-sandbox-([0-9a-z]+)-([0-9a-z]+|_)-[0-9a-f]{8}$/

/** The owner a sandbox's name records, if it is a name this version makes. @internal */
export const ownerOfName = (name: string): Owner | undefined => {
  const m = NAME.exec(name)
  if (m === null) return undefined
  const startTime = m[2] === "_" ? "" : String(parseInt(m[2]!, 36))
  return { pid: parseInt(m[1]!, 36), startTime }
}

/** Where this process's sandbox names start counting: random, so that names from an earlier process are unlikely. */
let serial = randomBytes(4).readUInt32LE(0)

/**
 * A fresh sandbox name of `owner` (its last part tells one engine's sandboxes apart: a counter from a random start,
 * as random bytes for every sandbox cost more than the rename they name). A name that is taken is skipped by its
 * maker's mkdir or rename failing.
 */
const nameFor = (owner: Owner): string => {
  const start = owner.startTime === "" ? "_" : Number(owner.startTime).toString(36)
  serial = (serial + 1) >>> 0
  return `${PREFIX}${owner.pid.toString(36)}-${start}-${serial.toString(16).padStart(8, "0")}`
}

/**
 * The mode a sandbox is made with: its user's alone, as its root is. A process's inputs are in it while it runs,
 * and a root a group may list (its owner chose so) must not let the group read them.
 *
 * @internal
 */
export const MODE = 0o700

/** Creates a sandbox directory under `root`, named after its owner. @internal */
export const create = (root: string, owner: Owner): string => {
  for (let madeRoot = false;;) {
    const dir = path.join(root, nameFor(owner))
    try {
      fs.mkdirSync(dir, { mode: MODE })
      return dir
    } catch (e) {
      if (errnoOf(e) === "EEXIST") continue
      if (errnoOf(e) !== "ENOENT" || madeRoot) throw e
      // The root is made on first need, not checked before every sandbox (the engine checked what exists when it
      // started); private to its user, and refused if another user took its place meanwhile.
      PrivateDir.ensureOrThrow("sandbox root", root, "own")
      madeRoot = true
    }
  }
}

/**
 * How many directories and other entries (files, symlinks) a tree holds: what a refill makes, reuses or removes.
 *
 * @internal
 */
export interface Shape {
  readonly dirs: number
  readonly files: number
}

/** @internal */
export interface Idle {
  readonly path: string
  /** How many entries its last process left in it (as listed when it finished): `Refill` reuses them. */
  readonly entries: number
  /** Those entries by kind. */
  readonly shape: Shape
}

/**
 * About how many entries a refill of a sandbox holding `held` makes or removes to hold `wanted`: the rest are kept,
 * or renamed into place and rewritten, which costs a fraction of making an inode or freeing one (`refill.ts`).
 */
const refillCost = (held: Shape, wanted: Shape) =>
  Math.abs(held.dirs - wanted.dirs) + Math.abs(held.files - wanted.files)

/** What filling a new sandbox makes: every wanted entry, and the sandbox's own directory. */
const freshCost = (wanted: Shape) => wanted.dirs + wanted.files + 1

const shapeOf = (entries: ReadonlyMap<string, Kind>): Shape => {
  let dirs = 0
  for (const kind of entries.values()) if (kind === "dir") dirs++
  return { dirs, files: entries.size - dirs }
}

/** @internal */
export interface Pool {
  /**
   * An idle sandbox of this owner under a name no process has had, if one is idle: an empty one, or with `used`, one
   * that may hold what its last process left; given the `wanted` tree's shape, the one nearest to it, and none when
   * every idle one is further from it than a new sandbox is.
   */
  readonly take: (used: boolean, wanted?: Shape) => Idle | undefined
  /**
   * Keeps a finished sandbox of up to `Store.REUSE_MAX_ENTRIES` entries (as it is, with its log files beside it) for the
   * next process (whose spawn truncates the logs), or removes it here when enough are idle and it is empty; or says
   * it did not (a bigger tree, one it cannot list, one with a mount in it): the caller removes it.
   */
  readonly recycle: (sandbox: string) => boolean
  /** Removes the idle sandboxes and their logs (when their owner's scope ends); says which it could not remove. */
  readonly drain: () => Array<{ readonly path: string; readonly error: unknown }>
}

/** A finished sandbox of more entries than this is removed, off the engine's thread, rather than reused. */
const REUSE_MAX_ENTRIES = STORE_REUSE_MAX_ENTRIES
const POOL_MAX = 16
/** Entries all idle sandboxes may hold together: what `drain` removes on the engine's thread as it ends. */
const HELD_MAX_ENTRIES = 4096

/**
 * Idle sandboxes of one owner, reused instead of made and removed for every process (as Bazel reuses sandbox
 * directories): on a file system mounted with `discard`, making and removing a sandbox's directory is a large share
 * of a trivial process's cost, and after heavy churn making and freeing a file's inode costs several times what
 * renaming it and rewriting it does (see `refill.ts`; the profiles are in docs/bench-log.md). A finished sandbox is renamed at once to a fresh name of the same owner: the finished process's path is
 * gone when its result returns, as a removed sandbox's is (a straggler writing there fails), and the next process
 * gets a path nobody has used. Its name still says whose it is, so an engine's death leaves nothing sweeps miss.
 *
 * @internal
 */
export const pool = (root: string, owner: Owner, options: { readonly keepUsed?: boolean } = {}): Pool => {
  const keepUsed = options.keepUsed ?? true
  const idle: Array<Idle> = []
  let held = 0
  // What `mkdir(…, MODE)` gives a new sandbox under this process's umask (chmod does not apply the umask), and
  // under a setgid root (whose bit a new directory inherits); known once the root exists.
  let mode: number | undefined
  const modeOfNew = () => mode ??= (MODE & ~process.umask()) | (fs.statSync(root).mode & 0o2000)
  return {
    take: (used, wanted) => {
      // Who refills a sandbox gets one that holds something (whose inodes it reuses), else any; others, an empty one.
      let i = idle.findLastIndex((s) => used === s.entries > 0)
      if (i < 0 && used) i = idle.length - 1
      if (i < 0) return undefined
      if (used && wanted !== undefined) {
        // The nearest in shape (the latest of equals, whose pages are likeliest cached): a process of 30 inputs handed
        // the sandbox of one of 3 would make 27 inodes its own sandbox keeps, and free them for the next small one.
        // Bazel keeps reused sandboxes apart by the kind of action for the same reason.
        for (let j = idle.length - 1; j >= 0; j--) {
          if (refillCost(idle[j]!.shape, wanted) < refillCost(idle[i]!.shape, wanted)) i = j
        }
        if (refillCost(idle[i]!.shape, wanted) > freshCost(wanted)) return undefined
      }
      const taken = idle.splice(i, 1)[0]!
      held -= taken.entries
      return taken
    },
    recycle: (sandbox) => {
      const listed = scan(sandbox, keepUsed ? REUSE_MAX_ENTRIES : 0)
      if (listed === undefined || held + listed.size > HELD_MAX_ENTRIES) return false
      const entries = listed.size
      // What a process mounted in it is not the sandbox's to refill (nor to empty here).
      if (entries > 0 && mountUnder(sandbox) !== undefined) return false
      if (idle.length >= POOL_MAX) {
        if (entries > 0) return false
        // Enough are idle: this empty one goes, here too (a few syscalls cost less than the spawner's round trip).
        try {
          fs.rmdirSync(sandbox)
        } catch {
          return false
        }
        removeLogs(sandbox)
        return true
      }
      let renamed: string
      try {
        // A tool may have changed the directory's mode: the next process gets the one a new sandbox has.
        fs.chmodSync(sandbox, modeOfNew())
        renamed = path.join(root, nameFor(owner))
        fs.renameSync(sandbox, renamed)
      } catch {
        return false
      }
      // Its process's logs go with it, to be truncated by the next process's spawn: making and removing two files
      // per process costs more than renaming them. What they held is in the store.
      for (const suffix of [STDOUT_SUFFIX, STDERR_SUFFIX]) {
        try {
          fs.renameSync(`${sandbox}${suffix}`, `${renamed}${suffix}`)
        } catch {
          fs.rmSync(`${sandbox}${suffix}`, { force: true })
        }
      }
      idle.push({ path: renamed, entries, shape: shapeOf(listed) })
      held += entries
      return true
    },
    drain: () => {
      held = 0
      const failed: Array<{ path: string; error: unknown }> = []
      for (const { path: dir } of idle.splice(0)) {
        try {
          refuseMounted(dir)
          removeTree(dir)
          removeLogs(dir)
        } catch (error) {
          // Left for a sweep (its name says whose it is), and reported.
          failed.push({ path: dir, error })
        }
      }
      return failed
    }
  }
}

/** Marks a sandbox kept, so that sweeps leave it. @internal */
export const markKept = (sandbox: string, owner: Owner): void =>
  fs.writeFileSync(ownerFileOf(sandbox), JSON.stringify({ ...owner, kept: true }))

/**
 * Removes a sandbox (writable fix-up included), the logs beside it, then its owner file if it has one. Throws the
 * error that stopped it, before anything is removed when a file system is mounted in it.
 *
 * @internal
 */
export const remove = (sandbox: string): void => {
  refuseMounted(sandbox)
  removeTree(sandbox)
  for (const suffix of [STDOUT_SUFFIX, STDERR_SUFFIX, OWNER_SUFFIX]) fs.rmSync(`${sandbox}${suffix}`, { force: true })
}

/** Removes the process's log files beside a sandbox, if they are there. Never throws. @internal */
export const removeLogs = (sandbox: string): void => {
  for (const suffix of [STDOUT_SUFFIX, STDERR_SUFFIX]) {
    try {
      fs.unlinkSync(`${sandbox}${suffix}`)
    } catch {
      // Absent (most), or left for the next sweep to find beside a sandbox whose owner is gone.
    }
  }
}

/**
 * Removes a sandbox this process made and did not keep: the tree alone, since nothing else is beside it (a
 * runner's logs go with the sandbox through its own remover). Throws the error that stopped it (as `remove`).
 *
 * @internal
 */
export const removeOwn = (sandbox: string): void => {
  refuseMounted(sandbox)
  removeTree(sandbox)
}

/**
 * Who made a sandbox: its owner file if it has one (a kept sandbox, or an earlier version's), else its name.
 *
 * @internal
 */
export const readOwner = (sandbox: string): Owner | undefined => {
  let text: string | undefined
  try {
    text = fs.readFileSync(ownerFileOf(sandbox), "utf8")
  } catch (e) {
    if (errnoOf(e) !== "ENOENT") return undefined
  }
  if (text === undefined) return ownerOfName(path.basename(sandbox))
  try {
    const o = JSON.parse(text)
    return typeof o?.pid === "number" && typeof o?.startTime === "string" ? o : undefined
  } catch {
    // Being written (a sandbox being kept): the sweep's grace period applies.
    return undefined
  }
}

/** @internal */
export interface SweepResult {
  readonly removed: Array<string>
  kept: number
  readonly failed: Array<{ readonly path: string; readonly error: unknown }>
}

/**
 * Removes the sandboxes under `root` whose owner is dead (and, with `kept`, the kept ones too). A sandbox without a
 * readable owner file is only removed when it is older than `grace`: its owner may be writing the file right now.
 *
 * @internal
 */
export const sweep = (
  root: string,
  options: { readonly kept?: boolean; readonly graceMs?: number } = {}
): SweepResult => {
  const result: SweepResult = { removed: [], kept: 0, failed: [] }
  let names: Array<string>
  try {
    names = fs.readdirSync(root)
  } catch (e) {
    if (errnoOf(e) === "ENOENT") return result
    throw e
  }
  const grace = options.graceMs ?? 60_000
  const now = Date.now()
  for (const name of sandboxesAmong(names)) {
    const dir = path.join(root, name)
    const owner = readOwner(dir)
    let orphan: boolean
    if (owner === undefined) {
      try {
        const present = [dir, ...SUFFIXES.map((suffix) => `${dir}${suffix}`)].find((p) => fs.existsSync(p))
        if (present === undefined) continue
        orphan = now - fs.lstatSync(present).mtimeMs > grace
      } catch {
        continue
      }
    } else if (owner.kept === true) {
      orphan = options.kept === true
      if (!orphan) result.kept++
    } else {
      orphan = !Proc.ownerAlive(owner)
    }
    if (!orphan) continue
    try {
      remove(dir)
      result.removed.push(dir)
    } catch (error) {
      result.failed.push({ path: dir, error })
    }
  }
  return result
}

/**
 * The sandboxes under the watched roots that `owner` made and did not keep, found by their names (or owner files):
 * the engine tells the sandboxer nothing per process (that was three messages per process, a round trip among them).
 *
 * @internal
 */
export const ownedBy = (roots: Iterable<string>, owner: Owner): Array<string> => {
  const found: Array<string> = []
  for (const root of roots) {
    let names: Array<string>
    try {
      names = fs.readdirSync(root)
    } catch {
      continue
    }
    for (const name of sandboxesAmong(names)) {
      const dir = path.join(root, name)
      const o = readOwner(dir)
      if (o === undefined || o.kept === true || o.pid !== owner.pid) continue
      if (owner.startTime !== "" && o.startTime !== owner.startTime) continue
      found.push(dir)
    }
  }
  return found
}
