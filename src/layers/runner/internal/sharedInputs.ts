/**
 * A process's large input subtrees, shared rather than written: its input root is split into those (each mounted
 * read-only from the store's shared tree) and the rest (written into the sandbox as before). Where this machine
 * cannot mount (no root, no user namespaces), every tree is written, as before, with one warning per engine.
 *
 * @internal
 */
import * as Effect from "effect/Effect"
import * as fs from "node:fs"
import * as path from "node:path"
import * as Digest from "../../../domain/Digest.js"
import { outputSegments, type Process } from "../../../domain/Process.js"
import type { StoreError } from "../../../domain/StoreErrors.js"
import { ioError } from "../../../os/IoError.js"
import { mkdirp } from "../../../os/Mkdirp.js"
import * as MountNamespace from "../../../os/mounts/MountNamespace.js"
import { removeTree } from "../../../os/RemoveTree.js"
import type * as SharedTrees from "../../store/SharedTrees.js"
import type { WorkspaceTree } from "../ProcessRunner.js"

/** @internal */
export interface Layout {
  /** What is written into the sandbox: the input root, less the shared subtrees (empty directories there). */
  readonly rest: Digest.Digest
  readonly shared: ReadonlyArray<SharedTrees.Shared>
  readonly mode: MountNamespace.Mode | undefined
}

/**
 * Where the sandbox or the process writes, relative to the sandbox root: no shared subtree may be there, but a
 * writable input or a named cache may lie inside one, laid over it writable, where this machine can make overlays
 * (`overlaid`).
 */
const reservedOf = (proc: Process, overlaid: boolean): SharedTrees.Reserved => {
  const wd = outputSegments(proc.workingDirectory) ?? []
  const within: Array<string> = []
  for (const out of [...proc.outputFiles, ...proc.outputDirectories]) {
    const s = outputSegments(out)
    if (s !== undefined) within.push([...wd, ...s].join("/"))
  }
  const rootRelative = (rels: ReadonlyArray<string>) =>
    rels.flatMap((rel) => outputSegments(rel)?.join("/") ?? []).filter((r) => r !== "")
  const writable = rootRelative([...proc.writablePaths, ...Object.values(proc.namedCaches)])
  return {
    at: [wd.join("/")].filter((r) => r !== ""),
    within: [...within.filter((r) => r !== ""), ...(overlaid ? [] : writable)],
    ...(overlaid ? { writable } : {})
  }
}

/** @internal */
export interface Planner {
  readonly layoutOf: (
    proc: Process,
    workspace: ReadonlyArray<WorkspaceTree>
  ) => Effect.Effect<Layout, Digest.MissingDigest | StoreError>
}

/** @internal */
export const planner = (shared: SharedTrees.Service | undefined, sandboxesRoot: string): Planner => {
  let warned = false
  let warnedOverlays = false
  return {
    layoutOf: (proc, workspace) =>
      Effect.gen(function*() {
        const whole: Layout = { rest: proc.inputDigest, shared: [], mode: undefined }
        if (shared === undefined) return whole
        const known = new Map(workspace.map((w) => [w.digest.hash, w.files]))
        const anchors = new Map(workspace.map((w) => [w.path, w.digest.hash]))
        let split = yield* shared.split(proc.inputDigest, reservedOf(proc, true), known, anchors)
        if (split.shared.length === 0) return whole
        const probe = MountNamespace.probe()
        const overlays = probe.mode === undefined || !split.shared.some((s) => s.writable !== undefined)
          ? undefined
          : MountNamespace.overlaysWork(probe.mode, sandboxesRoot)
        if (overlays !== undefined && !overlays.works) {
          if (!warnedOverlays) {
            warnedOverlays = true
            yield* Effect.logWarning(
              `a large input tree holding a writable input is written into the sandbox: this machine cannot lay ` +
                `writable paths over a read-only tree (${overlays.why})`
            )
          }
          split = yield* shared.split(proc.inputDigest, reservedOf(proc, false), known, anchors)
          if (split.shared.length === 0) return whole
        }
        if (probe.mode === undefined) {
          if (!warned) {
            warned = true
            yield* Effect.logWarning(
              `large input trees are written into every sandbox: this machine cannot mount them read-only (${probe.why})`
            )
          }
          return whole
        }
        return { rest: split.rest, shared: split.shared, mode: probe.mode }
      })
  }
}

/** No mounts. @internal */
export const none: Mounts = { mounts: [], fromWorkspace: [] }

/** @internal */
export interface Mounts {
  readonly mounts: ReadonlyArray<MountNamespace.Mount>
  /** The workspace directories mounted, to be checked once the process has ended. */
  readonly fromWorkspace: ReadonlyArray<WorkspaceTree>
}

