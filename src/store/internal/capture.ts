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
import { outputSegments as segmentsOf } from "../../domain/Process.js"
import type { StoreError } from "../../domain/StoreErrors.js"
import { InvalidOutput } from "../../domain/TreeErrors.js"
import type { Captured, Outputs } from "../Store.js"
import type * as Core from "./core.js"
import * as Snapshot from "./snapshot.js"
import * as Tree from "./tree.js"

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
        const through = path.relative(root, p)
        return Effect.fail(new InvalidOutput({ output: declared, problem: `goes through a symlink (\`${through}\`)` }))
      }
    }
    return Effect.void
  })

/**
 * The output the process made as the other kind (a directory where a file is declared, or the reverse), named as
 * declared: the sandbox path is gone by the time anyone reads the error.
 *
 * @internal
 */
export const wrongKind = (declared: string, expect: "file" | "directory", st: fs.Stats): InvalidOutput =>
  new InvalidOutput({
    output: expect === "directory" ? `${declared}/` : declared,
    problem: expect === "directory"
      ? "is declared as a directory, but the process made a file there"
      : st.isDirectory()
      ? `is declared as a file, but the process made a directory there (declare \`${declared}/\` to capture a directory)`
      : "is declared as a file, but the process made a socket, FIFO or device there"
  })

/** Refuses an output the process made as the other kind (see {@link wrongKind}). */
const sameKind = (abs: string, declared: string, expect: "file" | "directory") =>
  Effect.suspend(() => {
    let st: fs.Stats
    try {
      st = fs.lstatSync(abs)
    } catch {
      return Effect.void // Not made: left out. (Any other trouble, readEntry reports.)
    }
    if (st.isSymbolicLink() || (expect === "file" ? st.isFile() : st.isDirectory())) return Effect.void
    return Effect.fail(wrongKind(declared, expect, st))
  })

const graft = (tree: Tree.Node, parents: ReadonlyArray<string>, holder: Tree.Node, declared: string) => {
  const parent = Tree.dirAt(tree, parents)
  if (parent === undefined) {
    return Effect.fail(
      new InvalidOutput({ output: declared, problem: "lies under another output that is not a directory" })
    )
  }
  for (const [k, v] of holder.files) parent.files.set(k, v)
  for (const [k, v] of holder.dirs) parent.dirs.set(k, v)
  for (const [k, v] of holder.symlinks) parent.symlinks.set(k, v)
  return Effect.void
}

/**
 * Captures the declared outputs under `root` into a tree, and stores `blobs` with them (in the same commits): says
 * the tree's digest, the blobs' and each file captured with its digest.
 *
 * @internal
 */
export const capture = (
  core: Core.Core,
  root: string,
  outputs: Outputs,
  blobs: ReadonlyArray<Uint8Array> = []
): Effect.Effect<Captured, StoreError | InvalidOutput> =>
  Effect.gen(function*() {
    const files: Array<readonly [string, Digest.Digest]> = []
    const w = Snapshot.newWalk(core, files)
    const stored = yield* Snapshot.addBlobs(w, blobs)
    const tree = Tree.node()
    const parse = (declared: string) => {
      const segments = segmentsOf(declared)
      return segments === undefined
        ? Effect.fail(new InvalidOutput({ output: declared, problem: "escapes the sandbox" }))
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
      if (
        yield* Snapshot.readEntry(
          w,
          path.join(root, ...segments),
          holder,
          name,
          "directory",
          (st) => wrongKind(declared, "directory", st)
        )
      ) {
        yield* graft(tree, segments.slice(0, -1), holder, declared)
        captured.push(segments.join("/"))
      }
    }
    for (const declared of outputs.outputFiles) {
      const segments = yield* parse(declared)
      yield* throughSymlink(root, segments, declared)
      if (segments.length === 0) {
        return yield* new InvalidOutput({ output: declared, problem: "is empty: an output file needs a path" })
      }
      if (covered(segments)) continue
      const holder = Tree.node()
      const name = segments[segments.length - 1]!
      yield* sameKind(path.join(root, ...segments), declared, "file")
      if (
        yield* Snapshot.readEntry(w, path.join(root, ...segments), holder, name, "file", (st) =>
          wrongKind(declared, "file", st))
      ) {
        yield* graft(tree, segments.slice(0, -1), holder, declared)
      }
    }
    return { tree: yield* Snapshot.flushAndFinish(w, tree), blobs: stored, files }
  })
