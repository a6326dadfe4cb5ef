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
import type * as Digest from "../../../domain/Digest.js"
import type { StoreError } from "../../../domain/StoreErrors.js"
import { InvalidOutput } from "../../../domain/TreeErrors.js"
import * as AtomicFile from "../../../os/AtomicFile.js"
import { errnoOf } from "../../../os/Errno.js"
import { ioError } from "../../../os/IoError.js"
import { sha256Hex } from "../../../os/LazyCrypto.js"
import { removeTree } from "../../../os/RemoveTree.js"
import type { Handoff } from "../../sandbox/Sandboxes.js"
import * as Observation from "../../store/SnapshotObservation.js"
import { knownHash, recordHash, type SnapshotSession } from "../../store/SnapshotSession.js"
import type * as Store from "../../store/Store.js"
import type { Destination } from "../Workspace.js"
import * as OutputDirs from "./outputDirs.js"
import { parentOf } from "./outputDirs.js"
import * as OutputTemps from "./outputTemps.js"

/**
 * Makes `target` what `make` puts at a path beside it; false, changing nothing, when `make` puts nothing there.
 * `absent`: nothing was at `target` a moment ago, so no directory there needs removing first. Its directory is a real
 * one (`OutputDirs`), so the temp file and the rename stay inside it; a symlink at `target` is replaced, not followed.
 */
const replaceWith = (target: string, make: (tmp: string) => boolean, absent = false): boolean =>
  // A full disk leaves a partial file: removed, not left in the workspace too.
  AtomicFile.replace(target, (tmp) => {
    if (!make(tmp)) return false
    if (absent) return
    const st = fs.lstatSync(target, { throwIfNoEntry: false })
    if (st?.isDirectory() === true) removeTree(target)
  }, OutputTemps.tempBeside(target))

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

const refuse = (e: unknown, target: string, action: string): InvalidOutput | StoreError =>
  e instanceof InvalidOutput
    ? e
    // A path the tree holds that is too long below this workspace: the result cannot be laid out here (a cached one
    // is replaced by running the process), however short it was where it was made.
    : errnoOf(e) === "ENAMETOOLONG"
    ? new InvalidOutput({
      output: target,
      problem: `is too long a path for this file system (${action}: ENAMETOOLONG)`
    })
    : ioError(target, action)(e)

/** What a declared directory's entry in the output tree must not be: anything but a directory. */
const notDirectory = (dir: string, entry: Store.TreeEntry) =>
  new InvalidOutput({
    output: `${dir}/`,
    problem: entry.type === "symlink"
      ? `is declared as a directory, but the result has a symlink to \`${entry.target}\` there: kiln does not write ` +
        "or prune through it"
      : "is declared as a directory, but the result has a file there"
  })

/**
 * Writes the output tree `outputDigest` into the workspace. Nothing outside the output's own paths is ever written,
 * made, listed or removed, whatever the workspace or the tree holds: every directory is checked to be a real one
 * before anything goes into it (`OutputDirs`), a declared directory that the tree has as a symlink is refused, and
 * pruning never lists through a symlink. Says each output it left in the workspace with its stat, and each declared
 * directory's listing (for the run memo).
 *
 * @internal
 */
