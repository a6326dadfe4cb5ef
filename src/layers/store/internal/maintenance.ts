/**
 * Whole-store maintenance: `check` (every entry's bytes against its key), `gc` (least-recently-leased first, never
 * a leased entry) and `stats`.
 *
 * @internal
 */
import * as Effect from "effect/Effect"
import * as fs from "node:fs"
import * as path from "node:path"
import * as Directory from "../../../domain/Directory.js"
import { StoreError } from "../../../domain/StoreErrors.js"
import { describeErrno, errnoOf } from "../../../os/Errno.js"
import { ioError } from "../../../os/IoError.js"
import { sha256Hex } from "../../../os/LazyCrypto.js"
import * as Proc from "../../../os/Proc.js"
import type { CheckReport, GcReport, Problem, Stats, StoreKind } from "../StoreMaintenance.js"
import * as Core from "./core.js"
import * as LargeFiles from "./largeFiles.js"
import * as LmdbEnvs from "./lmdb/envs.js"
import * as Sharded from "./lmdb/shards.js"
import * as TreeMaintenance from "./treeMaintenance.js"
import * as Walks from "./walks/prune.js"

const HASH = /^[0-9a-f]{64}$/

const shardsOf = (core: Core.Core, kind: "files" | "directories" | "actions") =>
  kind === "files" ? core.files : kind === "directories" ? core.directories : core.actions

const checkShard = (kind: "files" | "directories" | "actions", shard: LmdbEnvs.SharedEnv, problems: Array<Problem>) =>
  // Leases and contents are read in one synchronous pass, so both come from one read snapshot: an entry written
  // between two snapshots would otherwise look like content without a lease, and --repair would delete it.
  LmdbEnvs.read(shard, () => {
    let checked = 0
    const sizes = new Map<string, number>()
    for (const { key, value } of shard.leases.getRange({})) {
      sizes.set(Buffer.from(key).toString("hex"), Sharded.decodeLease(value)?.size ?? -1)
    }
    for (const { key, value } of shard.content.getRange({})) {
      const hash = Buffer.from(key).toString("hex")
      checked++
      const add = (problem: string) => problems.push({ store: kind, key: hash, problem })
      const leasedSize = sizes.get(hash)
      sizes.delete(hash)
      if (kind === "actions") {
        if (Core.unsealActionResult(value) === undefined) add("its checksum does not match its bytes")
        continue
      }
      const actual = sha256Hex(value)
      if (actual !== hash) {
        add(`its bytes hash to ${actual}`)
        continue
      }
      if (leasedSize === undefined) {
        add("it has no lease row")
        continue
      }
      if (leasedSize !== value.length) {
        add(`its lease row records ${leasedSize} bytes, it has ${value.length}`)
        continue
      }
      if (kind === "directories") {
        const decoded = Directory.decode(value)
        if (decoded._tag === "Left") add(decoded.left.reason)
      }
    }
    for (const hash of sizes.keys()) problems.push({ store: kind, key: hash, problem: "a lease row without content" })
    return checked
  })

interface LargeFile {
  readonly file: string
  readonly name: string
  readonly folder: string
  readonly size: number
  readonly until: number
  readonly isTemp: boolean
}

const listLargeFiles = (core: Core.Core): Effect.Effect<Array<LargeFile>, StoreError> =>
  Effect.try({
    try: () => {
      const out: Array<LargeFile> = []
      let folders: Array<string>
      try {
        folders = fs.readdirSync(core.large.root)
      } catch (e) {
        if (errnoOf(e) === "ENOENT") return out
        throw e
      }
      for (const folder of folders) {
        const dir = path.join(core.large.root, folder)
        if (LargeFiles.isTempName(folder)) {
          const st = fs.lstatSync(dir)
          out.push({ file: dir, name: folder, folder: "", size: st.size, until: st.mtimeMs, isTemp: true })
          continue
        }
        let names: Array<string>
        try {
          names = fs.readdirSync(dir)
        } catch (e) {
          if (errnoOf(e) === "ENOTDIR" || errnoOf(e) === "ENOENT") continue
          throw e
        }
        for (const name of names) {
          const file = path.join(dir, name)
          let st: fs.Stats
          try {
            st = fs.lstatSync(file)
          } catch (e) {
            if (errnoOf(e) === "ENOENT") continue
            throw e
          }
          out.push({ file, name, folder, size: st.size, until: st.mtimeMs, isTemp: LargeFiles.isTempName(name) })
        }
      }
      return out
    },
    catch: ioError(core.large.root, "cannot list large files")
  })

