/**
 * The Store's members over blobs by digest (files and directories) and whole trees (`ensureTree`, `listTree`).
 *
 * @internal
 */
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as fs from "node:fs"
import * as Digest from "../../../domain/Digest.js"
import type * as Directory from "../../../domain/Directory.js"
import { ioError } from "../../../os/IoError.js"
import type { Service } from "../Store.js"
import * as Core from "./core.js"
import * as LargeFiles from "./largeFiles.js"
import * as Tree from "./tree.js"
import * as TreeBlobs from "./treeBlobs.js"
import * as WorkspaceSources from "./workspaceSources.js"

const missing = (digest: Digest.Digest, kind: "file" | "directory") => new Digest.MissingDigest({ digest, kind })

/** @internal */
export type Members =
  | "putFile"
  | "putFiles"
  | "putFilePath"
  | "getFile"
  | "hasFile"
  | "hashedAt"
  | "putDirectory"
  | "getDirectory"
  | "hasDirectory"
  | "ensureTree"
  | "listTree"

/** Blobs by digest, and trees as a whole. @internal */
export const make = (core: Core.Core): Pick<Service, Members> => ({
  putFile: (bytes, expected) =>
    Effect.map(Core.putFiles(core, [bytes], expected === undefined ? undefined : [expected]), (d) => d[0]!),
  putFiles: (blobs) => Core.putFiles(core, blobs),
  putFilePath: (file) =>
    Effect.flatMap(
      Effect.try({ try: () => fs.statSync(file), catch: ioError(file, "cannot store") }),
      (st) =>
        st.size >= LargeFiles.THRESHOLD
          ? LargeFiles.putFromPath(core.large, file, Core.leaseUntil(core), core.leaseTimeMs)
          : Effect.flatMap(
            Effect.try({ try: () => fs.readFileSync(file), catch: ioError(file, "cannot read") }),
            (bytes) => Effect.map(Core.putFiles(core, [bytes]), (d) => d[0]!)
          )
    ),
  getFile: (digest) =>
    Effect.flatMap(
      Core.getFile(core, digest),
      Option.match({ onNone: () => Effect.fail(missing(digest, "file")), onSome: Effect.succeed })
    ),
  hasFile: (digest) => Core.hasFile(core, digest),
  hashedAt: (digest) => WorkspaceSources.lookup(core.sources, digest)?.abs,
  putDirectory: (dir) => Effect.map(Core.putDirectories(core, [dir]), (d) => d[0]!),
  getDirectory: (digest) =>
    Effect.flatMap(
      Core.getDirectory(core, digest),
      Option.match({ onNone: () => Effect.fail(missing(digest, "directory")), onSome: Effect.succeed })
    ),
  hasDirectory: (digest) => Core.hasDirectory(core, digest),
  ensureTree: (root, options) => TreeBlobs.ensureTree(core, root, options.complete === true, options.lease === true),
  listTree: (root) => {
    const dirs = new Map<string, Directory.Directory>()
    return Effect.zipRight(
      Core.walkTree(core, root, (p, dir) => dirs.set(p, dir)),
      Effect.sync(() => Tree.entriesOf(dirs))
    )
  }
})
