/**
 * The REAPI v2 `Directory` message and its canonical encoding. A tree's digest is the digest of its root
 * `Directory`'s canonical bytes, so kiln's tree digests equal Bazel's and Pants's for the same tree.
 *
 * @since 0.1.0
 */
import * as Either from "effect/Either"
import * as Schema from "effect/Schema"
import * as Digest from "./Digest.js"
import {
  asBytes,
  asString,
  asVarint,
  bytesEqual,
  compareUtf8,
  readFields,
  WireError,
  writeDigest,
  Writer
} from "./internal/protobuf.js"

/**
 * @since 0.1.0
 * @category models
 */
export interface FileNode {
  readonly name: string
  readonly digest: Digest.Digest
  readonly isExecutable: boolean
}

/**
 * @since 0.1.0
 * @category models
 */
export interface DirectoryNode {
  readonly name: string
  readonly digest: Digest.Digest
}

/**
 * @since 0.1.0
 * @category models
 */
export interface SymlinkNode {
  readonly name: string
  readonly target: string
}

/**
 * A canonical directory: each list sorted by name in UTF-8 byte order, names valid and unique across all three.
 * Build one with {@link make}; {@link decode} returns only canonical ones.
 *
 * @since 0.1.0
 * @category models
 */
export interface Directory {
  readonly files: ReadonlyArray<FileNode>
  readonly directories: ReadonlyArray<DirectoryNode>
  readonly symlinks: ReadonlyArray<SymlinkNode>
}

/**
 * @since 0.1.0
 * @category constants
 */
export const empty: Directory = { files: [], directories: [], symlinks: [] }

/**
 * @since 0.1.0
 * @category errors
 */
export class InvalidDirectory extends Schema.TaggedError<InvalidDirectory>("kiln/InvalidDirectory")(
  "InvalidDirectory",
  { reason: Schema.String, digest: Schema.optional(Schema.String) }
) {
  override get message(): string {
    return this.digest === undefined
      ? `invalid directory: ${this.reason}`
      : `invalid directory ${this.digest}: ${this.reason}`
  }
}

/**
 * Why a path component is not a valid entry name, or `undefined` when it is.
 *
 * @since 0.1.0
 * @category validation
 */
export const invalidNameReason = (name: string): string | undefined => {
  if (name.length === 0) return "an entry name is empty"
  if (name === "." || name === "..") return `entry name \`${name}\` is not allowed`
  if (name.includes("/")) return `entry name \`${name}\` contains \`/\``
  if (name.includes("\0")) return `entry name ${JSON.stringify(name)} contains NUL`
  if (!name.isWellFormed()) return `entry name ${JSON.stringify(name)} is not valid Unicode`
  const bytes = utf8Length(name)
  if (bytes > MAX_NAME_BYTES) {
    return `entry name \`${[...name].slice(0, 32).join("")}…\` is ${bytes} bytes long, more than ${MAX_NAME_BYTES}`
  }
  return undefined
}

/**
 * The length of a string in UTF-8 bytes, as the file system counts a name (a lone surrogate, which no valid name
 * holds, as the 3 bytes of its replacement).
 *
 * @since 0.1.0
 * @category validation
 */
export const utf8Length = (s: string): number => {
  let n = 0
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i)
    if (c < 0x80) n += 1
    else if (c < 0x800) n += 2
    else if (c >= 0xd800 && c < 0xdc00 && i + 1 < s.length && (s.charCodeAt(i + 1) & 0xfc00) === 0xdc00) {
      n += 4
      i++
    } else n += 3
  }
  return n
}

/**
 * The longest entry name, in UTF-8 bytes: Linux's `NAME_MAX`. A longer name is one no file system kiln writes to
 * can hold (the OS refuses it with `ENAMETOOLONG`), so capture never meets one, and a remote tree naming one could
 * never be written back: it is invalid in any `Directory`.
 *
 * @since 0.1.0
 * @category validation
 */
export const MAX_NAME_BYTES = 255

/**
 * The deepest path a tree may hold, in components below the output root (a process's working directory). Linux
 * refuses a path of more than `PATH_MAX` (4,096) bytes, and a path `depth` components deep has at least `2 * depth - 1`
 * of them (one-letter names and their slashes): no tool can open an entry deeper than 2,048 below anything, so a tree
 * that claims one is not an output any process made, and kiln refuses it rather than walk it.
 *
 * @since 0.1.0
 * @category validation
 */
export const MAX_DEPTH = 2048

