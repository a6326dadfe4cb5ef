/**
 * Crafted REAPI messages for hostile servers: an `ActionResult` (any fields, through kiln's own protobuf schema), and
 * `Directory` and `Tree` bytes exactly as a test lays them out: no validation, no sorting, no deduplication, so that
 * a test can send what an honest client never would (a `..` name, an absolute symlink, a 20,000-level chain).
 */
import * as Digest from "../../../src/domain/Digest.js"
import * as Directory from "../../../src/domain/Directory.js"
import { Writer } from "../../../src/domain/internal/protobuf.js"
import * as Proto from "../../../src/layers/remote/internal/proto.js"

/** A digest as REAPI messages carry it (`{hash, size_bytes}`). */
export const wire = (d: Digest.Digest): Proto.WireDigest => Proto.wire(d)

/** The digest of some bytes or text. */
export const digestOf = (bytes: Uint8Array | string): Digest.Digest =>
  Digest.ofBytes(typeof bytes === "string" ? Buffer.from(bytes) : bytes)

/**
 * An `ActionResult` in protobufjs's JSON shape (`output_files: [{path, digest: {hash, size_bytes}}]`,
 * `output_directories: [{path, tree_digest}]`, `exit_code`, …), encoded.
 */
export const encodeActionResult = (result: Record<string, unknown>): Uint8Array => Proto.encode("ActionResult", result)

/** A `Directory` whose entries are written in the order given (its names unchecked). */
export interface RawDirectory {
  readonly files?: ReadonlyArray<{ name: string; digest: Digest.Digest; isExecutable?: boolean }>
  readonly directories?: ReadonlyArray<{ name: string; digest: Digest.Digest }>
  readonly symlinks?: ReadonlyArray<{ name: string; target: string }>
}

export const encodeDirectory = (dir: RawDirectory): Uint8Array =>
  Directory.encode({
    files: (dir.files ?? []).map((f) => ({ ...f, isExecutable: f.isExecutable ?? false })),
    directories: dir.directories ?? [],
    symlinks: dir.symlinks ?? []
  })

/** A `Tree`: the root, then the children in the order given (duplicates and unreached ones included). */
export const encodeTree = (root: RawDirectory, children: ReadonlyArray<RawDirectory> = []): Uint8Array => {
  const w = new Writer()
  w.bytesField(1, encodeDirectory(root))
  for (const child of children) w.bytesField(2, encodeDirectory(child))
  return w.finish()
}
