/**
 * The process-wide registry of LMDB environments. LMDB forbids opening one environment twice in a process: closing
 * either copy drops the process's POSIX locks on `lock.mdb`, and another process can then write the same shard at
 * the same time (Pants shipped that corruption). lmdb-js shares the native environment by inode, but two JS handles
 * see each other's writes only a turn later and it does not refuse conflicting options, so kiln hands out one
 * handle per environment, counted, keyed by the lock file's `(dev, ino)` so that symlinked and relative paths to the
 * same store meet in one entry.
 *
 * @internal
 */
import * as Effect from "effect/Effect"
import type * as Scope from "effect/Scope"
import type * as Lmdb from "lmdb"
import type { Database, RootDatabase } from "lmdb"
import * as fs from "node:fs"
import Module from "node:module"
import * as path from "node:path"
import { StoreConfigConflict, StoreError } from "../../../../domain/StoreErrors.js"
import { describeErrno, errnoOf } from "../../../../os/Errno.js"
import { mkdirp } from "../../../../os/Mkdirp.js"
import * as Proc from "../../../../os/Proc.js"
import * as OpenedEnvs from "../../OpenedEnvs.js"
import * as LmdbCommit from "./commit.js"
import * as LmdbFile from "./dataFile.js"
import * as Unsynced from "./unsynced.js"

/** @internal */
export interface EnvSettings {
  readonly mapSize: number
  readonly maxReaders: number
  /** Whether this environment holds the action locks ({@link SharedEnv.locks}); only the `locks` kind's does. */
  readonly lockTable?: boolean
}

/** @internal */
export interface SharedEnv {
  readonly key: string
  readonly path: string
  readonly env: RootDatabase<Buffer, Buffer>
  /** Digest hash (32 bytes) → the entry's bytes. */
  readonly content: Database<Buffer, Buffer>
  /** Digest hash (32 bytes) → `[leasedUntilMs: f64, size: f64]`. Written in the same transaction as the content. */
  readonly leases: Database<Buffer, Buffer>
  /**
   * Action digest hash → the owner (`{ pid, startTime }` JSON) running that action: the lock environment's only
   * (see {@link EnvSettings.lockTable}), undefined in every other.
   */
  readonly locks: Database<Buffer, Buffer> | undefined
  readonly settings: EnvSettings
  refs: number
  /**
   * Opened ahead of any use by a standby engine ({@link warm}), and not yet taken by a store: the first opener takes it
   * as its own (its last release closes it as usual), and one with other settings closes it first.
   */
  waiting: boolean
}

/** @internal */
export const MDB_READERS_FULL = -30790

type Registry = Map<string, SharedEnv>
const registryKey = Symbol.for("kiln/lmdbEnvs")
// On globalThis, so that two copies of this module in one process (a bundle beside the tsc build) still share it.
const registry: Registry = ((globalThis as any)[registryKey] ??= new Map()) as Registry

let lmdb: typeof Lmdb | undefined

/**
 * Beside an addon that `scripts/patch-lmdb.mjs` built (at install) from LMDB's source with kiln's fixes: the source's
 * hash, then the id of each fix, one a line.
 */
const FIXES_STAMP = "kiln-lmdb-fixes"

/**
 * What an addon kiln runs must have been built with: lost commits, locks destroyed under another opener, and the heap
 * overflow and the crash (its message formatted into a pointer other threads take) of a page write failed by a full
 * disk.
 */
const REQUIRED_FIXES = ["open-txnid", "close-keeps-mutexes", "write-error-message", "error-message-handoff"]

const stampHasFixes = (file: string): boolean => {
  try {
    const ids = new Set(fs.readFileSync(file, "utf8").split("\n").slice(1))
    return REQUIRED_FIXES.every((id) => ids.has(id))
  } catch {
    return false
  }
}

/**
 * Whether the native addon lmdb loaded is the one built with kiln's fixes (see `scripts/patch-lmdb.mjs`): its file,
 * found among the modules Node has loaded, has a stamp beside it that names every fix.
 */
