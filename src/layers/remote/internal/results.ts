/**
 * A result between kiln's store and a remote cache. Up, an action-cache entry (an output tree rooted at the working
 * directory) becomes a REAPI `ActionResult`: each declared output file with its digest, each declared output
 * directory as a `Tree` message, stdout and stderr by digest, so that any REAPI client (Bazel's included) reads it.
 * Down, an `ActionResult` becomes the same output tree, laid out as capture would have, so that the digest a remote
 * hit gives is the one the process's own run gives.
 *
 * @internal
 */
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Digest from "../../../domain/Digest.js"
import * as Directory from "../../../domain/Directory.js"
import { outputSegments } from "../../../domain/Process.js"
import type { Entry } from "../../../domain/RemoteTier.js"
import type { StoreError } from "../../../domain/StoreErrors.js"
import * as Tree from "../../../domain/Tree.js"
import type * as Store from "../../store/Store.js"
import * as Proto from "./proto.js"

export interface Outputs {
  readonly outputFiles: ReadonlyArray<string>
  readonly outputDirectories: ReadonlyArray<string>
  /** Where the result's symlinks may point (default `contained`: inside the working directory). */
  readonly outputSymlinks?: Directory.SymlinkPolicy
}

export type { Entry }

/** An upload's `ActionResult` and the blobs it refers to that are not in the local store's file CAS (its trees). */
export interface Up {
  readonly actionResult: Uint8Array
  /** Files of the local store the result refers to. */
  readonly files: ReadonlyArray<Digest.Digest>
  /** `Tree` messages, made here. */
  readonly trees: ReadonlyArray<{ readonly digest: Digest.Digest; readonly bytes: Uint8Array }>
  /** A declared output the process did not make: such a result is kept locally but never shared. */
  readonly absent?: string
}

type Found =
  | { readonly kind: "file"; readonly node: Directory.FileNode }
  | { readonly kind: "directory"; readonly digest: Digest.Digest }
  | { readonly kind: "symlink"; readonly target: string }

/** What the tree holds at a path; undefined when nothing (an output the process did not make). */
const lookupPath = (store: Store.Service, root: Digest.Digest, segments: ReadonlyArray<string>) =>
  Effect.gen(function*() {
    if (segments.length === 0) return { kind: "directory", digest: root } as Found
    let dir = yield* store.getDirectory(root)
    for (let i = 0; i < segments.length; i++) {
      const name = segments[i]!
      const last = i === segments.length - 1
      const sub = dir.directories.find((d) => d.name === name)
      if (last) {
        if (sub !== undefined) return { kind: "directory", digest: sub.digest } as Found
        const file = dir.files.find((f) => f.name === name)
        if (file !== undefined) return { kind: "file", node: file } as Found
        const link = dir.symlinks.find((s) => s.name === name)
        return link !== undefined ? ({ kind: "symlink", target: link.target } as Found) : undefined
      }
      if (sub === undefined) return undefined
      dir = yield* store.getDirectory(sub.digest)
    }
    return undefined
  })

/** The `Tree` of a directory in the store: it and every directory beneath it. */
const treeOf = (store: Store.Service, root: Digest.Digest) =>
  Effect.gen(function*() {
    const rootDir = yield* store.getDirectory(root)
    const children = new Map<string, Directory.Directory>()
    const stack = [rootDir]
    while (stack.length > 0) {
      for (const d of stack.pop()!.directories) {
        if (children.has(d.digest.hash)) continue
        const child = Digest.isEmpty(d.digest) ? Directory.empty : yield* store.getDirectory(d.digest)
        children.set(d.digest.hash, child)
        stack.push(child)
      }
    }
    return { root: rootDir, children } satisfies Tree.Tree
  })

const covered = (dirs: ReadonlyArray<string>, path: string) => dirs.some((d) => d === "" || path.startsWith(`${d}/`))

/**
 * The `ActionResult` of a local entry. Only results kiln would cache are uploaded, so the exit code is a number.
 */