const largeFileNameProblem = (f: LargeFile): string | undefined => {
  if (!HASH.test(f.name)) return "its name is not a digest"
  if (f.folder !== f.name.slice(0, 2)) return "it is in the wrong folder"
  return undefined
}

const largeFileProblem = (f: LargeFile): string | undefined => {
  const named = largeFileNameProblem(f)
  if (named !== undefined) return named
  if (f.size < LargeFiles.THRESHOLD) return `it is ${f.size} bytes, below the large-file threshold`
  const { hash } = LargeFiles.hashFile(f.file)
  return hash === f.name ? undefined : `its bytes hash to ${hash}`
}

/** @internal */
export const check = (core: Core.Core, repair: boolean): Effect.Effect<CheckReport, StoreError> =>
  Effect.gen(function*() {
    const problems: Array<Problem> = []
    let checked = 0
    for (const kind of ["files", "directories", "actions"] as const) {
      for (const shard of yield* Sharded.allEnvs(shardsOf(core, kind))) {
        checked += yield* checkShard(kind, shard, problems)
      }
    }
    for (const f of yield* listLargeFiles(core)) {
      if (f.isTemp) continue
      checked++
      const problem = yield* Effect.try({ try: () => largeFileProblem(f), catch: ioError(f.file, "cannot check") })
      if (problem !== undefined) {
        problems.push({ store: "large-files", key: path.relative(core.large.root, f.file), problem })
      }
    }
    const trees = yield* Effect.try({
      try: () => TreeMaintenance.check(core.root, repair),
      catch: ioError(core.root, "cannot check the shared trees")
    })
    checked += trees.checked
    for (const t of trees.problems) problems.push({ store: "shared-trees", key: t.key, problem: t.problem })
    let repaired = trees.repaired
    if (repair) {
      for (const kind of ["files", "directories", "actions"] as const) {
        const keys = problems.filter((p) => p.store === kind).map((p) => p.key)
        if (keys.length > 0) repaired += (yield* Sharded.removeBatch(shardsOf(core, kind), keys)).length
      }
      const large = problems.filter((p) => p.store === "large-files")
      if (large.length > 0) yield* Sharded.bumpGeneration(core.files)
      for (const p of large) {
        const file = path.join(core.large.root, p.key)
        yield* Effect.try({ try: () => fs.unlinkSync(file), catch: ioError(file, "cannot remove") })
        repaired++
      }
    }
    return { checked, problems, repaired }
  })

/** Temp files younger than this may belong to a writer that is still running. */
const STRAY_TEMP_AGE_MS = 60 * 60 * 1000

interface Candidate {
  readonly kind: StoreKind
  readonly key: string
  readonly size: number
  readonly until: number
}

/**
 * Shrinks the store to `targetBytes` (counted as the bytes of its entries), removing the least recently leased
 * unleased entries first. Each removal re-checks the lease inside its write transaction, so an entry that another
 * process leased after the scan survives. Also reconciles the large-file folder: stray temp files and files that
 * are not named by their digest go.
 *
 * @internal
 */