/**
 * The longest path a tree may hold, in UTF-8 bytes below the output root, the output's own path included (`dir/sub/f`
 * for `f` in `sub` of output directory `dir`): Linux's `PATH_MAX` (4,096, its terminating NUL included) less that NUL.
 * The OS refuses a longer path whole, so no process made such an entry, and write-back could not lay it out.
 *
 * @since 0.1.0
 * @category validation
 */
export const MAX_PATH_BYTES = 4095

/**
 * The most entries (files, directories and symlinks, at every level) the outputs of one result may hold once its
 * trees are expanded: a REAPI `Tree` lists each distinct directory once, so a few kilobytes of them can name 2^40
 * paths, and everything that lists a tree (write-back, `kiln ls`, the GC) holds one record per path. A real
 * `node_modules` output holds some 45,000 paths; 1,000,000 leaves twenty times that, and keeps a listing far below the
 * 2^24 entries a JavaScript `Map` can hold and within a few hundred megabytes.
 *
 * @since 0.1.0
 * @category validation
 */
export const MAX_ENTRIES = 1_000_000

/**
 * The most bytes of path (the sum of each entry's path below the output root, in UTF-8) the outputs of one result may
 * hold once expanded: a listing keeps every path as a string, and a million entries of paths near
 * `MAX_PATH_BYTES` would need gigabytes. 256 MiB averages 268 bytes a path at `MAX_ENTRIES` entries, several times
 * what real outputs hold (a `node_modules` path is some 60 to 100 bytes).
 *
 * @since 0.1.0
 * @category validation
 */
export const MAX_PATH_TOTAL_BYTES = 256 * 1024 * 1024

/**
 * Whether a symlink may point anywhere (`any`), or only inside the output root (`contained`, the default, as REAPI's
 * `symlink_absolute_path_strategy = DISALLOWED`): kiln.json's per-process `outputSymlinks`.
 *
 * @since 0.1.0
 * @category models
 */
export type SymlinkPolicy = "contained" | "any"

/**
 * Why a symlink `depth` directories below the output root could lead a path resolved through it out of that root, or
 * `undefined` when it cannot. A purely lexical normalization is not enough once links chain (`d -> ..` beside
 * `y -> d/..` normalizes inside, and resolves one level above), so the rule is on the target as written: no leading
 * `/`, some `..` (at most `depth`), then only names (`.` and empty components, which never move, are ignored). By
 * induction over the links met while resolving, a tree whose every link keeps the rule never leads out of its root:
 * going up `depth` levels at most stays inside, and every name met is a directory inside or another such link.
 *
 * @since 0.1.0
 * @category validation
 */
export const escapingTargetReason = (target: string, depth: number): string | undefined => {
  if (target.startsWith("/")) return "an absolute target"
  let ups = 0
  let named = false
  for (const part of target.split("/")) {
    if (part === "" || part === ".") continue
    if (part !== "..") named = true
    else if (named) return "`..` after a name, which another symlink could send anywhere"
    else ups++
  }
  return ups > depth ? `it goes up ${ups} levels, from ${depth} below it` : undefined
}

const byName = (a: { readonly name: string }, b: { readonly name: string }) => compareUtf8(a.name, b.name)

/**
 * Sorts and validates entries into a canonical `Directory`.
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = (entries: {
  readonly files?: ReadonlyArray<FileNode>
  readonly directories?: ReadonlyArray<DirectoryNode>
  readonly symlinks?: ReadonlyArray<SymlinkNode>
}): Either.Either<Directory, InvalidDirectory> => {
  const dir: Directory = {
    files: [...(entries.files ?? [])].sort(byName),
    directories: [...(entries.directories ?? [])].sort(byName),
    symlinks: [...(entries.symlinks ?? [])].sort(byName)
  }
  const reason = validate(dir)
  return reason === undefined ? Either.right(dir) : Either.left(new InvalidDirectory({ reason }))
}

const validate = (dir: Directory): string | undefined => {
  const seen = new Set<string>()
  for (const list of [dir.files, dir.directories, dir.symlinks] as const) {
    let previous: string | undefined
    for (const node of list) {
      const bad = invalidNameReason(node.name)
      if (bad !== undefined) return bad
      if (previous !== undefined && compareUtf8(previous, node.name) >= 0) {
        return `entries are not sorted by name: \`${previous}\` before \`${node.name}\``
      }
      if (seen.has(node.name)) return `entry name \`${node.name}\` is used twice`
      seen.add(node.name)
      previous = node.name
    }
  }
  for (const link of dir.symlinks) {
    if (link.target.length === 0) return `symlink \`${link.name}\` has an empty target`
    if (!link.target.isWellFormed() || link.target.includes("\0")) {
      return `symlink \`${link.name}\` has an invalid target`
    }
    // The OS refuses a longer target (`symlink` fails with `ENAMETOOLONG`): no tree kiln could write holds one.
    if (utf8Length(link.target) > MAX_PATH_BYTES) {
      return `symlink \`${link.name}\` has a target of ${utf8Length(link.target)} bytes, more than ${MAX_PATH_BYTES}`
    }
  }
  return undefined
}

/**
 * Canonical protobuf bytes: fields in number order, defaults omitted, no empty sub-messages.
 *
 * @since 0.1.0
 * @category encoding
 */