const addonIsFixed = (addon: unknown): { fixed: boolean; file?: string } => {
  const cache = (Module as unknown as { _cache: Record<string, { exports: unknown; filename: string } | undefined> })
    ._cache
  for (const m of Object.values(cache)) {
    if (m !== undefined && m.exports === addon) {
      return { fixed: stampHasFixes(path.join(path.dirname(m.filename), FIXES_STAMP)), file: m.filename }
    }
  }
  return { fixed: false }
}

/** Whether the lmdb this process loaded runs the addon built with the fix (undefined before lmdb is loaded). @internal */
export const loadedAddonIsFixed = (): boolean | undefined =>
  lmdb === undefined ? undefined : addonIsFixed((lmdb as { readonly nativeAddon?: unknown }).nativeAddon).fixed

const loadLmdb = Effect.tap(
  Effect.promise(async () => (lmdb ??= await import("lmdb"))),
  (loaded) => {
    const { file, fixed } = addonIsFixed((loaded as { readonly nativeAddon?: unknown }).nativeAddon)
    return fixed ? Effect.void : Effect.logWarning(
      `lmdb's native addon${file === undefined ? "" : ` (${file})`} is not the one built with kiln's LMDB fixes ` +
        "(run `node scripts/patch-lmdb.mjs` in kiln's directory): with several kiln processes on one store, " +
        "entries written can be lost and writes can fail with EINVAL; a full disk can crash kiln"
    )
  }
)

const lockKey = (dir: string): string | undefined => {
  try {
    // stat, never open: closing any descriptor of lock.mdb would drop this process's LMDB locks on it.
    const st = fs.statSync(path.join(dir, "lock.mdb"), { bigint: true })
    return `${st.dev}:${st.ino}`
  } catch (e) {
    if (errnoOf(e) === "ENOENT") return undefined
    throw e
  }
}

/** @internal */
export const registrySize = (): number => registry.size

const lmdbError = (dir: string, action: string) => (e: unknown) =>
  new StoreError({ reason: "Lmdb", detail: `${action}: ${describeErrno(e)}`, path: dir })

const optionsOf = (dir: string, settings: EnvSettings) => ({
  path: dir,
  noSubdir: false,
  mapSize: settings.mapSize,
  // Synced when closed instead, with a marker for a crash in between: see `unsynced.ts`.
  noSync: true,
  maxReaders: settings.maxReaders,
  maxDbs: 4,
  encoding: "binary" as const,
  keyEncoding: "binary" as const,
  compression: false,
  cache: false
})

const DATABASES = ["content", "leases"] as const
const WITH_LOCKS = [...DATABASES, "locks"] as const

/**
 * Opens (creating them if need be) the named databases in one write transaction: lmdb-js commits one per `openDB`
 * otherwise, and in a new environment each of those commits took several milliseconds, paid once per shard. Only
 * the lock environment opens `locks`: lmdb-js builds a handle of its own for each database, which is most of the cost
 * of opening an environment, and the shards of files, directories and actions never touch it (stores made before
 * have an empty one there, left as it is).
 */
const openDatabases = (env: RootDatabase<Buffer, Buffer>, settings: EnvSettings) =>
  env.transactionSync(() =>
    (settings.lockTable === true ? WITH_LOCKS : DATABASES).map((name) =>
      env.openDB<Buffer, Buffer>({ name, encoding: "binary", keyEncoding: "binary" })
    )
  )

/** The environment's handle as kiln shares it, registered under its lock file's identity. */
const register = (
  dir: string,
  env: RootDatabase<Buffer, Buffer>,
  settings: EnvSettings,
  databases = openDatabases(env, settings),
  key = lockKey(dir)!
): SharedEnv => {
  // lmdb-js checks at open too; kiln does it explicitly because it is the promise users rely on.
  env.readerCheck()
  const [content, leases, locks] = databases
  const shared: SharedEnv = {
    key,
    path: dir,
    env,
    content: content!,
    leases: leases!,
    locks,
    settings,
    refs: 1,
    waiting: false
  }
  LmdbCommit.watch(shared)
  registry.set(key, shared)
  return shared
}

