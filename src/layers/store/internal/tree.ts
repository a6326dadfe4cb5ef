/**
 * A mutable in-memory tree used while a directory is read from disk (snapshot, capture): entries are added by
 * path, then {@link finish} encodes every `Directory` bottom-up and stores them in one batch.
 *
 * @internal
 */
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Digest from "../../../domain/Digest.js"
import * as Directory from "../../../domain/Directory.js"
import { StoreError } from "../../../domain/StoreErrors.js"
import type { TreeEntry } from "../Store.js"
import * as Core from "./core.js"
import * as Sharded from "./lmdb/shards.js"

/** @internal */
export interface Node {
  readonly files: Map<string, { readonly digest: Digest.Digest; readonly isExecutable: boolean }>
  readonly dirs: Map<string, Node | Digest.Digest>
  readonly symlinks: Map<string, string>
}

/** @internal */
export const node = (): Node => ({ files: new Map(), dirs: new Map(), symlinks: new Map() })

/** @internal */
export const isEmpty = (n: Node): boolean => n.files.size === 0 && n.dirs.size === 0 && n.symlinks.size === 0

/** @internal */
export const has = (n: Node, name: string): boolean => n.files.has(name) || n.dirs.has(name) || n.symlinks.has(name)

/**
 * The node for the directory at `path` (segments), creating missing parents. Undefined when a segment is already
 * taken by a file, a symlink or a directory known only by digest.
 *
 * @internal
 */
export const dirAt = (root: Node, segments: ReadonlyArray<string>): Node | undefined => {
  let current = root
  for (const name of segments) {
    const child = current.dirs.get(name)
    if (child === undefined) {
      if (current.files.has(name) || current.symlinks.has(name)) return undefined
      const created = node()
      current.dirs.set(name, created)
      current = created
    } else if ("dirs" in child) {
      current = child
    } else {
      return undefined
    }
  }
  return current
}

/** A tree's directories encoded: the root's digest, and what to store. @internal */
export interface Encoded {
  readonly digest: Digest.Digest
  readonly pending: Array<Sharded.Entry>
  readonly made: Array<[Digest.Digest, Directory.Directory]>
  /** Each node encoded, with its digest (when encoding against `Known`). */
  readonly nodes: ReadonlyArray<[Node, Digest.Digest]>
}

/**
 * Encodes every directory of the tree (plain code; nothing is stored).
 *
 * @internal
 */
export const encode = (root: Node, known?: Known): Either.Either<Encoded, StoreError> => {
  const pending: Array<Sharded.Entry> = []
  const made: Array<[Digest.Digest, Directory.Directory]> = []
  const nodes: Array<[Node, Digest.Digest]> = []
  // Children before parents, with an explicit stack: a tree may be as deep as what a process or a remote made.
  const done = new Map<Node, Digest.Digest>()
  const digestOf = (n: Node) => known?.stored.get(n) ?? known?.pending.get(n) ?? done.get(n)
  const stack: Array<{ node: Node; expanded: boolean }> = [{ node: root, expanded: false }]
  while (stack.length > 0) {
    const top = stack.pop()!
    const n = top.node
    if (digestOf(n) !== undefined) continue
    if (!top.expanded) {
      stack.push({ node: n, expanded: true })
      const children = [...n.dirs.values()]
      // Reversed, so that children are encoded in name order, as a recursive walk would.
      for (let i = children.length - 1; i >= 0; i--) {
        const child = children[i]!
        if ("dirs" in child && digestOf(child) === undefined) stack.push({ node: child, expanded: false })
      }
      continue
    }
    const directories: Array<Directory.DirectoryNode> = []
    for (const [name, child] of n.dirs) directories.push({ name, digest: "dirs" in child ? digestOf(child)! : child })
    const result = Directory.make({
      files: Array.from(n.files, ([name, f]) => ({ name, digest: f.digest, isExecutable: f.isExecutable })),
      directories,
      symlinks: Array.from(n.symlinks, ([name, target]) => ({ name, target }))
    })
    if (Either.isLeft(result)) {
      return Either.left(new StoreError({ reason: "Unsupported", detail: result.left.message }))
    }
    const value = Directory.encode(result.right)
    const digest = Digest.ofBytes(value)
    if (value.length > 0) {
      pending.push({ hash: digest.hash, value })
      made.push([digest, result.right])
    }
    if (known !== undefined) nodes.push([n, digest])
    done.set(n, digest)
  }
  const digest = digestOf(root)!
  // Nodes shared by several trees of one batch (a whole directory taken by many snapshots) are encoded once.
  for (const [n, d] of nodes) known!.pending.set(n, d)
  return Either.right({ digest, pending, made, nodes })
}

