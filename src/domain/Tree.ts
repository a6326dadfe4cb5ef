/**
 * The REAPI `Tree` message: a directory and every directory beneath it, as an `ActionResult` names an output
 * directory. It is hashed (its digest is the `tree_digest`), so it is encoded canonically: the root, then each
 * distinct child once, in the order of their digests.
 */
import * as Either from "effect/Either"
import * as Digest from "./Digest.js"
import * as Directory from "./Directory.js"
import { asBytes, readFields, WireError, Writer } from "./internal/protobuf.js"

export interface Tree {
  readonly root: Directory.Directory
  /** Every directory beneath the root, by the hash of its canonical bytes. */
  readonly children: ReadonlyMap<string, Directory.Directory>
}

/**
 * Canonical bytes of a `Tree`: children deduplicated and ordered by digest, so one tree has one digest.
 */
export const encode = (tree: Tree): Uint8Array => {
  const w = new Writer()
  w.bytesField(1, Directory.encode(tree.root))
  const hashes = [...tree.children.keys()].sort()
  for (const hash of hashes) w.bytesField(2, Directory.encode(tree.children.get(hash)!))
  return w.finish()
}

/**
 * Decodes a `Tree` another client may have written: each directory must be canonical (kiln would give it another
 * digest otherwise), and every directory the root reaches must be among the children.
 */
export const decode = (bytes: Uint8Array): Either.Either<Tree, Directory.InvalidDirectory> => {
  try {
    let root: Directory.Directory | undefined
    const children = new Map<string, Directory.Directory>()
    for (const f of readFields(bytes)) {
      if (f.field !== 1 && f.field !== 2) throw new WireError(`unsupported Tree field ${f.field}`)
      const raw = asBytes(f)
      const dir = Directory.decode(raw)
      if (Either.isLeft(dir)) return Either.left(dir.left)
      if (f.field === 1) root = dir.right
      else children.set(Digest.ofBytes(raw).hash, dir.right)
    }
    const tree: Tree = { root: root ?? Directory.empty, children }
    const unreached = missingChild(tree)
    if (unreached !== undefined) {
      return Either.left(new Directory.InvalidDirectory({ reason: `the tree lacks directory ${unreached}` }))
    }
    return Either.right(tree)
  } catch (e) {
    if (e instanceof WireError) return Either.left(new Directory.InvalidDirectory({ reason: e.message }))
    throw e
  }
}

const missingChild = (tree: Tree): string | undefined => {
  const stack = [tree.root]
  const seen = new Set<string>()
  while (stack.length > 0) {
    for (const d of stack.pop()!.directories) {
      if (Digest.isEmpty(d.digest) || seen.has(d.digest.hash)) continue
      const child = tree.children.get(d.digest.hash)
      if (child === undefined) return Digest.format(d.digest)
      seen.add(d.digest.hash)
      stack.push(child)
    }
  }
  return undefined
}

/**
 * Every file of the tree (each digest once), the empty file left out: what must be present for the tree to be whole.
 */
export const files = (tree: Tree): Array<Digest.Digest> => {
  const out = new Map<string, Digest.Digest>()
  for (const dir of [tree.root, ...tree.children.values()]) {
    for (const f of dir.files) if (f.digest.sizeBytes > 0) out.set(f.digest.hash, f.digest)
  }
  return [...out.values()]
}

/**
 * What a tree holds once expanded, every path that reaches a directory counted: the entries at every level beneath
 * the root (files, directories and symlinks), the sum of their paths' lengths relative to the root, the longest of
 * those paths (each in UTF-8 bytes), and the levels of entries beneath the root (its height: 0 when it is empty).
 */
export interface Size {
  readonly entries: number
  readonly pathBytes: number
  readonly longestPath: number
  readonly height: number
}

const noSize: Size = { entries: 0, pathBytes: 0, longestPath: 0, height: 0 }

/**
 * The expanded {@link Size} of a tree, computed without expanding it: a `Tree` lists each distinct directory once, and
 * a few kilobytes of directories that each name one child twice reach 2^40 paths. Each directory is measured once
 * (children before parents, memoized by digest, without recursion) from its children's sizes: a subdirectory `c`
 * holding `n` entries of `b` path bytes adds itself (1 entry, `|c|` bytes) and its entries, each under `c/`
 * (`n` entries, `n * (|c| + 1) + b` bytes). Counts past 2^53 lose precision but only grow, so a limit still holds.
 */
export const sizeOf = (tree: Tree): Size => {
  const memo = new Map<string, Size>()
  const dirOf = (digest: Digest.Digest) =>
    Digest.isEmpty(digest) ? Directory.empty : tree.children.get(digest.hash) ?? Directory.empty
  const own = (dir: Directory.Directory): Size => {
    let entries = dir.files.length + dir.symlinks.length
    let pathBytes = 0
    let longestPath = 0
    let height = entries > 0 ? 1 : 0
    for (const leaf of [...dir.files, ...dir.symlinks]) {
      const bytes = Directory.utf8Length(leaf.name)
      pathBytes += bytes
      longestPath = Math.max(longestPath, bytes)
    }
    for (const c of dir.directories) {
      const child = memo.get(c.digest.hash)!
      const bytes = Directory.utf8Length(c.name)
      entries += 1 + child.entries
      pathBytes += bytes + child.entries * (bytes + 1) + child.pathBytes
      longestPath = Math.max(longestPath, child.entries > 0 ? bytes + 1 + child.longestPath : bytes)
      height = Math.max(height, 1 + child.height)
    }
    return { entries, pathBytes, longestPath, height }
  }
  // Each directory is pushed unexpanded, then again once all its children are measured.
  const stack: Array<{ dir: Directory.Directory; hash: string | undefined; expanded: boolean }> = [
    { dir: tree.root, hash: undefined, expanded: false }
  ]
  while (stack.length > 0) {
    const top = stack.pop()!
    if (top.expanded) {
      if (top.hash === undefined) return own(top.dir)
      memo.set(top.hash, own(top.dir))
      continue
    }
    if (top.hash !== undefined && memo.has(top.hash)) continue // Reached again by another path.
    stack.push({ ...top, expanded: true })
    for (const c of top.dir.directories) {
      if (!memo.has(c.digest.hash)) stack.push({ dir: dirOf(c.digest), hash: c.digest.hash, expanded: false })
    }
  }
  return noSize
}