/** New environments that processes killed while making them left beside `dir`. */
const removeAbandoned = (dir: string) => {
  const prefix = `${path.basename(dir)}.new-`
  for (const name of fs.readdirSync(path.dirname(dir))) {
    if (!name.startsWith(prefix)) continue
    const pid = Number(name.slice(prefix.length).split("-")[0])
    if (!Proc.isAlive(pid)) fs.rmSync(path.join(path.dirname(dir), name), { recursive: true, force: true })
  }
}

/**
 * Makes a new environment whole (its named databases included) in a directory of its own beside `dir`, renames it
 * into place and keeps it open: its handle is this process's handle on `dir`. Processes that created one
 * environment at once (six engines starting on a fresh store) made LMDB fail with `MDB_PROBLEM: mdb_page_touch no
 * parent` while each created the named databases; a rename is all or nothing, so no process opens an environment
 * another is still making. When another process got there first (`dir` is no longer empty), this one is discarded
 * and undefined returned: the caller opens theirs. (Closing the new handle and opening `dir` again instead made
 * every later fork of this process several times slower: lmdb-js keeps something of a closed environment.)
 */
const createInPlace = (
  open: typeof Lmdb.open,
  dir: string,
  settings: EnvSettings
): StoreError | SharedEnv | undefined => {
  // Room first, before anything is made: LMDB writes a new environment through its map, and a full disk is SIGBUS.
  // `dir` itself may not be there yet (it is made by the rename below): its parent says the room.
  const room = LmdbFile.check(dir, settings.maxReaders, path.dirname(dir))
  if (room !== undefined) return room
  const fresh = `${dir}.new-${process.pid}-${Math.random().toString(36).slice(2, 10)}`
  const unmarked = Unsynced.mark(dir)
  if (unmarked !== undefined) return lmdbError(dir, "cannot create the LMDB environment")(unmarked)
  let env: RootDatabase<Buffer, Buffer> | undefined
  try {
    removeAbandoned(dir)
    fs.mkdirSync(fresh)
    env = open<Buffer, Buffer>(optionsOf(fresh, settings))
    const databases = openDatabases(env, settings)
    try {
      // Takes `dir` only while it is absent or empty (as an older kiln left it): never an environment in use.
      fs.renameSync(fresh, dir)
    } catch (e) {
      if (errnoOf(e) !== "ENOTEMPTY" && errnoOf(e) !== "EEXIST") throw e
      void env.close()
      fs.rmSync(fresh, { recursive: true, force: true })
      return undefined
    }
    return register(dir, env, settings, databases)
  } catch (e) {
    if (env !== undefined) void env.close()
    fs.rmSync(fresh, { recursive: true, force: true })
    return lmdbError(dir, "cannot create the LMDB environment")(e)
  }
}

/**
 * Loads lmdb-js (once per process): {@link openSync} needs it loaded.
 *
 * @internal
 */
export const preload: Effect.Effect<void> = Effect.suspend(() =>
  lmdb !== undefined ? Effect.void : Effect.asVoid(loadLmdb)
)

/**
 * Opens the shared environment for `dir` (creating it when there is none), or takes another reference to it when this
 * process has it open already; {@link release} gives the reference back. Synchronous, so that a store can open a shard
 * on first use in the middle of a read; lmdb-js must be loaded first ({@link preload}). A second opener that asks for
 * other settings gets `StoreConfigConflict`.
 *
 * @internal
 */
export const openSync = (dir: string, settings: EnvSettings): SharedEnv | StoreError | StoreConfigConflict => {
  const opened = openOrTake(dir, settings)
  if (!(opened instanceof StoreError || opened instanceof StoreConfigConflict)) {
    // What a standby started at this run's end opens ahead of the next (see `OpenedEnvs.ts`).
    OpenedEnvs.note({
      dir: path.resolve(dir),
      mapSize: settings.mapSize,
      maxReaders: settings.maxReaders,
      lockTable: settings.lockTable === true
    })
  }
  return opened
}