export const writeBack = (
  store: Store.Service,
  outputDigest: Digest.Digest,
  destination: Destination,
  session?: SnapshotSession,
  /** Where a file that ran may be waiting, to be renamed into place rather than written. */
  handoff?: Handoff
): Effect.Effect<Array<Observation.SnapshotObservation>, StoreError | Digest.MissingDigest | InvalidOutput> =>
  Effect.gen(function*() {
    const { declaredDirectories, sweep, workingDirectory, workspace } = destination
    const base = path.join(workspace, workingDirectory)
    const observe: Array<Observation.SnapshotObservation> = []
    const entries = yield* store.listTree(outputDigest)
    const produced = new Map(entries.map((e) => [e.path, e]))
    for (const dir of declaredDirectories) {
      const entry = produced.get(dir)
      if (entry !== undefined && entry.type !== "directory") return yield* notDirectory(dir, entry)
    }
    const dirs = OutputDirs.make(
      workspace,
      workingDirectory,
      new Set(entries.filter((e) => e.type === "directory").map((e) => e.path))
    )
    /** Makes the directory `e` goes into real, and (once) rids it of dead kilns' temp files when asked to. */
    const into = (e: Store.TreeEntry) => {
      const parent = parentOf(e.path)
      dirs.ensure(parent, e.path)
      if (sweep === undefined) return
      const abs = path.join(base, parent)
      if (sweep.has(abs)) return
      sweep.add(abs)
      OutputTemps.removeDead(abs)
    }
    /** `write`, once more if the directory went missing meanwhile (a write-back beside a user's `rm -rf`). */
    const inPlace = <A>(e: Store.TreeEntry, write: () => A): A => {
      into(e)
      try {
        return write()
      } catch (err) {
        if (errnoOf(err) !== "ENOENT") throw err
        dirs.forget(parentOf(e.path))
        into(e)
        return write()
      }
    }
    for (const e of entries) {
      const target = path.join(base, e.path)
      if (e.type === "directory") {
        yield* Effect.try({
          try: () => dirs.ensure(e.path, e.path),
          catch: (err) => refuse(err, target, "cannot write an output directory")
        })
      } else if (e.type === "symlink") {
        yield* Effect.try({
          try: () => {
            inPlace(e, () =>
              replaceWith(target, (tmp) => {
                fs.symlinkSync(e.target!, tmp)
                return true
              }))
            observe.push(Observation.present("l", target, fs.lstatSync(target, { bigint: true }), e.target!))
          },
          catch: (err) => refuse(err, target, "cannot write an output symlink")
        })
      } else {
        const index = session
        yield* Effect.try({ try: () => into(e), catch: (err) => refuse(err, target, "cannot write an output file") })
        // In a directory this write-back made (a restore after `rm -rf dist`), the file cannot be there yet.
        const there = dirs.madeHere(parentOf(e.path))
          ? "absent"
          : upToDate(target, e.digest!, e.isExecutable === true, index, observe)
        if (there === true) continue
        const absent = there === "absent"
        const mode = e.isExecutable ? 0o755 : 0o644
        const taken = handoff !== undefined && (yield* Effect.try({
          try: () => inPlace(e, () => replaceWith(target, (tmp) => handoff.take(e.digest!, tmp, mode), absent)),
          catch: (err) => refuse(err, target, "cannot write an output file")
        }))
        const bytes = taken ? undefined : yield* store.getFile(e.digest!)
        yield* Effect.try({
          try: () => {
            if (bytes !== undefined) {
              inPlace(e, () =>
                replaceWith(target, (tmp) => {
                  fs.writeFileSync(tmp, bytes, { mode })
                  return true
                }, absent))
            }
            const st = fs.lstatSync(target, { bigint: true })
            if (index !== undefined) recordHash(index, target, st, e.digest!.hash)
            observe.push(Observation.present("f", target, st, e.digest!.hash))
          },
          catch: (err) => refuse(err, target, "cannot write an output file")
        })
      }
    }
    // A declared directory holds exactly what the process produced: stale files of an earlier run go.
    for (const dir of declaredDirectories) {
      if (!produced.has(dir) || !dirs.isReal(dir)) continue
      yield* Effect.try({
        try: () => prune(base, dir, produced, observe),
        catch: ioError(path.join(base, dir), "cannot prune")
      })
    }
    return observe
  })

/**
 * Removes from the declared directory `dir` (real: made sure of) and from each directory the tree has below it what
 * the tree does not have. The listing's entry types (`lstat`'s, never a link's target) decide what is a directory to
 * descend into, so a symlink is removed or kept as a link, never listed through. A temp file of a kiln that still runs
 * is left to it (with the workspace lock, none can be there).
 */
const prune = (
  base: string,
  dir: string,
  produced: ReadonlyMap<string, Store.TreeEntry>,
  observe: Array<Observation.SnapshotObservation>
): void => {
  const todo = [dir]
  for (let rel = todo.pop(); rel !== undefined; rel = todo.pop()) {
    const abs = path.join(base, rel)
    const kept: Array<string> = []
    for (const entry of fs.readdirSync(abs, { withFileTypes: true })) {
      const child = `${rel}/${entry.name}`
      const wanted = produced.get(child)
      if (wanted === undefined) {
        if (!OutputTemps.isLiveTemp(entry.name)) removeTree(path.join(abs, entry.name))
        continue
      }
      kept.push(entry.name)
      if (entry.isDirectory() && wanted.type === "directory") todo.push(child)
    }
    // Stat after pruning: a change made during the run (pruning included) leaves the directory racy, and the memo
    // lists it again before trusting it.
    observe.push(Observation.present("d", abs, fs.lstatSync(abs, { bigint: true }), kept.sort().join("/")))
  }
}
