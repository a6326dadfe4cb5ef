/**
 * Captures the declared outputs of a finished process into the store. Outputs that were not created are left out;
 * symlinks stay symlinks; a declared file that turned out to be a directory (or the reverse) is an error naming it.
 *
 * @internal
 */
import * as Effect from "effect/Effect"
import * as fs from "node:fs"
import * as path from "node:path"
import type * as Digest from "../../domain/Digest.js"
import { StoreError } from "../../domain/StoreErrors.js"
import type * as Core from "./core.js"
import * as Snapshot from "./snapshot.js"
import * as Tree from "./tree.js"

/** @internal */
export interface Outputs {
  readonly outputFiles: ReadonlyArray<string>
  readonly outputDirectories: ReadonlyArray<string>
}

/**
 * Splits a declared output path into segments, refusing absolute paths and `..`: outputs live inside the sandbox.
 *
 * @internal
 */
export const segmentsOf = (declared: string): Array<string> | undefined => {
  if (declared.startsWith("/")) return undefined
  const normal = path.posix.normalize(declared.replace(/\/+$/, ""))
  if (normal === "." || normal === "") return []
  const segments = normal.split("/")
  return segments.includes("..") ? undefined : segments
}

/**
 * Refuses a declared output whose parent directories pass through a symlink: capture would read whatever it points
 * at (`ln -s /etc out` and an output `out/hostname` would capture the host's file).
 */
const throughSymlink = (root: string, segments: ReadonlyArray<string>, declared: string) =>
  Effect.suspend(() => {
    let p = root
    for (const s of segments.slice(0, -1)) {
      p = path.join(p, s)
      let st: fs.Stats
      try {
        st = fs.lstatSync(p)
      } catch {
        return Effect.void
      }
      if (st.isSymbolicLink()) {
        return Effect.fail(
          new StoreError({ reason: "Unsupported", detail: `output \`${declared}\` goes through a symlink`, path: p })
        )
      }
    }
    return Effect.void
  })

/**
 * Refuses an output the process made as the other kind (a directory where a file is declared, or the reverse),
 * naming it as declared: the sandbox path is gone by the time anyone reads the error.
 */
const sameKind = (abs: string, declared: string, expect: "file" | "directory") =>
  Effect.suspend(() => {
    let st: fs.Stats
    try {
      st = fs.lstatSync(abs)
    } catch {
      return Effect.void // Not made: left out. (Any other trouble, readEntry reports.)
    }
    if (st.isSymbolicLink() || (expect === "file" ? st.isFile() : st.isDirectory())) return Effect.void
    const detail = expect === "directory"
      ? `output \`${declared}/\` is declared as a directory, but the process made a file there`
      : st.isDirectory()
      ? `output \`${declared}\` is declared as a file, but the process made a directory there (declare ` +
        `\`${declared}/\` to capture a directory)`
      : `output \`${declared}\` is declared as a file, but the process made a socket, FIFO or device there`
    return Effect.fail(new StoreError({ reason: "Unsupported", detail }))
  })

const graft = (tree: Tree.Node, parents: ReadonlyArray<string>, holder: Tree.Node, declared: string, root: string) => {
  const parent = Tree.dirAt(tree, parents)
  if (parent === undefined) {
    return Effect.fail(
      new StoreError({
        reason: "Unsupported",
        detail: `output \`${declared}\` lies under another output that is not a directory`,
        path: root
      })
    )
  }
  for (const [k, v] of holder.files) parent.files.set(k, v)
  for (const [k, v] of holder.dirs) parent.dirs.set(k, v)
  for (const [k, v] of holder.symlinks) parent.symlinks.set(k, v)
  return Effect.void
}

/**
 * Captures the declared outputs under `root` into a tree, and stores `blobs` with them (in the same commits): says
 * the tree's digest and the blobs'. `read` collects each file captured, with its digest.
 *
 * @internal
 */
export const captureWith = (
  core: Core.Core,
  root: string,
  outputs: Outputs,
  blobs: ReadonlyArray<Uint8Array>,
  read?: Array<readonly [string, Digest.Digest]>
): Effect.Effect<readonly [Digest.Digest, Array<Digest.Digest>], StoreError> =>
  Effect.gen(function*() {
    const w = Snapshot.newWalk(core, read)
    const stored = yield* Snapshot.addBlobs(w, blobs)
    const tree = Tree.node()
    const parse = (declared: string) => {
      const segments = segmentsOf(declared)
      return segments === undefined
        ? Effect.fail(
          new StoreError({
            reason: "Unsupported",
            detail: `output path \`${declared}\` escapes the sandbox`,
            path: root
          })
        )
        : Effect.succeed(segments)
    }
    const dirs = [...outputs.outputDirectories].sort((a, b) => a.length - b.length)
    const captured: Array<string> = []
    const covered = (segments: ReadonlyArray<string>) => {
      const p = segments.join("/")
      return captured.some((d) => d === "" || p === d || p.startsWith(`${d}/`))
    }
    for (const declared of dirs) {
      const segments = yield* parse(declared)
      yield* throughSymlink(root, segments, declared)
      if (covered(segments)) continue
      if (segments.length === 0) {
        yield* Snapshot.readDirectoryInto(w, root, tree)
        captured.push("")
        continue
      }
      const holder = Tree.node()
      const name = segments[segments.length - 1]!
      yield* sameKind(path.join(root, ...segments), declared, "directory")
      if (yield* Snapshot.readEntry(w, path.join(root, ...segments), holder, name, "directory")) {
        yield* graft(tree, segments.slice(0, -1), holder, declared, root)
        captured.push(segments.join("/"))
      }
    }
    for (const declared of outputs.outputFiles) {
      const segments = yield* parse(declared)
      yield* throughSymlink(root, segments, declared)
      if (segments.length === 0) {
        return yield* new StoreError({ reason: "Unsupported", detail: "an output file path is empty", path: root })
      }
      if (covered(segments)) continue
      const holder = Tree.node()
      const name = segments[segments.length - 1]!
      yield* sameKind(path.join(root, ...segments), declared, "file")
      if (yield* Snapshot.readEntry(w, path.join(root, ...segments), holder, name, "file")) {
        yield* graft(tree, segments.slice(0, -1), holder, declared, root)
      }
    }
    return [yield* Snapshot.flushAndFinish(w, tree), stored] as const
  })

/** @internal */
export const capture = (core: Core.Core, root: string, outputs: Outputs): Effect.Effect<Digest.Digest, StoreError> =>
  Effect.map(captureWith(core, root, outputs, []), ([digest]) => digest)
