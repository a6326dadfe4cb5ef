/**
 * A process's large input subtrees, shared rather than written: its input root is split into those (each mounted
 * read-only from the store's shared tree) and the rest (written into the sandbox as before). Where this machine
 * cannot mount (no root, no user namespaces), every tree is written, as before, with one warning per engine.
 *
 * @internal
 */
import * as Effect from "effect/Effect"
import * as path from "node:path"
import type * as Digest from "../../domain/Digest.js"
import { outputSegments, type Process } from "../../domain/Process.js"
import type { StoreError } from "../../domain/StoreErrors.js"
import * as MountNamespace from "../../os/MountNamespace.js"
import type * as SharedTrees from "../../store/SharedTrees.js"

/** @internal */
export interface Layout {
  /** What is written into the sandbox: the input root, less the shared subtrees (empty directories there). */
  readonly rest: Digest.Digest
  readonly shared: ReadonlyArray<{ readonly path: string; readonly digest: Digest.Digest }>
  readonly mode: MountNamespace.Mode | undefined
}

/** Where the sandbox or the process writes, relative to the sandbox root: no shared subtree may be there. */
const reservedOf = (process: Process): SharedTrees.Reserved => {
  const wd = outputSegments(process.workingDirectory) ?? []
  const within: Array<string> = []
  for (const out of [...process.outputFiles, ...process.outputDirectories]) {
    const s = outputSegments(out)
    if (s !== undefined) within.push([...wd, ...s].join("/"))
  }
  for (const rel of [...Object.values(process.namedCaches), ...process.writablePaths]) {
    const s = outputSegments(rel)
    if (s !== undefined) within.push(s.join("/"))
  }
  return { at: [wd.join("/")].filter((r) => r !== ""), within: within.filter((r) => r !== "") }
}

/** @internal */
export interface Planner {
  readonly layoutOf: (process: Process) => Effect.Effect<Layout, Digest.MissingDigest | StoreError>
}

/** @internal */
export const planner = (shared: SharedTrees.Service | undefined): Planner => {
  let warned = false
  return {
    layoutOf: (process) =>
      Effect.gen(function*() {
        const whole: Layout = { rest: process.inputDigest, shared: [], mode: undefined }
        if (shared === undefined) return whole
        const split = yield* shared.split(process.inputDigest, reservedOf(process))
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

/**
 * Each shared subtree's read-only directory, made once per digest by `write`, as a mount at its place in `sandbox`.
 *
 * @internal
 */
export const mountsOf = <E>(
  shared: SharedTrees.Service,
  layout: Layout,
  sandbox: string,
  write: SharedTrees.Write<E>
): Effect.Effect<Array<MountNamespace.Mount>, E | StoreError> =>
  Effect.forEach(
    layout.shared,
    (s) =>
      Effect.map(
        shared.place(s.digest, write),
        (source) => ({ source, target: path.join(sandbox, ...s.path.split("/")) })
      )
  )