export const gc = (core: Core.Core, targetBytes: number): Effect.Effect<GcReport, StoreError> =>
  Effect.gen(function*() {
    const now = Date.now()
    const entries: Array<Candidate> = []
    for (const kind of ["files", "directories", "actions"] as const) {
      for (const shard of yield* Sharded.allEnvs(shardsOf(core, kind))) {
        for (const { hash, lease } of yield* Sharded.scanLeases(shard)) {
          entries.push({ kind, key: hash, size: lease.size, until: lease.until })
        }
      }
    }
    let strays = 0
    for (const f of yield* listLargeFiles(core)) {
      const stray = f.isTemp ? now - f.until > STRAY_TEMP_AGE_MS : largeFileNameProblem(f) !== undefined
      if (stray) {
        yield* Effect.try({
          try: () => {
            try {
              fs.unlinkSync(f.file)
            } catch (e) {
              if (errnoOf(e) !== "ENOENT") throw e
            }
          },
          catch: ioError(f.file, "cannot remove a stray file")
        })
        strays++
      } else if (!f.isTemp) {
        entries.push({ kind: "large-files", key: f.name, size: f.size, until: f.until })
      }
    }
    const beforeBytes = entries.reduce((n, e) => n + e.size, 0)
    let used = beforeBytes
    const victims = entries.filter((e) => e.until <= now).sort((a, b) => a.until - b.until)
    const chosen: Array<Candidate> = []
    for (const v of victims) {
      if (used <= targetBytes) break
      chosen.push(v)
      used -= v.size
    }
    let removedEntries = 0
    let removedBytes = 0
    const sizeOf = new Map(chosen.map((c) => [`${c.kind}:${c.key}`, c.size]))
    for (const kind of ["files", "directories", "actions"] as const) {
      const keys = chosen.filter((c) => c.kind === kind).map((c) => c.key)
      if (keys.length === 0) continue
      for (const key of yield* Sharded.removeBatch(shardsOf(core, kind), keys, now)) {
        removedEntries++
        removedBytes += sizeOf.get(`${kind}:${key}`) ?? 0
      }
    }
    const largeChosen = chosen.filter((c) => c.kind === "large-files")
    if (largeChosen.length > 0) yield* Sharded.bumpGeneration(core.files)
    for (const c of largeChosen) {
      const file = LargeFiles.pathOf(core.large, c.key)
      const removed = yield* Effect.try({
        try: () => {
          try {
            if (fs.statSync(file).mtimeMs > now) return false
            fs.unlinkSync(file)
            return true
          } catch (e) {
            if (errnoOf(e) === "ENOENT") return false
            throw e
          }
        },
        catch: ioError(file, "cannot remove")
      })
      if (removed) {
        removedEntries++
        removedBytes += c.size
      }
    }
    const trees = yield* Effect.try({
      try: () =>
        TreeMaintenance.collect(core.root, now, (d) => {
          const dir = Core.getDirectorySync(core, d)
          return dir !== undefined && !(dir instanceof StoreError)
        }),
      catch: ioError(core.root, "cannot collect the shared trees")
    })
    const gone = yield* Effect.try({
      try: () => Walks.pruneGone(core.root),
      catch: ioError(core.root, "cannot remove what the store kept of directories that are gone")
    })
    const leasedBytes = entries.filter((e) => e.until > now).reduce((n, e) => n + e.size, 0)
    const afterBytes = beforeBytes - removedBytes
    return {
      targetBytes,
      beforeBytes,
      afterBytes,
      removedEntries,
      removedBytes,
      leasedBytes,
      strayFilesRemoved: strays + trees.tempsRemoved,
      sharedTreesRemoved: trees.removed,
      sharedTreesInUse: trees.inUse,
      goneDirectoryFiles: gone.files,
      goneDirectoryBytes: gone.bytes,
      reachedTarget: afterBytes <= targetBytes
    }
  })

