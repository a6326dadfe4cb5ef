/**
 * Writes a tree from the store onto disk. Small files are written from LMDB; large ones are hard-linked from the
 * store's read-only copy when they may be (same file system, not executable, not under a mutable path) and copied
 * otherwise. Materializing over an existing tree is idempotent: whatever stands where an entry goes is replaced.
 *
 * @internal
 */
import * as Effect from "effect/Effect"
import * as fs from "node:fs"
import * as path from "node:path"
import * as Digest from "../../../domain/Digest.js"
import type * as Directory from "../../../domain/Directory.js"
import { StoreError } from "../../../domain/StoreErrors.js"
import { describeErrno, errnoOf } from "../../../os/Errno.js"
import * as EventLoop from "../../../os/EventLoop.js"
import { ioError } from "../../../os/IoError.js"
import { mkdirp } from "../../../os/Mkdirp.js"
import { removeTree } from "../../../os/RemoveTree.js"
import { writeAll } from "../../../os/WriteAll.js"
import type { MaterializeOptions } from "../Store.js"
import * as Core from "./core.js"
import * as LargeFiles from "./largeFiles.js"
import * as Refill from "./refill.js"
import * as TreeBlobs from "./treeBlobs.js"

const fileMode = (isExecutable: boolean) => isExecutable ? 0o755 : 0o644

const ensureDir = (p: string) => {
  try {
    fs.mkdirSync(p)
  } catch (e) {
    if (errnoOf(e) !== "EEXIST") throw e
    const st = fs.lstatSync(p)
    if (!st.isDirectory()) {
      removeTree(p)
      fs.mkdirSync(p)
    } else if ((st.mode & 0o700) !== 0o700) {
      fs.chmodSync(p, (st.mode & 0o7777) | 0o700)
    }
  }
}

const clearFor = (p: string) => {
  const st = fs.lstatSync(p)
  if (st.isDirectory()) removeTree(p)
  else fs.unlinkSync(p)
}

const writeFile = (p: string, bytes: Uint8Array, mode: number) => {
  let fd: number
  try {
    fd = fs.openSync(p, "wx", mode)
  } catch (e) {
    if (errnoOf(e) !== "EEXIST") throw e
    clearFor(p)
    fd = fs.openSync(p, "wx", mode)
  }
  try {
    writeAll(fd, bytes)
  } finally {
    fs.closeSync(fd)
  }
}

const linkOrCopy = (source: string, p: string, mode: number, link: { allowed: boolean }) => {
  if (link.allowed) {
    try {
      fs.linkSync(source, p)
      return
    } catch (e) {
      const code = errnoOf(e)
      if (code === "EEXIST") {
        clearFor(p)
        return linkOrCopy(source, p, mode, link)
      }
      if (code !== "EXDEV" && code !== "EPERM" && code !== "EMLINK") throw e
      link.allowed = false
    }
  }
  try {
    fs.copyFileSync(source, p, fs.constants.COPYFILE_EXCL)
  } catch (e) {
    if (errnoOf(e) !== "EEXIST") throw e
    clearFor(p)
    fs.copyFileSync(source, p, fs.constants.COPYFILE_EXCL)
  }
  fs.chmodSync(p, mode)
}

const writeSymlink = (target: string, p: string) => {
  try {
    fs.symlinkSync(target, p)
  } catch (e) {
    if (errnoOf(e) !== "EEXIST") throw e
    const st = fs.lstatSync(p)
    if (st.isSymbolicLink() && fs.readlinkSync(p) === target) return
    clearFor(p)
    fs.symlinkSync(target, p)
  }
}

const isMutable = (mutable: ReadonlyArray<string>, rel: string) =>
  mutable.some((m) => m === "" || m === rel || rel.startsWith(`${m}/`))