export const toRemote = (
  store: Store.Service,
  entry: Entry,
  outputs: Outputs
): Effect.Effect<Up, Digest.MissingDigest | StoreError> =>
  Effect.gen(function*() {
    const files = new Map<string, Digest.Digest>()
    const trees: Array<{ digest: Digest.Digest; bytes: Uint8Array }> = []
    const outputFiles: Array<Record<string, unknown>> = []
    const fileSymlinks: Array<Record<string, unknown>> = []
    const outputDirectories: Array<Record<string, unknown>> = []
    const dirSymlinks: Array<Record<string, unknown>> = []
    const dirs = outputs.outputDirectories.map((d) => (outputSegments(d) ?? []).join("/"))
    let absent: string | undefined
    for (const declared of [...new Set(dirs)].sort()) {
      const found = yield* lookupPath(store, entry.outputDigest, declared === "" ? [] : declared.split("/"))
      if (found === undefined) {
        absent ??= `${declared}/`
        continue
      }
      if (found.kind === "symlink") dirSymlinks.push({ path: declared, target: found.target })
      if (found.kind !== "directory") continue
      const tree = yield* treeOf(store, found.digest)
      const bytes = Tree.encode(tree)
      const digest = Digest.ofBytes(bytes)
      trees.push({ digest, bytes })
      for (const f of Tree.files(tree)) files.set(f.hash, f)
      outputDirectories.push({ path: declared, tree_digest: Proto.wire(digest) })
    }
    for (const declared of [...new Set(outputs.outputFiles)].sort()) {
      const segments = outputSegments(declared)
      if (segments === undefined || segments.length === 0) continue
      const path = segments.join("/")
      if (covered(dirs, path)) continue
      const found = yield* lookupPath(store, entry.outputDigest, segments)
      if (found === undefined) absent ??= path
      if (found?.kind === "symlink") fileSymlinks.push({ path, target: found.target })
      if (found?.kind !== "file") continue
      if (found.node.digest.sizeBytes > 0) files.set(found.node.digest.hash, found.node.digest)
      outputFiles.push({
        path,
        digest: Proto.wire(found.node.digest),
        ...(found.node.isExecutable ? { is_executable: true } : {})
      })
    }
    for (const d of [entry.stdoutDigest, entry.stderrDigest]) if (d.sizeBytes > 0) files.set(d.hash, d)
    const actionResult = Proto.encode("ActionResult", {
      output_files: outputFiles,
      output_directories: outputDirectories,
      exit_code: entry.exitCode ?? 0,
      stdout_digest: Proto.wire(entry.stdoutDigest),
      stderr_digest: Proto.wire(entry.stderrDigest),
      output_file_symlinks: fileSymlinks,
      output_directory_symlinks: dirSymlinks
    })
    return { actionResult, files: [...files.values()], trees, ...(absent !== undefined ? { absent } : {}) }
  })

interface WireResult {
  readonly output_files?: ReadonlyArray<
    { path?: string; digest?: Proto.WireDigest; is_executable?: boolean; contents?: Uint8Array }
  >
  readonly output_directories?: ReadonlyArray<{ path?: string; tree_digest?: Proto.WireDigest }>
  readonly output_file_symlinks?: ReadonlyArray<{ path?: string; target?: string }>
  readonly output_directory_symlinks?: ReadonlyArray<{ path?: string; target?: string }>
  readonly exit_code?: number
  readonly stdout_digest?: Proto.WireDigest
  readonly stderr_digest?: Proto.WireDigest
  readonly stdout_raw?: Uint8Array
  readonly stderr_raw?: Uint8Array
}

/** A remote `ActionResult`, read: what must be fetched for it, and how its outputs lie. */
export interface Down {
  readonly exitCode: number
  readonly stdout: Digest.Digest
  readonly stderr: Digest.Digest
  readonly files: ReadonlyArray<{ readonly path: ReadonlyArray<string>; readonly node: Directory.FileNode }>
  readonly symlinks: ReadonlyArray<{ readonly path: ReadonlyArray<string>; readonly target: string }>
  readonly directories: ReadonlyArray<{ readonly path: ReadonlyArray<string>; readonly tree: Digest.Digest }>
}

/**
 * Reads a serialized `ActionResult`; a reason (for the log) when kiln cannot use it: outputs it did not declare,
 * paths that leave the working directory, a digest that is not one, inline contents (which kiln never asks for).
 */