/**
 * A mount at its place in `sandbox` for each shared subtree: the caller's workspace directory where it holds exactly
 * that tree (nothing is written: a cold run's tool tree costs no copy), else the store's read-only copy, made once
 * per digest by `write`. A subtree under a workspace directory the input root holds exactly (`within`: a
 * `node_modules` whose `.cache` the process may write, which is then not shared) is that directory's own too. A
 * workspace directory's `.bin` shims hold its absolute path where the tree holds `/mnt`'s (see `store/Shims.ts`):
 * each `.bin` that may hold one is mounted over it from the store's copy, after it (mounts are made in order).
 *
 * @internal
 */
export const mountsOf = <E>(
  shared: SharedTrees.Service,
  layout: Layout,
  sandbox: string,
  workspace: ReadonlyArray<WorkspaceTree>,
  write: SharedTrees.Write<E>,
  /** The named caches' directories, by their paths in the input root. */
  caches: ReadonlyMap<string, string> = new Map()
): Effect.Effect<Mounts, E | Digest.MissingDigest | StoreError> =>
  Effect.gen(function*() {
    const mounts: Array<MountNamespace.Mount> = []
    const fromWorkspace: Array<WorkspaceTree> = []
    for (const s of layout.shared) {
      const target = path.join(sandbox, ...s.path.split("/"))
      const own = workspace.find((w) => w.path === s.path && Digest.equals(w.digest, s.digest))
      const holder = own ?? (s.within === undefined ? undefined : workspace.find((w) => w.path === s.within))
      let source: string
      if (holder !== undefined) {
        if (!fromWorkspace.includes(holder)) fromWorkspace.push(holder)
        const under = s.path === holder.path ? [] : s.path.slice(holder.path.length + 1).split("/")
        source = path.join(holder.abs, ...under)
      } else {
        source = yield* shared.place(s.digest, write)
      }
      if (s.writable === undefined) mounts.push({ source, target })
      else {
        const cachesIn = new Map(s.writable.flatMap((w) => {
          const dir = caches.get(`${s.path}/${w.path}`)
          return dir === undefined ? [] : [[w.path, dir] as const]
        }))
        mounts.push(...(yield* overlaid(source, target, s.writable, cachesIn)))
      }
      if (holder === undefined) continue
      // Its shims name the workspace's path; the tree's, as the sandbox reads them, go over them (see `Shims.ts`).
      for (const bin of yield* shared.shimDirs(s.digest, path.posix.basename(s.path))) {
        mounts.push({
          source: yield* shared.place(bin.digest, write),
          target: path.join(target, ...bin.path.split("/"))
        })
      }
    }
    return { mounts, fromWorkspace }
  })

/**
 * Where the writes into a shared tree's writable paths go, inside the directory the tree is mounted over: hidden from
 * the process by the mount, and removed with the sandbox.
 */
export const LAYER = ".kiln-layer"

/**
 * The mounts of a shared tree with writable paths laid over it: an overlay of the tree (`source`) at `target`, whose
 * writes go to the sandbox (the directory under the mount, see {@link LAYER}); each writable path bound over itself,
 * so that it stays writable once the overlay is sealed read-only. The tree itself, the workspace's or the store's, is
 * never written. A writable path the tree lacks is made, an empty directory; a named cache is a symlink to its
 * directory (`caches`, by path in the tree), made here rather than by the sandbox's preparation, which the mount hides.
 */
const overlaid = (
  source: string,
  target: string,
  writable: ReadonlyArray<SharedTrees.WritablePath>,
  caches: ReadonlyMap<string, string>
) =>
  Effect.try({
    try: (): Array<MountNamespace.Mount> => {
      const layer = path.join(target, LAYER)
      const upper = path.join(layer, "upper")
      const work = path.join(layer, "work")
      // A sandbox kept for another process may hold the last one's layer: its writes are not this one's.
      if (fs.existsSync(layer)) removeTree(layer)
      mkdirp(upper)
      mkdirp(work)
      for (const w of writable) {
        const at = path.join(upper, ...w.path.split("/"))
        const cache = caches.get(w.path)
        if (cache === undefined) {
          if (!w.file) mkdirp(at)
          continue
        }
        // A named cache is a symlink out of the tree, as elsewhere in a sandbox: what it leads to is writable.
        mkdirp(path.dirname(at))
        fs.symlinkSync(cache, at)
      }
      return [
        { kind: "overlay", source: MountNamespace.overlayOptions(source, upper, work), target },
        ...writable.filter((w) => !caches.has(w.path)).map((w): MountNamespace.Mount => {
          const at = path.join(target, ...w.path.split("/"))
          return { kind: "rw", source: at, target: at }
        }),
        { kind: "seal", source: "", target }
      ]
    },
    catch: ioError(target, "cannot lay writable paths over a shared tree")
  })