/**
 * Nodes encoded already: `stored` (in the store, for the rest of a session) and `pending` (their directories are in
 * a batch about to be stored with the tree being encoded).
 *
 * @internal
 */
export interface Known {
  readonly stored: WeakMap<Node, Digest.Digest>
  readonly pending: Map<Node, Digest.Digest>
}

/**
 * Keeps the decoded directories just stored: listing the tree next (the engine does, for every input tree) then
 * needs no decoding.
 *
 * @internal
 */
export const remember = (core: Core.Core, encoded: Encoded): void =>
  encoded.made.forEach(([d, dir]) => Core.rememberDirectory(core, d, dir))

/**
 * {@link finish} without waiting for the commit: the tree's directories are remembered at once, and are present to
 * this process (see `Core.committing`) while the effect `write` is given commits them; says the root digest.
 *
 * @internal
 */
export const finishBehind = (
  core: Core.Core,
  root: Node,
  write: (commit: Effect.Effect<void, StoreError>) => Effect.Effect<void>
): Effect.Effect<Digest.Digest, StoreError> =>
  Effect.suspend(() => {
    const encoded = encode(root)
    if (Either.isLeft(encoded)) return Effect.fail(encoded.left)
    const { digest, pending } = encoded.right
    if (pending.length === 0) return Effect.succeed(digest)
    remember(core, encoded.right)
    for (const e of pending) core.committing.set(e.hash, (core.committing.get(e.hash) ?? 0) + 1)
    const landed = Effect.sync(() => {
      for (const e of pending) {
        const n = (core.committing.get(e.hash) ?? 1) - 1
        if (n <= 0) core.committing.delete(e.hash)
        else core.committing.set(e.hash, n)
      }
    })
    return Effect.as(
      write(Effect.ensuring(
        Sharded.putBatch(core.directories, pending, Core.leaseUntil(core), core.leaseTimeMs),
        landed
      )),
      digest
    )
  })

/**
 * Encodes and stores every directory of the tree; returns the root digest. With `rewrite`, every directory is written
 * even when the store shows it present (see {@link Sharded.putBatch}'s `overwrite`).
 *
 * @internal
 */
export const finish = (core: Core.Core, root: Node, rewrite = false): Effect.Effect<Digest.Digest, StoreError> =>
  Effect.suspend(() => {
    const encoded = encode(root)
    if (Either.isLeft(encoded)) return Effect.fail(encoded.left)
    const { digest, pending } = encoded.right
    return Effect.as(
      pending.length === 0
        ? Effect.void
        : Effect.zipRight(
          Sharded.putBatch(core.directories, pending, Core.leaseUntil(core), core.leaseTimeMs, rewrite),
          Effect.sync(() => remember(core, encoded.right))
        ),
      digest
    )
  })

/** A tree's entries, depth first in name order, from its directories by path (`Store.listTree`). @internal */
export const entriesOf = (dirs: ReadonlyMap<string, Directory.Directory>): Array<TreeEntry> => {
  type Named =
    | { readonly name: string; readonly f: Directory.FileNode }
    | { readonly name: string; readonly d: Directory.DirectoryNode }
    | { readonly name: string; readonly s: Directory.SymlinkNode }
  const sorted = (dir: Directory.Directory): Array<Named> =>
    [
      ...dir.files.map((f) => ({ name: f.name, f })),
      ...dir.directories.map((d) => ({ name: d.name, d })),
      ...dir.symlinks.map((s) => ({ name: s.name, s }))
    ].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0))
  const out: Array<TreeEntry> = []
  // An explicit stack of the directories being listed: a tree may be as deep as a remote made it.
  const stack: Array<{ prefix: string; names: Array<Named>; i: number }> = [
    { prefix: "", names: sorted(dirs.get("")!), i: 0 }
  ]
  while (stack.length > 0) {
    const top = stack[stack.length - 1]!
    if (top.i >= top.names.length) {
      stack.pop()
      continue
    }
    const n = top.names[top.i++]!
    const path = top.prefix === "" ? n.name : `${top.prefix}/${n.name}`
    if ("f" in n) {
      out.push({ path, type: "file", digest: n.f.digest, isExecutable: n.f.isExecutable })
    } else if ("d" in n) {
      out.push({ path, type: "directory", digest: n.d.digest })
      stack.push({ prefix: path, names: sorted(dirs.get(path)!), i: 0 })
    } else {
      out.push({ path, type: "symlink", target: n.s.target })
    }
  }
  return out
}
