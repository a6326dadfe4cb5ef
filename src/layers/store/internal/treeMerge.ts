/**
 * Lays several trees over each other (a process's own inputs ⊕ its deps' outputs at their workspace paths).
 * Subtrees that only one layer has keep their digest and are never loaded; two layers may agree on an entry, but
 * a path that two layers fill differently is a conflict named by its path.
 *
 * @internal
 */
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Digest from "../../../domain/Digest.js"
import type * as Directory from "../../../domain/Directory.js"
import type { StoreError } from "../../../domain/StoreErrors.js"
import { InputConflict } from "../../../domain/TreeErrors.js"
import * as Core from "./core.js"
import * as Tree from "./tree.js"

/** @internal */
export interface Layer {
  readonly digest: Digest.Digest
  /** Where the layer's root goes, as path segments. */
  readonly at: ReadonlyArray<string>
}

const fileEntry = (f: { readonly digest: Digest.Digest; readonly isExecutable: boolean }) =>
  `${f.isExecutable ? "executable file" : "file"} ${Digest.format(f.digest)}`

/** What a tree node holds at a name, for an {@link InputConflict}. */
const entryAt = (node: Tree.Node, name: string): string => {
  const file = node.files.get(name)
  if (file !== undefined) return fileEntry(file)
  const target = node.symlinks.get(name)
  return target !== undefined ? `symlink -> ${target}` : "a directory"
}

const conflict = (path: string, first: string, second: string) => new InputConflict({ path, first, second })

const load = (core: Core.Core, digest: Digest.Digest) =>
  Effect.flatMap(
    Core.getDirectory(core, digest),
    (o) =>
      Option.isSome(o) ? Effect.succeed(o.value) : Effect.fail(new Digest.MissingDigest({ digest, kind: "directory" }))
  )

const expand = (core: Core.Core, digest: Digest.Digest): Effect.Effect<Tree.Node, StoreError | Digest.MissingDigest> =>
  Effect.map(load(core, digest), (dir) => {
    const node = Tree.node()
    for (const f of dir.files) node.files.set(f.name, { digest: f.digest, isExecutable: f.isExecutable })
    for (const d of dir.directories) node.dirs.set(d.name, d.digest)
    for (const s of dir.symlinks) node.symlinks.set(s.name, s.target)
    return node
  })

/**
 * Merges the directory `digest` into `node` (at `prefix`), depth first as a recursive walk would (each directory's
 * files and symlinks, then its directories in order, each merged whole before the next), with an explicit stack: a
 * tree may be as deep as a remote made it.
 */
const mergeInto = (
  core: Core.Core,
  node: Tree.Node,
  digest: Digest.Digest,
  prefix: string
): Effect.Effect<void, StoreError | Digest.MissingDigest | InputConflict> =>
  Effect.gen(function*() {
    const stack: Array<{ node: Tree.Node; dir: Directory.Directory; prefix: string; i: number }> = [
      { node, dir: yield* mergeFlat(core, node, digest, prefix), prefix, i: 0 }
    ]
    while (stack.length > 0) {
      const top = stack[stack.length - 1]!
      if (top.i >= top.dir.directories.length) {
        stack.pop()
        continue
      }
      const d = top.dir.directories[top.i++]!
      const at = top.prefix === "" ? d.name : `${top.prefix}/${d.name}`
      if (top.node.files.has(d.name) || top.node.symlinks.has(d.name)) {
        return yield* conflict(at, entryAt(top.node, d.name), "a directory")
      }
      const existing = top.node.dirs.get(d.name)
      if (existing === undefined) {
        top.node.dirs.set(d.name, d.digest)
        continue
      }
      if (!("dirs" in existing) && Digest.equals(existing, d.digest)) continue
      const child = "dirs" in existing ? existing : yield* expand(core, existing)
      top.node.dirs.set(d.name, child)
      stack.push({ node: child, dir: yield* mergeFlat(core, child, d.digest, at), prefix: at, i: 0 })
    }
  })

/** Merges the files and symlinks of the directory `digest` into `node`; says the directory, for its directories. */
const mergeFlat = (
  core: Core.Core,
  node: Tree.Node,
  digest: Digest.Digest,
  prefix: string
): Effect.Effect<Directory.Directory, StoreError | Digest.MissingDigest | InputConflict> =>
  Effect.gen(function*() {
    const dir = yield* load(core, digest)
    const at = (name: string) => prefix === "" ? name : `${prefix}/${name}`
    for (const f of dir.files) {
      const existing = node.files.get(f.name)
      if (existing !== undefined) {
        if (!Digest.equals(existing.digest, f.digest) || existing.isExecutable !== f.isExecutable) {
          return yield* conflict(at(f.name), fileEntry(existing), fileEntry(f))
        }
        continue
      }
      if (node.dirs.has(f.name) || node.symlinks.has(f.name)) {
        return yield* conflict(at(f.name), entryAt(node, f.name), fileEntry(f))
      }
      node.files.set(f.name, { digest: f.digest, isExecutable: f.isExecutable })
    }
    for (const s of dir.symlinks) {
      const existing = node.symlinks.get(s.name)
      if (existing !== undefined) {
        if (existing !== s.target) {
          return yield* conflict(at(s.name), `symlink -> ${existing}`, `symlink -> ${s.target}`)
        }
        continue
      }
      if (node.dirs.has(s.name) || node.files.has(s.name)) {
        return yield* conflict(at(s.name), entryAt(node, s.name), `symlink -> ${s.target}`)
      }
      node.symlinks.set(s.name, s.target)
    }
    return dir
  })

/**
 * The merged tree's root digest. With `rewrite`, the directories the merge makes are written even when the store
 * shows them present: the engine re-makes a merged input root that turned out missing.
 *
 * @internal
 */
export const merge = (
  core: Core.Core,
  layers: ReadonlyArray<Layer>,
  rewrite = false,
  finish: (root: Tree.Node) => Effect.Effect<Digest.Digest, StoreError> = (root) => Tree.finish(core, root, rewrite)
): Effect.Effect<Digest.Digest, StoreError | Digest.MissingDigest | InputConflict> =>
  Effect.gen(function*() {
    const nonEmpty = layers.filter((l) => !Digest.isEmpty(l.digest))
    if (nonEmpty.length === 0) return Digest.empty
    if (nonEmpty.length === 1 && nonEmpty[0]!.at.length === 0) return nonEmpty[0]!.digest
    const root = Tree.node()
    for (const layer of nonEmpty) {
      let node = root
      for (let i = 0; i < layer.at.length; i++) {
        const name = layer.at[i]!
        if (node.files.has(name) || node.symlinks.has(name)) {
          return yield* conflict(layer.at.slice(0, i + 1).join("/"), entryAt(node, name), "a directory")
        }
        const existing = node.dirs.get(name)
        const next = existing === undefined
          ? Tree.node()
          : "dirs" in existing
          ? existing
          : yield* expand(core, existing)
        node.dirs.set(name, next)
        node = next
      }
      yield* mergeInto(core, node, layer.digest, layer.at.join("/"))
    }
    return yield* finish(root)
  })