export const readRemote = (bytes: Uint8Array, outputs: Outputs): Either.Either<Down, string> => {
  let r: WireResult
  try {
    r = Proto.decode<WireResult>("ActionResult", bytes)
  } catch (e) {
    return Either.left(`the ActionResult does not decode: ${(e as Error).message}`)
  }
  const declaredFiles = new Set(outputs.outputFiles.map((f) => (outputSegments(f) ?? []).join("/")))
  const declaredDirs = new Set(outputs.outputDirectories.map((f) => (outputSegments(f) ?? []).join("/")))
  const pathOf = (p: string | undefined, declared: Set<string>) => {
    const segments = outputSegments(p ?? "")
    if (segments === undefined) return undefined
    const joined = segments.join("/")
    return declared.has(joined) || [...declaredDirs].some((d) => d === "" || joined.startsWith(`${d}/`))
      ? segments
      : undefined
  }
  // Each name, the whole path and a symlink's target as the OS would take them: a longer one could not be written.
  const unwritable = (path: ReadonlyArray<string>, target?: string) => {
    const bad = path.map(Directory.invalidNameReason).find((why) => why !== undefined)
    if (bad !== undefined) return bad
    const bytes = Directory.utf8Length(path.join("/"))
    if (bytes > Directory.MAX_PATH_BYTES) return `a path ${bytes} bytes long, more than ${Directory.MAX_PATH_BYTES}`
    const targetBytes = target === undefined ? 0 : Directory.utf8Length(target)
    return targetBytes > Directory.MAX_PATH_BYTES
      ? `a target ${targetBytes} bytes long, more than ${Directory.MAX_PATH_BYTES}`
      : undefined
  }
  const stdout = Proto.fromWire(r.stdout_digest ?? { hash: Digest.empty.hash })
  const stderr = Proto.fromWire(r.stderr_digest ?? { hash: Digest.empty.hash })
  if (stdout === undefined || stderr === undefined) return Either.left("its stdout or stderr digest is malformed")
  if ((r.stdout_raw?.length ?? 0) > 0 || (r.stderr_raw?.length ?? 0) > 0) {
    return Either.left("it inlines stdout or stderr, which kiln does not ask for")
  }
  const files: Array<Down["files"][number]> = []
  for (const f of r.output_files ?? []) {
    const path = pathOf(f.path, declaredFiles)
    const digest = Proto.fromWire(f.digest)
    if (path === undefined || path.length === 0 || digest === undefined) {
      return Either.left(`output file \`${f.path}\` is not one the process declares, or its digest is malformed`)
    }
    const bad = unwritable(path)
    if (bad !== undefined) return Either.left(`output file \`${f.path}\` cannot be written: ${bad}`)
    files.push({ path, node: { name: path[path.length - 1]!, digest, isExecutable: f.is_executable === true } })
  }
  const directories: Array<Down["directories"][number]> = []
  for (const d of r.output_directories ?? []) {
    const path = pathOf(d.path, declaredDirs)
    const tree = Proto.fromWire(d.tree_digest)
    if (path === undefined || tree === undefined) {
      return Either.left(`output directory \`${d.path}\` is not one the process declares, or its digest is malformed`)
    }
    const bad = unwritable(path)
    if (bad !== undefined) return Either.left(`output directory \`${d.path}\` cannot be written: ${bad}`)
    directories.push({ path, tree })
  }
  const symlinks: Array<Down["symlinks"][number]> = []
  for (const s of [...(r.output_file_symlinks ?? []), ...(r.output_directory_symlinks ?? [])]) {
    const path = pathOf(s.path, new Set([...declaredFiles, ...declaredDirs]))
    if (path === undefined || path.length === 0 || (s.target ?? "") === "") {
      return Either.left(`output symlink \`${s.path}\` is not one the process declares`)
    }
    const bad = unwritable(path, s.target)
    if (bad !== undefined) return Either.left(`output symlink \`${s.path}\` cannot be written: ${bad}`)
    // Write-back would list and prune the link's target as the directory: a declared directory is one.
    if (declaredDirs.has(path.join("/"))) {
      return Either.left(`output directory \`${s.path}\` is a symlink (to \`${s.target}\`), not a directory`)
    }
    const why = outputs.outputSymlinks === "any"
      ? undefined
      : Directory.escapingTargetReason(s.target!, path.length - 1)
    if (why !== undefined) return Either.left(escapingLink(path.join("/"), s.target!, why))
    symlinks.push({ path, target: s.target! })
  }
  return Either.right({ exitCode: r.exit_code ?? 0, stdout, stderr, files, symlinks, directories })
}

const join = (dir: string, name: string) => (dir === "" ? name : `${dir}/${name}`)

const escapingLink = (path: string, target: string, why: string) =>
  `output symlink \`${path}\` -> \`${target}\` leads out of the working directory (${why})`

/**
 * Why a remote result's output directories cannot be used, or undefined: a path deeper than `Directory.MAX_DEPTH`
 * levels or longer than `Directory.MAX_PATH_BYTES` below the working directory; outputs that, expanded, hold more
 * than `Directory.MAX_ENTRIES` entries or `Directory.MAX_PATH_TOTAL_BYTES` bytes of paths all together; or (unless
 * the process allows `any`) a symlink that could lead out of it. A tree is the server's data, and a `Tree` lists each
 * distinct directory once however many paths reach it: each is measured and walked once, never expanded.
 */