const openOrTake = (dir: string, settings: EnvSettings): SharedEnv | StoreError | StoreConfigConflict => {
  if (lmdb === undefined) throw new Error("lmdbEnvs.openSync before preload")
  let existingKey: string | undefined
  try {
    // Only its parent: a new environment is made beside `dir` and renamed to it (see `createInPlace`), and a directory
    // made first would be one more inode to allocate and free per environment of a fresh store, each slow on a file
    // system a build has churned.
    mkdirp(path.dirname(dir))
    existingKey = lockKey(dir)
  } catch (e) {
    return lmdbError(dir, "cannot prepare the LMDB directory")(e)
  }
  const existing = existingKey === undefined ? undefined : registry.get(existingKey)
  if (existing !== undefined) {
    // One opened ahead by a path that no longer leads to it (its store moved since) is not taken: its path is where
    // this run would mark and sync what it writes (see `unsynced.ts`).
    const moved = existing.waiting && path.resolve(existing.path) !== path.resolve(dir)
    const conflict = conflictOf(dir, existing, settings)
    if (conflict === undefined && !moved) {
      // One opened ahead has no reference yet: this is its first.
      existing.refs++
      existing.waiting = false
      return existing
    }
    if (!existing.waiting) return conflict!
    // Opened ahead with the last run's settings, or by its old path: this run's own come first.
    const closed = closeWaiting(existing)
    if (closed !== undefined) return closed
  }
  if (!fs.existsSync(path.join(dir, "data.mdb"))) {
    const created = createInPlace(lmdb.open, dir, settings)
    if (created !== undefined) return created
  }
  // LMDB crashes the process on a truncated data file, or when it creates one on a full disk: refuse those first.
  const unsafe = LmdbFile.check(dir, settings.maxReaders)
  if (unsafe !== undefined) return unsafe
  try {
    return register(dir, lmdb.open<Buffer, Buffer>(optionsOf(dir, settings)), settings)
  } catch (e) {
    return lmdbError(dir, "cannot open the LMDB environment")(e)
  }
}

const conflictOf = (dir: string, existing: SharedEnv, settings: EnvSettings): StoreConfigConflict | undefined => {
  for (const setting of ["mapSize", "maxReaders"] as const) {
    if (existing.settings[setting] !== settings[setting]) {
      return new StoreConfigConflict({
        path: dir,
        setting,
        existing: String(existing.settings[setting]),
        requested: String(settings[setting])
      })
    }
  }
  return undefined
}

/**
 * Closes an environment nobody took ({@link SharedEnv.waiting}). It never wrote (opening its databases commits no
 * page), so lmdb-js closes it at once; the error says when it did not, rather than open a second handle beside it.
 */
const closeWaiting = (shared: SharedEnv): StoreError | undefined => {
  registry.delete(shared.key)
  void shared.env.close()
  return (shared.env as unknown as { readonly status?: string }).status === "closed" ? undefined : new StoreError({
    reason: "Lmdb",
    detail: "cannot close the environment a standby opened ahead of this run",
    path: shared.path
  })
}

/**
 * A file's identity: its `(dev, ino)` and its birth time, since a file made where one was just removed often gets the
 * same inode number; undefined when it is missing.
 */
const idOf = (file: string): string | undefined => {
  const st = fs.statSync(file, { bigint: true, throwIfNoEntry: false })
  return st === undefined ? undefined : `${st.dev}:${st.ino}:${st.birthtimeNs}`
}

