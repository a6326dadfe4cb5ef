/**
 * A process's large input subtrees, shared rather than written: its input root is split into those (each mounted
 * read-only from the store's shared tree) and the rest (written into the sandbox as before). Where this machine
 * cannot mount (no root, no user namespaces), every tree is written, as before, with one warning per engine.
 *
 * @internal
 */
import * as Effect from "effect/Effect"
import * as path from "node:path"
import * as Digest from "../../../domain/Digest.js"
import { outputSegments, type Process } from "../../../domain/Process.js"
import type { StoreError } from "../../../domain/StoreErrors.js"
import * as MountNamespace from "../../../os/MountNamespace.js"
import type * as SharedTrees from "../../store/SharedTrees.js"
import type { WorkspaceTree } from "../ProcessRunner.js"

/** @internal */
export interface Layout {
  /** What is written into the sandbox: the input root, less the shared subtrees (empty directories there). */
  readonly rest: Digest.Digest
  readonly shared: ReadonlyArray<SharedTrees.Shared>
  readonly mode: MountNamespace.Mode | undefined
}

/** Where the sandbox or the process writes, relative to the sandbox root: no shared subtree may be there. */
const reservedOf = (proc: Process): SharedTrees.Reserved => {
  const wd = outputSegments(proc.workingDirectory) ?? []
  const within: Array<string> = []
  for (const out of [...proc.outputFiles, ...proc.outputDirectories]) {
    const s = outputSegments(out)
    if (s !== undefined) within.push([...wd, ...s].join("/"))
  }
  for (const rel of [...Object.values(proc.namedCaches), ...proc.writablePaths]) {
    const s = outputSegments(rel)
    if (s !== undefined) within.push(s.join("/"))
  }
  return { at: [wd.join("/")].filter((r) => r !== ""), within: within.filter((r) => r !== "") }
}

/** @internal */
export interface Planner {
  readonly layoutOf: (
    proc: Process,
    workspace: ReadonlyArray<WorkspaceTree>
  ) => Effect.Effect<Layout, Digest.MissingDigest | StoreError>
}

/** @internal */
export const planner = (shared: SharedTrees.Service | undefined): Planner => {
  let warned = false
  return {
    layoutOf: (proc, workspace) =>
      Effect.gen(function*() {
        const whole: Layout = { rest: proc.inputDigest, shared: [], mode: undefined }
        if (shared === undefined) return whole
        const known = new Map(workspace.map((w) => [w.digest.hash, w.files]))
        const anchors = new Map(workspace.map((w) => [w.path, w.digest.hash]))
        const split = yield* shared.split(proc.inputDigest, reservedOf(proc), known, anchors)
        if (split.shared.length === 0) return whole
        const probe = MountNamespace.probe()
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
  write: SharedTrees.Write<E>
): Effect.Effect<Mounts, E | Digest.MissingDigest | StoreError> =>
  Effect.gen(function*() {
    const mounts: Array<MountNamespace.Mount> = []
    const fromWorkspace: Array<WorkspaceTree> = []
    for (const s of layout.shared) {
      const target = path.join(sandbox, ...s.path.split("/"))
      const own = workspace.find((w) => w.path === s.path && Digest.equals(w.digest, s.digest))
      const holder = own ?? (s.within === undefined ? undefined : workspace.find((w) => w.path === s.within))
      if (holder !== undefined) {
        if (!fromWorkspace.includes(holder)) fromWorkspace.push(holder)
        const under = s.path === holder.path ? [] : s.path.slice(holder.path.length + 1).split("/")
        mounts.push({ source: path.join(holder.abs, ...under), target })
        // Its shims name the workspace's path; the tree's, as the sandbox reads them, go over them (see `Shims.ts`).
        for (const bin of yield* shared.shimDirs(s.digest, path.posix.basename(s.path))) {
          mounts.push({
            source: yield* shared.place(bin.digest, write),
            target: path.join(target, ...bin.path.split("/"))
          })
        }
      } else {
        mounts.push({ source: yield* shared.place(s.digest, write), target })
      }
    }
    return { mounts, fromWorkspace }
  })
