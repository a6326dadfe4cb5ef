/**
 * Writes a process's declared outputs back into the workspace: only the declared paths, each file replaced
 * atomically (written beside its target, then renamed over it), and a declared directory made to hold exactly
 * what the process produced. A file the process just made is taken from its sandbox when it can be (`Handoff`):
 * renamed, not written.
 *
 * @internal
 */
import * as Effect from "effect/Effect"
import * as fs from "node:fs"
import * as path from "node:path"
import type * as Digest from "../../domain/Digest.js"
import type { StoreError } from "../../domain/StoreErrors.js"
import * as AtomicFile from "../../os/AtomicFile.js"
import { errnoOf } from "../../os/Errno.js"
import { ioError } from "../../os/IoError.js"
import { sha256Hex } from "../../os/LazyCrypto.js"
import { mkdirp } from "../../os/Mkdirp.js"
import { removeTree } from "../../os/RemoveTree.js"
import type { Handoff } from "../../sandbox/Sandboxes.js"
import * as Observation from "../../store/SnapshotObservation.js"
import { knownHash, recordHash, type SnapshotSession } from "../../store/Store.js"
import type * as Store from "../../store/Store.js"

/** Temp names unique within this process; the pid makes them unique beside another kiln's. */
let tmpCount = 0
const tmpBeside = (p: string) =>
  path.join(path.dirname(p), `.${path.basename(p)}.kiln-${process.pid}-${(tmpCount++).toString(36)}`)

/** `make(tmp)`, its parent directory made first if it turns out missing (rarely: one stat less per file). */
const makeBeside = (target: string, tmp: string, make: (tmp: string) => boolean): boolean => {
  try {
    return make(tmp)
  } catch (e) {
    if (errnoOf(e) !== "ENOENT" || fs.statSync(path.dirname(target), { throwIfNoEntry: false }) !== undefined) throw e
    mkdirp(path.dirname(target))
    return make(tmp)
  }
}

/**
 * Makes `target` what `make` puts at a path beside it; false, changing nothing, when `make` puts nothing there.
 * `absent`: nothing was at `target` a moment ago, so no directory there needs removing first.
 */
const replaceWith = (target: string, make: (tmp: string) => boolean, absent = false): boolean =>
  // A full disk leaves a partial file: removed, not left in the workspace too.
  AtomicFile.replace(target, (tmp) => {
    if (!makeBeside(target, tmp, make)) return false
    if (absent) return
    const st = fs.lstatSync(target, { throwIfNoEntry: false })
    if (st?.isDirectory() === true) removeTree(target)
  }, tmpBeside(target))

/**
 * Whether `target` already holds exactly these bytes and mode: then it is left alone (a no-op run rewrites
 * nothing). The stat index answers without reading when it can. "absent": nothing is there.
 */
const upToDate = (
  target: string,
  digest: Digest.Digest,
  isExecutable: boolean,
  index: SnapshotSession | undefined,
  observe: Array<Observation.SnapshotObservation>
): boolean | "absent" => {
  let st: fs.BigIntStats | undefined
  try {
    st = fs.lstatSync(target, { bigint: true, throwIfNoEntry: false })
  } catch {
    // ENOTDIR: a parent is a file; replacing the target fails and says so.
    return false
  }
  if (st === undefined) return "absent"
  const same = check(target, st, digest, isExecutable, index)
  if (same) observe.push(Observation.present("f", target, st, digest.hash))
  return same
}

const check = (
  target: string,
  st: fs.BigIntStats,
  digest: Digest.Digest,
  isExecutable: boolean,
  index: SnapshotSession | undefined
) => {
  if (!st.isFile() || Number(st.size) !== digest.sizeBytes) return false
  if (((Number(st.mode) & 0o100) !== 0) !== isExecutable) return false
  if (index !== undefined && knownHash(index, target, st) === digest.hash) return true
  const same = sha256Hex(fs.readFileSync(target)) === digest.hash
  if (same && index !== undefined) recordHash(index, target, st, digest.hash)
  return same
}

/**
 * Says each output it left in the workspace with its stat, and each declared directory's listing (for the run memo).
 *
 * @internal
 */
export const writeBack = (
  store: Store.Service,
  outputDigest: Digest.Digest,
  workspaceDir: string,
  declaredDirectories: ReadonlyArray<string>,
  session?: Store.SnapshotSession,
  /** Where a file that ran may be waiting, to be renamed into place rather than written. */
  handoff?: Handoff
): Effect.Effect<Array<Observation.SnapshotObservation>, StoreError | Digest.MissingDigest> =>
  Effect.gen(function*() {
    const observe: Array<Observation.SnapshotObservation> = []
    const entries = yield* store.listTree(outputDigest)
    const produced = new Set(entries.map((e) => e.path))
    for (const e of entries) {
      const target = path.join(workspaceDir, e.path)
      if (e.type === "directory") {
        yield* Effect.try({
          try: () => {
            const st = fs.lstatSync(target, { throwIfNoEntry: false })
            if (st !== undefined && !st.isDirectory()) fs.unlinkSync(target)
            mkdirp(target)
          },
          catch: ioError(target, "cannot write an output directory")
        })
      } else if (e.type === "symlink") {
        yield* Effect.try({
          try: () => {
            replaceWith(target, (tmp) => {
              fs.symlinkSync(e.target!, tmp)
              return true
            })
            observe.push(Observation.present("l", target, fs.lstatSync(target, { bigint: true }), e.target!))
          },
          catch: ioError(target, "cannot write an output symlink")
        })
      } else {
        const index = session
        const there = upToDate(target, e.digest!, e.isExecutable === true, index, observe)
        if (there === true) continue
        const absent = there === "absent"
        const mode = e.isExecutable ? 0o755 : 0o644
        const taken = handoff !== undefined && (yield* Effect.try({
          try: () => replaceWith(target, (tmp) => handoff.take(e.digest!, tmp, mode), absent),
          catch: ioError(target, "cannot write an output file")
        }))
        const bytes = taken ? undefined : yield* store.getFile(e.digest!)
        yield* Effect.try({
          try: () => {
            if (bytes !== undefined) {
              replaceWith(target, (tmp) => {
                fs.writeFileSync(tmp, bytes, { mode })
                return true
              }, absent)
            }
            const st = fs.lstatSync(target, { bigint: true })
            if (index !== undefined) recordHash(index, target, st, e.digest!.hash)
            observe.push(Observation.present("f", target, st, e.digest!.hash))
          },
          catch: ioError(target, "cannot write an output file")
        })
      }
    }
    // A declared directory holds exactly what the process produced: stale files of an earlier run go.
    for (const dir of declaredDirectories) {
      if (!produced.has(dir)) continue
      const prune = (rel: string): void => {
        const abs = path.join(workspaceDir, rel)
        const kept: Array<string> = []
        for (const name of fs.readdirSync(abs)) {
          const child = `${rel}/${name}`
          if (!produced.has(child)) removeTree(path.join(abs, name))
          else {
            kept.push(name)
            if (fs.lstatSync(path.join(abs, name)).isDirectory()) prune(child)
          }
        }
        // Stat after pruning: a change made during the run (pruning included) leaves the directory racy, and the
        // memo lists it again before trusting it.
        observe.push(Observation.present("d", abs, fs.lstatSync(abs, { bigint: true }), kept.sort().join("/")))
      }
      yield* Effect.try({ try: () => prune(dir), catch: ioError(path.join(workspaceDir, dir), "cannot prune") })
    }
    return observe
  })