/** Hard-links or copies a large file from the store's copy to `p`; MissingDigest when the store's copy is gone. */
const writeLarge = (
  core: Core.Core,
  mutable: ReadonlyArray<string>,
  link: { allowed: boolean }
): Refill.WriteLarge =>
(p, rel, f) =>
  Effect.flatMap(
    Effect.zipRight(
      // A file a snapshot of this process left in the workspace is stored first (see `workspaceSources.ts`).
      LargeFiles.statSize(core.large, f.digest.hash) === f.digest.sizeBytes
        ? Effect.void
        : TreeBlobs.fillFromSources(core, [f.digest]),
      Effect.try({
        try: () => {
          if (LargeFiles.statSize(core.large, f.digest.hash) !== f.digest.sizeBytes) return false
          const canLink = !f.isExecutable && !isMutable(mutable, rel)
          try {
            linkOrCopy(
              LargeFiles.pathOf(core.large, f.digest.hash),
              p,
              fileMode(f.isExecutable),
              canLink ? link : {
                allowed: false
              }
            )
          } catch (e) {
            // Collected between the stat and the link: missing, which backtracking can repair.
            if (errnoOf(e) === "ENOENT" && LargeFiles.statSize(core.large, f.digest.hash) === undefined) return false
            throw e
          }
          return true
        },
        catch: ioError(p, "cannot materialize")
      })
    ),
    (ok) => ok ? Effect.void : Effect.fail(new Digest.MissingDigest({ digest: f.digest, kind: "file" }))
  )

/** @internal */
export const materialize = (
  core: Core.Core,
  digest: Digest.Digest,
  destination: string,
  options: MaterializeOptions = {}
): Effect.Effect<void, Digest.MissingDigest | StoreError> =>
  Effect.gen(function*() {
    const dirs: Array<[string, Directory.Directory]> = []
    yield* Core.walkTree(core, digest, (rel, dir) => dirs.push([rel, dir]))
    const dest = path.resolve(destination)
    const mutable = (options.mutablePaths ?? []).map((m) => path.posix.normalize(m).replace(/\/+$/, "")).map((m) =>
      m === "." ? "" : m
    )
    const link = { allowed: true }
    const large = writeLarge(core, mutable, link)
    if (options.createDestination === false) {
      if (!fs.existsSync(dest)) {
        return yield* new StoreError({
          reason: "Io",
          detail: "the destination is gone (its sandbox was removed)",
          path: dest
        })
      }
    } else {
      yield* Effect.try({ try: () => mkdirp(dest), catch: ioError(dest, "cannot create") })
    }
    if (options.reuse === true) {
      const refilled = yield* Refill.refill(core, dirs, dest, options.keepDirs ?? [], large).pipe(
        Effect.as(true),
        Effect.catchTag("Unusable", (u) =>
          Effect.zipRight(
            Effect.logDebug(`cannot reuse what ${dest} holds (${describeErrno(u.cause)}): writing it afresh`),
            Effect.try({ try: () => Refill.empty(dest), catch: ioError(dest, "cannot empty") })
          ).pipe(Effect.as(false)))
      )
      if (refilled) return
    }
    const pace = EventLoop.pacer()
    for (const [rel, dir] of dirs) {
      yield* pace
      // Names of a validated tree joined with "/" (path.join's normalizing of each made a fill's garbage).
      const abs = rel === "" ? dest : dest.endsWith("/") ? dest + rel : `${dest}/${rel}`
      const under = abs.endsWith("/") ? abs : `${abs}/`
      for (const d of dir.directories) {
        const p = under + d.name
        yield* Effect.try({ try: () => ensureDir(p), catch: ioError(p, "cannot create directory") })
      }
      for (const f of dir.files) {
        const p = under + f.name
        if (f.digest.sizeBytes >= LargeFiles.THRESHOLD) {
          yield* large(p, rel === "" ? f.name : `${rel}/${f.name}`, f)
          continue
        }
        const mode = fileMode(f.isExecutable)
        // The bytes are a view that dies with the callback, so the write happens inside it and its error is
        // carried out as a value (a throw there would read as an LMDB failure).
        const written = yield* Core.withFile(core, f.digest, (bytes): boolean | { error: unknown } => {
          if (bytes === undefined) return false
          try {
            writeFile(p, bytes, mode)
            return true
          } catch (error) {
            return { error }
          }
        })
        if (typeof written === "object") return yield* Effect.fail(ioError(p, "cannot write")(written.error))
        if (!written) return yield* new Digest.MissingDigest({ digest: f.digest, kind: "file" })
      }
      for (const s of dir.symlinks) {
        const p = under + s.name
        yield* Effect.try({ try: () => writeSymlink(s.target, p), catch: ioError(p, "cannot create symlink") })
      }
    }
  })