export const refusedTrees = (
  down: Down,
  trees: ReadonlyMap<string, Tree.Tree>,
  outputs: Outputs
): string | undefined => {
  // The result's own files and symlinks count too: one entry each, and the bytes of their paths.
  let entries = down.files.length + down.symlinks.length
  let pathBytes = [...down.files, ...down.symlinks].reduce((n, f) => n + Directory.utf8Length(f.path.join("/")), 0)
  for (const d of down.directories) {
    const tree = trees.get(d.tree.hash)!
    const at = d.path.join("/")
    const size = Tree.sizeOf(tree)
    if (d.path.length + size.height > Directory.MAX_DEPTH) {
      return `output directory \`${at}\` holds entries ${
        d.path.length + size.height
      } levels deep, more than ${Directory.MAX_DEPTH}`
    }
    // Each entry's path is the output's, a `/`, then its own below it.
    const prefix = at === "" ? 0 : Directory.utf8Length(at) + 1
    const longest = size.entries > 0 ? prefix + size.longestPath : prefix - 1
    if (longest > Directory.MAX_PATH_BYTES) {
      return `output directory \`${at}\` holds a path ${longest} bytes long, more than ${Directory.MAX_PATH_BYTES}`
    }
    entries += size.entries
    pathBytes += size.entries * prefix + size.pathBytes
    if (entries > Directory.MAX_ENTRIES) {
      return `its output directories hold ${entries} entries once expanded, more than ${Directory.MAX_ENTRIES}`
    }
    if (pathBytes > Directory.MAX_PATH_TOTAL_BYTES) {
      return `its output directories hold ${pathBytes} bytes of paths once expanded, more than ${Directory.MAX_PATH_TOTAL_BYTES}`
    }
  }
  if (outputs.outputSymlinks === "any") return undefined
  for (const d of down.directories) {
    const tree = trees.get(d.tree.hash)!
    const dirOf = (digest: Digest.Digest) => Digest.isEmpty(digest) ? Directory.empty : tree.children.get(digest.hash)!
    // Breadth first: a directory is first met at its shallowest, where its links may go up the least.
    let level: Array<{ dir: Directory.Directory; path: string }> = [{ dir: tree.root, path: d.path.join("/") }]
    const seen = new Set<string>()
    for (let depth = d.path.length; level.length > 0; depth++) {
      const next: typeof level = []
      for (const { dir, path } of level) {
        for (const s of dir.symlinks) {
          const why = Directory.escapingTargetReason(s.target, depth)
          if (why !== undefined) return escapingLink(join(path, s.name), s.target, why)
        }
        for (const c of dir.directories) {
          if (seen.has(c.digest.hash)) continue
          seen.add(c.digest.hash)
          next.push({ dir: dirOf(c.digest), path: join(path, c.name) })
        }
      }
      level = next
    }
  }
  return undefined
}

/** Every blob an `ActionResult` names (its files, trees, stdout and stderr): what must be there for it to be used. */
export const blobsOf = (bytes: Uint8Array): Array<Digest.Digest> => {
  const r = Proto.decode<WireResult>("ActionResult", bytes)
  const digests = [
    r.stdout_digest,
    r.stderr_digest,
    ...(r.output_files ?? []).map((f) => f.digest),
    ...(r.output_directories ?? []).map((d) => d.tree_digest)
  ].map(Proto.fromWire)
  return digests.filter((d): d is Digest.Digest => d !== undefined && d.sizeBytes > 0)
}

/** A directory holding one entry, stored: the layer that puts the entry at its path. */
const single = (store: Store.Service, entry: Directory.Directory) => store.putDirectory(entry)

/**
 * Stores a remote result's directories and lays its outputs into one tree rooted at the working directory, as
 * capture lays them. The trees' `Tree` messages must be given (fetched); file contents need not be in the store.
 */
export const layOut = (
  store: Store.Service,
  down: Down,
  trees: ReadonlyMap<string, Tree.Tree>
) =>
  Effect.gen(function*() {
    const layers: Array<{ digest: Digest.Digest; at: ReadonlyArray<string> }> = []
    for (const d of down.directories) {
      const tree = trees.get(d.tree.hash)!
      // Children first, so that each directory put is whole once its parent names it.
      for (const child of tree.children.values()) yield* store.putDirectory(child)
      layers.push({ digest: yield* store.putDirectory(tree.root), at: d.path })
    }
    for (const f of down.files) {
      layers.push({
        digest: yield* single(store, { files: [f.node], directories: [], symlinks: [] }),
        at: f.path.slice(0, -1)
      })
    }
    for (const s of down.symlinks) {
      const name = s.path[s.path.length - 1]!
      layers.push({
        digest: yield* single(store, { files: [], directories: [], symlinks: [{ name, target: s.target }] }),
        at: s.path.slice(0, -1)
      })
    }
    return layers.length === 0 ? Digest.empty : yield* store.mergeTrees(layers)
  })

/** Every file blob a remote result needs, its trees' files included (the empty blob left out). */
export const filesOf = (down: Down, trees: ReadonlyMap<string, Tree.Tree>): Array<Digest.Digest> => {
  const out = new Map<string, Digest.Digest>()
  const add = (d: Digest.Digest) => d.sizeBytes > 0 && out.set(d.hash, d)
  add(down.stdout)
  add(down.stderr)
  for (const f of down.files) add(f.node.digest)
  for (const d of down.directories) for (const f of Tree.files(trees.get(d.tree.hash)!)) add(f)
  return [...out.values()]
}
