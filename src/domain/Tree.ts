/**
 * The REAPI `Tree` message: a directory and every directory beneath it, as an `ActionResult` names an output
 * directory. It is hashed (its digest is the `tree_digest`), so it is encoded canonically: the root, then each
 * distinct child once, in the order of their digests.
 *
 * @since 0.1.0
 */
import * as Either from "effect/Either"
import * as Digest from "./Digest.js"
import * as Directory from "./Directory.js"
import { asBytes, readFields, WireError, Writer } from "./internal/protobuf.js"

/**
 * @since 0.1.0
 * @category models
 */
export interface Tree {
  readonly root: Directory.Directory
  /** Every directory beneath the root, by the hash of its canonical bytes. */
  readonly children: ReadonlyMap<string, Directory.Directory>
}

/**
 * Canonical bytes of a `Tree`: children deduplicated and ordered by digest, so one tree has one digest.
 *
 * @since 0.1.0
 * @category encoding
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
 *
 * @since 0.1.0
 * @category encoding
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
 *
 * @since 0.1.0
 * @category accessors
 */
export const files = (tree: Tree): Array<Digest.Digest> => {
  const out = new Map<string, Digest.Digest>()
  for (const dir of [tree.root, ...tree.children.values()]) {
    for (const f of dir.files) if (f.digest.sizeBytes > 0) out.set(f.digest.hash, f.digest)
  }
  return [...out.values()]
}