/**
 * Opens the environment `e` ahead of a run, and only the one that is there. LMDB creates its two files when they are
 * missing (lmdb-js the directory too), so a store removed between the look and the open (an `rm -rf` of the store
 * while a standby waits) would get an empty environment made where it was, and the `rm` would fail. The open goes
 * through a descriptor of the directory looked at, in which nothing can be made once it is removed; and the files it
 * opened must be those looked at, else (a removal under way, between its unlinks and its `rmdir`) the environment is
 * closed and any file the open made is removed again. A window stays: an `rmdir` that comes between the open's
 * making a file and its removal fails, and a run that made the data file in place in that same instant (an empty
 * directory's environment, see {@link openSync}) loses it to the removal, as it would to the `rm` under way.
 * `beforeOpen` is for tests, to act in that window.
 */
const openAhead = (e: OpenedEnvs.OpenedEnv, beforeOpen?: () => void): void => {
  let dirFd: number
  try {
    dirFd = fs.openSync(e.dir, fs.constants.O_RDONLY | fs.constants.O_DIRECTORY)
  } catch {
    // Gone, or not a directory: the run opens it, or says why it cannot.
    return
  }
  try {
    const here = `/proc/self/fd/${dirFd}`
    const files = [path.join(here, "lock.mdb"), path.join(here, "data.mdb")] as const
    const [lock, data] = files.map(idOf)
    const key = lockKey(here)
    if (lock === undefined || data === undefined || key === undefined || registry.has(key)) return
    if (lockKey(e.dir) !== key) return
    const settings: EnvSettings = { mapSize: e.mapSize, maxReaders: e.maxReaders, lockTable: e.lockTable }
    if (LmdbFile.check(e.dir, settings.maxReaders) !== undefined) return
    beforeOpen?.()
    let env: RootDatabase<Buffer, Buffer> | undefined
    try {
      env = lmdb!.open<Buffer, Buffer>(optionsOf(here, settings))
    } catch {
      // Removed meanwhile, or cannot be opened: the run opens it, or says why it cannot.
    }
    const opened = files.map(idOf)
    if (env !== undefined && opened[0] === lock && opened[1] === data && lockKey(e.dir) === key) {
      try {
        const shared = register(e.dir, env, settings, openDatabases(env, settings), key)
        shared.refs = 0
        shared.waiting = true
        return
      } catch {
        // Left open unregistered, a store's own open would be a second handle on it: closed, the run opens it.
      }
    }
    if (env !== undefined) void env.close()
    files.forEach((file, i) => {
      const made = opened[i]
      if (made !== undefined && made !== [lock, data][i] && idOf(file) === made) fs.rmSync(file, { force: true })
    })
  } finally {
    fs.closeSync(dirFd)
  }
}

/**
 * Opens the environments `envs` ahead of a run, in a standby engine while it waits, so that the run's store finds them
 * open (each open costs a store about a millisecond, and a run through a standby is tens of them). Only environments
 * that exist, whose data file LMDB may map, and that this process has not open already; nothing is made or written
 * ({@link openAhead}). Each is taken as its own by the first store that opens it with the same settings (one with
 * other settings closes it first, see {@link openSync}); {@link closeAllWaiting} closes those nobody took. What cannot
 * be opened is left to the run, which opens it itself and says why it cannot.
 *
 * @internal
 */
export const warm = (envs: ReadonlyArray<OpenedEnvs.OpenedEnv>, beforeOpen?: () => void): Effect.Effect<void> =>
  Effect.zipRight(
    preload,
    Effect.sync(() => {
      for (const e of envs) {
        try {
          openAhead(e, beforeOpen)
        } catch {
          // The run opens it, or says why it cannot.
        }
      }
    })
  )

/** Closes every environment {@link warm} opened that no store took. @internal */
export const closeAllWaiting = (): void => {
  for (const shared of [...registry.values()]) if (shared.waiting) closeWaiting(shared)
}