/** See `StoreMaintenance.clearStaleReaders`. @internal */
export const clearStaleReaders = (core: Core.Core): Effect.Effect<number, StoreError> =>
  Effect.gen(function*() {
    let cleared = 0
    for (const shards of [core.files, core.directories, core.actions, core.locks]) {
      for (const shard of yield* Sharded.allEnvs(shards)) {
        cleared += yield* Effect.try({
          try: () => shard.env.readerCheck(),
          catch: (e) =>
            new StoreError({ reason: "Lmdb", detail: `reader check: ${describeErrno(e)}`, path: shard.path })
        })
      }
    }
    return cleared
  })

const hasReadersOf = (core: Core.Core, pid: number): Effect.Effect<boolean, StoreError> =>
  Effect.gen(function*() {
    for (const shards of [core.files, core.directories, core.actions, core.locks]) {
      for (const shard of yield* Sharded.allEnvs(shards)) {
        if (LmdbEnvs.readerPids(shard).includes(pid)) return true
      }
    }
    return false
  })

/**
 * {@link clearStaleReaders} until no slot of `pid`, a process that has died, is left, or `withinMs` has passed. LMDB
 * tells a dead reader by the file lock it held, which the kernel releases only once every thread of the process has
 * exited: a killed process's main thread can already be a zombie (which is how a watcher sees it die) while another
 * of its threads, holding its files, is still exiting (one in an fsync waits for the disk), and a reader check then
 * takes it for alive.
 *
 * @internal
 */
export const clearReadersOf = (core: Core.Core, pid: number, withinMs: number): Effect.Effect<number, StoreError> =>
  Effect.gen(function*() {
    const deadline = Date.now() + withinMs
    let cleared = 0
    for (;;) {
      cleared += yield* clearStaleReaders(core)
      if (!(yield* hasReadersOf(core, pid)) || Date.now() >= deadline) return cleared
      yield* Effect.sleep("20 millis")
    }
  })

/** The size of a shard's data file (0 before its first write made one). */
const dataFileSize = (shardPath: string): Effect.Effect<number, StoreError> => {
  const file = path.join(shardPath, "data.mdb")
  return Effect.try({
    try: () => fs.statSync(file, { throwIfNoEntry: false })?.size ?? 0,
    catch: ioError(file, "cannot stat")
  })
}

/** @internal */
export const stats = (core: Core.Core, shardCount: number): Effect.Effect<Stats, StoreError> =>
  Effect.gen(function*() {
    const now = Date.now()
    let diskBytes = 0
    let inUse = 0
    let stale = 0
    const kindStats = (kind: "files" | "directories" | "actions") =>
      Effect.gen(function*() {
        let entries = 0
        let bytes = 0
        let leased = 0
        for (const shard of yield* Sharded.allEnvs(shardsOf(core, kind))) {
          for (const { lease } of yield* Sharded.scanLeases(shard)) {
            entries++
            bytes += lease.size
            if (lease.until > now) leased++
          }
          diskBytes += yield* dataFileSize(shard.path)
          for (const pid of LmdbEnvs.readerPids(shard)) {
            // This process's own slots (it opened every shard to count) are not what anyone asking wants to know.
            if (pid === process.pid) continue
            inUse++
            if (!Proc.isAlive(pid)) stale++
          }
        }
        return { entries, bytes, leased }
      })
    const files = yield* kindStats("files")
    const directories = yield* kindStats("directories")
    const actions = yield* kindStats("actions")
    const large = (yield* listLargeFiles(core)).filter((f) => !f.isTemp && largeFileNameProblem(f) === undefined)
    const largeFiles = {
      entries: large.length,
      bytes: large.reduce((n, f) => n + f.size, 0),
      leased: large.filter((f) => f.until > now).length
    }
    diskBytes += largeFiles.bytes
    return {
      root: core.root,
      shardCount,
      files,
      directories,
      actions,
      largeFiles,
      diskBytes,
      readers: { inUse, stale, maxPerEnvironment: core.files.settings.maxReaders }
    }
  })