export const encode = (dir: Directory): Uint8Array => {
  const w = new Writer()
  for (const f of dir.files) {
    w.messageField(1, (n) => {
      n.stringField(1, f.name)
      n.messageField(2, (d) => writeDigest(d, f.digest))
      if (f.isExecutable) n.varintField(4, 1)
    })
  }
  for (const d of dir.directories) {
    w.messageField(2, (n) => {
      n.stringField(1, d.name)
      n.messageField(2, (m) => writeDigest(m, d.digest))
    })
  }
  for (const s of dir.symlinks) {
    w.messageField(3, (n) => {
      n.stringField(1, s.name)
      n.stringField(2, s.target)
    })
  }
  return w.finish()
}

/**
 * The directory's digest: the digest of its canonical encoding.
 *
 * @since 0.1.0
 * @category encoding
 */
export const digestOf = (dir: Directory): Digest.Digest => Digest.ofBytes(encode(dir))

const readDigest = (bytes: Uint8Array): Digest.Digest => {
  let hash = ""
  let sizeBytes = 0
  for (const f of readFields(bytes)) {
    if (f.field === 1) hash = asString(f)
    else if (f.field === 2) sizeBytes = asVarint(f)
    else throw new WireError(`unknown Digest field ${f.field}`)
  }
  const parsed = Digest.parse(`${hash}/${sizeBytes}`)
  if (Either.isLeft(parsed)) throw new WireError(parsed.left.reason)
  return parsed.right
}

const decodeNode = (bytes: Uint8Array, kind: 1 | 2 | 3): FileNode | DirectoryNode | SymlinkNode => {
  let name = ""
  let digest: Digest.Digest | undefined
  let target = ""
  let isExecutable = false
  for (const f of readFields(bytes)) {
    if (f.field === 1) name = asString(f)
    else if (f.field === 2 && kind !== 3) digest = readDigest(asBytes(f))
    else if (f.field === 2 && kind === 3) target = asString(f)
    else if (f.field === 4 && kind === 1) isExecutable = asVarint(f) === 1
    else throw new WireError(`unsupported field ${f.field} in a ${["file", "directory", "symlink"][kind - 1]} node`)
  }
  if (kind === 3) return { name, target }
  if (digest === undefined) throw new WireError(`entry \`${name}\` has no digest`)
  return kind === 1 ? { name, digest, isExecutable } : { name, digest }
}

/**
 * Decodes a `Directory`, refusing anything that is not exactly its canonical encoding (unknown fields, defaults
 * written out, unsorted or duplicate names): such bytes would give one tree two digests.
 *
 * @since 0.1.0
 * @category encoding
 */
export const decode = (bytes: Uint8Array): Either.Either<Directory, InvalidDirectory> => {
  try {
    const files: Array<FileNode> = []
    const directories: Array<DirectoryNode> = []
    const symlinks: Array<SymlinkNode> = []
    for (const f of readFields(bytes)) {
      if (f.field === 1) files.push(decodeNode(asBytes(f), 1) as FileNode)
      else if (f.field === 2) directories.push(decodeNode(asBytes(f), 2) as DirectoryNode)
      else if (f.field === 3) symlinks.push(decodeNode(asBytes(f), 3) as SymlinkNode)
      else throw new WireError(`unsupported Directory field ${f.field}`)
    }
    const dir: Directory = { files, directories, symlinks }
    const reason = validate(dir)
    if (reason !== undefined) return Either.left(new InvalidDirectory({ reason }))
    if (!bytesEqual(encode(dir), bytes)) {
      return Either.left(new InvalidDirectory({ reason: "the encoding is not canonical" }))
    }
    return Either.right(dir)
  } catch (e) {
    if (e instanceof WireError) return Either.left(new InvalidDirectory({ reason: e.message }))
    throw e
  }
}