/** Gives back a reference taken by {@link openSync}; the last one closes the environment. @internal */
export const release = (shared: SharedEnv): Effect.Effect<void> =>
  Effect.suspend(() => {
    shared.refs--
    if (shared.refs > 0) {
      return Effect.void
    }
    registry.delete(shared.key)
    // Synced once its last commit is in, and before it is closed (the sync needs the open environment).
    const synced = Unsynced.settle(shared.path, syncOf(shared))
    if (LmdbCommit.hasFailed(shared)) return LmdbCommit.closeAfterFailure(shared, synced)
    return Effect.promise(async () => {
      await shared.env.flushed
    }).pipe(
      Effect.zipRight(synced),
      Effect.zipRight(Effect.promise(() => shared.env.close()))
    )
  })

/** LMDB's `mdb_env_sync` of the environment, on lmdb-js's thread pool. */
const syncOf = (shared: SharedEnv) => (done: (error?: unknown) => void): void =>
  (shared.env as unknown as { readonly env: { sync(done: (error?: unknown) => void): void } }).env.sync(done)

/**
 * Notes that this process is about to commit to these shards (see `unsynced.ts`); the error says why it must not.
 *
 * @internal
 */
export const markWritten = (shards: Iterable<SharedEnv>, action: string): StoreError | undefined => {
  for (const shard of shards) {
    const e = Unsynced.mark(shard.path)
    if (e !== undefined) return new StoreError({ reason: "Io", detail: `${action}: ${e.message}`, path: shard.path })
  }
  return undefined
}

/**
 * {@link openSync} as a scoped resource, retried briefly when {@link LmdbFile.check} refused the data file (see
 * {@link LmdbFile.settling}).
 *
 * @internal
 */
export const acquire = (
  dir: string,
  settings: EnvSettings
): Effect.Effect<SharedEnv, StoreError | StoreConfigConflict, Scope.Scope> =>
  Effect.acquireRelease(
    Effect.zipRight(
      preload,
      Effect.suspend(() => {
        const opened = openSync(dir, settings)
        return opened instanceof StoreError || opened instanceof StoreConfigConflict
          ? Effect.fail(opened)
          : Effect.succeed(opened)
      }).pipe(LmdbFile.settling)
    ),
    release
  )

/**
 * Runs a read, and when LMDB's reader table is full, clears stale slots (readers whose process died) and tries
 * once more. A table still full after that is a typed error that says how to clear it.
 *
 * @internal
 */
export const read = <A>(shared: SharedEnv, f: () => A): Effect.Effect<A, StoreError> =>
  Effect.suspend(() => {
    const a = readSync(shared, f)
    return a instanceof StoreError ? Effect.fail(a) : Effect.succeed(a)
  })

/**
 * {@link read} for callers that batch many reads in plain code: the error is returned, not thrown, so that it still
 * reaches the Effect error channel as a value.
 *
 * @internal
 */
export const readSync = <A>(shared: SharedEnv, f: () => A): A | StoreError => {
  try {
    return f()
  } catch (e) {
    if (!isReadersFull(e)) return lmdbError(shared.path, "read failed")(e)
  }
  try {
    shared.env.readerCheck()
    return f()
  } catch (e) {
    if (!isReadersFull(e)) return lmdbError(shared.path, "read failed")(e)
    return readersFull(shared)
  }
}

/** @internal */
export const isReadersFull = (e: unknown): boolean =>
  typeof e === "object" && e !== null && "code" in e && e.code === MDB_READERS_FULL

/** @internal */
export const readersFull = (shared: SharedEnv): StoreError =>
  new StoreError({
    reason: "ReadersFull",
    detail: `the LMDB reader table (${shared.settings.maxReaders} slots) is full even after clearing stale readers: ` +
      `too many live processes read this store at once. Stop some kiln processes, or once none is running, ` +
      `raise --store-max-readers (every process must pass the same value: the first opener fixes it)`,
    path: shared.path
  })

/** Live readers as LMDB's reader table lists them: `[pid, txnid]` per slot in use. @internal */
export const readerPids = (shared: SharedEnv): Array<number> =>
  shared.env.readerList().split("\n").slice(1).map((line) => line.trim().split(/\s+/)[0]).filter((p) =>
    p !== undefined && /^\d+$/.test(p)
  ).map(Number)
