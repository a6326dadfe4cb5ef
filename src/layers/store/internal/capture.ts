/**
 * Captures the declared outputs of a finished process into the store. Outputs that were not created are left out;
 * symlinks stay symlinks; a declared file that turned out to be a directory (or the reverse) is an error naming it.
 *
 * @internal
 */
import * as Effect from "effect/Effect"
import * as fs from "node:fs"
import * as path from "node:path"
import type * as Digest from "../../../domain/Digest.js"
import * as Directory from "../../../domain/Directory.js"
import { outputSegments as segmentsOf } from "../../../domain/Process.js"
import type { StoreError } from "../../../domain/StoreErrors.js"
import { InvalidOutput } from "../../../domain/TreeErrors.js"
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
    if (expect === "directory" && st.isSymbolicLink()) {
      // Write-back would otherwise list and prune the link's target as if it were the directory.
      let target = ""
      try {
        target = ` (to \`${fs.readlinkSync(abs)}\`)`
      } catch {
        // Gone meanwhile: named without its target.
      }
      return Effect.fail(
        new InvalidOutput({
          output: `${declared.replace(/\/+$/, "")}/`,
          problem: `is declared as a directory, but the process made a symlink there${target}`
        })
      )
    }
    if (st.isSymbolicLink() || (expect === "file" ? st.isFile() : st.isDirectory())) return Effect.void
    return Effect.fail(wrongKind(declared, expect, st))
  })

/**
 * Refuses a captured tree that holds a path deeper than `Directory.MAX_DEPTH`, or (unless the process allows `any`)
 * a symlink that could lead out of the working directory (`Directory.escapingTargetReason`). Iterative: the tree is
 * what the process made.
 *
 * @internal
 */
export const checkCaptured = (tree: Tree.Node, policy: Directory.SymlinkPolicy): InvalidOutput | undefined => {
  const stack: Array<{ node: Tree.Node; path: string; depth: number }> = [{ node: tree, path: "", depth: 0 }]
  while (stack.length > 0) {
    const { depth, node, path: at } = stack.pop()!
    const join = (name: string) => (at === "" ? name : `${at}/${name}`)
    if (depth >= Directory.MAX_DEPTH && !Tree.isEmpty(node)) {
      return new InvalidOutput({
        output: at,
        problem: `holds entries deeper than ${Directory.MAX_DEPTH} levels below the working directory`
      })
    }
    if (policy !== "any") {
      for (const [name, target] of node.symlinks) {
        const why = Directory.escapingTargetReason(target, depth)
        if (why !== undefined) return escaping(join(name), target, why)
      }
    }
    for (const [name, child] of node.dirs) {
      // A directory known only by digest was stored by an earlier walk; capture's own walk makes none.
      if ("dirs" in child) stack.push({ node: child, path: join(name), depth: depth + 1 })
    }
  }
  return undefined
}

/** An output symlink whose target leaves the working directory, named with what allows it. */
const escaping = (output: string, target: string, why: string) =>
  new InvalidOutput({
    output,
    problem: `is a symlink to \`${target}\`, which leads out of the working directory (${why}); ` +
      `\`"outputSymlinks": "any"\` in kiln.json allows it`
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
    const refused = checkCaptured(tree, outputs.outputSymlinks ?? "contained")
    if (refused !== undefined) {
      return yield* refused
    }
    return { tree: yield* Snapshot.flushAndFinish(w, tree), blobs: stored, files }
  })
