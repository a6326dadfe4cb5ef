/**
 * A local run's first phases: its sandbox made (the watchdog armed over it first) and filled with its inputs, its
 * named caches linked and its working and output directories made.
 *
 * @internal
 */
import * as Effect from "effect/Effect"
import * as fs from "node:fs"
import * as path from "node:path"
import type * as Digest from "../../../domain/Digest.js"
import { outputSegments as segmentsOf, type Process } from "../../../domain/Process.js"
import { materializeFailed, SandboxError } from "../../../domain/Sandbox.js"
import type { StoreError } from "../../../domain/StoreErrors.js"
import { describeErrno } from "../../../os/Errno.js"
import { mkdirp } from "../../../os/Mkdirp.js"
import { removeTree } from "../../../os/RemoveTree.js"
import * as Sandboxes from "../../sandbox/Sandboxes.js"
import type * as Store from "../../store/Store.js"
import type { LocalRun } from "./localRun.js"
import { timed } from "./localRun.js"
import * as SharedInputs from "./sharedInputs.js"

/**
 * Throws when a directory on the way to `segments` under `sandbox` is a symlink (the inputs put one there): making
 * or using the path would reach outside the sandbox. The engine refuses such a config before; this is the last check.
 */
const noSymlinkOn = (sandbox: string, segments: ReadonlyArray<string>, what: string) => {
  let abs = sandbox
  for (const segment of segments) {
    // One normalized segment at a time: joined, not normalized again.
    abs = `${abs}/${segment}`
    const st = fs.lstatSync(abs, { throwIfNoEntry: false })
    if (st === undefined || !(st.isDirectory() || st.isSymbolicLink())) return
    if (st.isSymbolicLink()) {
      throw new Error(`${what} goes through \`${path.relative(sandbox, abs)}\`, a symlink in the sandbox`)
    }
  }
}

/** Makes the working directory, the named caches' links and the outputs' parent directories; the working directory. */
const prepare = (sandbox: string, proc: Process, namedCachesDir: string, inTrees: ReadonlySet<string>) =>
  Effect.try({
    try: () => {
      const wdSegments = segmentsOf(proc.workingDirectory)
      if (wdSegments === undefined) {
        throw new Error(`working directory \`${proc.workingDirectory}\` escapes the sandbox`)
      }
      noSymlinkOn(sandbox, wdSegments, `working directory \`${proc.workingDirectory}\``)
      const wd = path.join(sandbox, ...wdSegments)
      if (wdSegments.length > 0) mkdirp(wd)
      for (const [name, rel] of Object.entries(proc.namedCaches)) {
        const segments = segmentsOf(rel)
        if (segments === undefined || segments.length === 0) {
          throw new Error(`named cache path \`${rel}\` escapes the sandbox`)
        }
        noSymlinkOn(sandbox, segments, `named cache path \`${rel}\``)
        const target = path.join(namedCachesDir, name)
        // The root private to its user when kiln makes it, as the store's (the runner checked one that exists).
        mkdirp(namedCachesDir, 0o700)
        mkdirp(target)
        // Linked from inside its shared tree's overlay (see `SharedInputs.mountsOf`).
        if (inTrees.has(segments.join("/"))) continue
        const link = path.join(sandbox, ...segments)
        mkdirp(path.dirname(link))
        // The inputs may hold the tool's cache there too (vitest run by hand in a package leaves
        // `node_modules/.vite`): the named cache takes its place, as it does inside a mounted tree's overlay. A
        // symlink there was refused above; what is left is the sandbox's own copy of the inputs.
        if (fs.lstatSync(link, { throwIfNoEntry: false }) !== undefined) removeTree(link)
        fs.symlinkSync(target, link)
      }
      for (const out of [...proc.outputFiles, ...proc.outputDirectories]) {
        const segments = segmentsOf(out)
        if (segments === undefined) throw new Error(`output path \`${out}\` escapes the sandbox`)
        noSymlinkOn(wd, segments.slice(0, -1), `output \`${out}\``)
        if (segments.length > 1) mkdirp(path.join(wd, ...segments.slice(0, -1)))
      }
      return wd
    },
    catch: (e) =>
      new SandboxError({ reason: "Create", path: sandbox, detail: `cannot prepare the sandbox: ${describeErrno(e)}` })
  })

/** The named caches' directories, by their paths in the input root. */
const cachesOf = (proc: Process, namedCachesDir: string): Map<string, string> =>
  new Map(
    Object.entries(proc.namedCaches).flatMap(([name, rel]) => {
      const segments = segmentsOf(rel)
      return segments === undefined || segments.length === 0
        ? []
        : [[segments.join("/"), path.join(namedCachesDir, name)]]
    })
  )

/**
 * The directories `prepare` makes (the valid ones: `prepare` reports the others), which a used sandbox that is
 * refilled keeps rather than removes for `prepare` to make again.
 */
const preparedDirs = (proc: Process): Array<string> => {
  const wd = segmentsOf(proc.workingDirectory)
  if (wd === undefined) return []
  const dirs = [wd.join("/")]
  for (const out of [...proc.outputFiles, ...proc.outputDirectories]) {
    const segments = segmentsOf(out)
    if (segments !== undefined && segments.length > 1) dirs.push([...wd, ...segments.slice(0, -1)].join("/"))
  }
  return dirs.filter((d) => d !== "")
}

const INLINE_MAX_FILES = 1000
const INLINE_MAX_BYTES = 16 * 1024 * 1024

/**
 * Whether the engine may write this input tree itself rather than ask the sandboxer: up to the size at which a
 * subtree is mounted instead (`SharedTrees.DEFAULT_MIN_FILES`). Such a tree costs the engine's thread tens of
 * milliseconds, less than the round trip to the sandboxer, and a run that needs no sandboxer spares a Node process's
 * memory beside its tools (a package that bundles its workspace's packages takes all their `dist/`s: hundreds of
 * files); a larger one would hold up the engine's other processes.
 *
 * Executables too. Pants writes them in a separate sandboxer because its engine forks the processes: a child forked
 * while a file is open for writing inherits the descriptor, and exec'ing that file fails with ETXTBSY until the child
 * execs. Here the processes are forked by the spawner, which opens no input for writing, and the engine writes a
 * file from open to close in one synchronous call on its one thread, where its own few forks (starting a helper)
 * happen too: no child of the engine is forked while an input is open. A busy binary is still retried (see
 * `processGroup.ts`), should a host process fork from another thread.
 *
 * @internal
 */
export const writableHere = (entries: ReadonlyArray<Store.TreeEntry> | undefined) => {
  if (entries === undefined || entries.length > INLINE_MAX_FILES) return false
  let bytes = 0
  for (const e of entries) if (e.type === "file") bytes += e.digest!.sizeBytes
  return bytes <= INLINE_MAX_BYTES
}

const shapeOf = (entries: ReadonlyArray<Store.TreeEntry>) => {
  let dirs = 0
  for (const e of entries) if (e.type === "directory") dirs++
  return { dirs, files: entries.length - dirs }
}

/** @internal */
export interface Opened {
  readonly sandbox: Sandboxes.Sandbox
  /** What is written into the sandbox, and what is mounted there instead. */
  readonly layout: SharedInputs.Layout
  /** The entries of `layout.rest`; undefined when it cannot be listed (the sandboxer then reports why). */
  readonly entries: ReadonlyArray<Store.TreeEntry> | undefined
  /** Whether this engine writes the inputs itself rather than the sandboxer (see `writableHere`). */
  readonly inline: boolean
}

/**
 * The process's sandbox, removed when the run's scope closes; its inputs leased (not written yet).
 *
 * @internal
 */
export const openSandbox = (run: LocalRun) =>
  Effect.gen(function*() {
    const { options, planner, sandboxes, spawner, store } = run.engine
    // Before the sandbox exists: from its mkdir on (its name says whose it is), it dies with this engine.
    yield* options.watch(sandboxes.root)
    const layout = yield* planner.layoutOf(run.proc, run.policy.workspaceTrees ?? [])
    // The lease keeps a concurrent `gc` off the inputs until the process has them. One that fails means either the
    // tree cannot be read (laying it out would fail on the same) or the store takes no writes (the outputs could not
    // be stored): the run fails here, naming why, before the process spends its time. Only what is written from the
    // store: a shared tree is mounted from the workspace, or from the store's copy (leased as a whole, and made
    // again from the blobs if it is gone, when a blob missing then is backtracked).
    yield* store.ensureTree(layout.rest, { lease: true })
    // A tree that cannot be listed is the sandboxer's to report (with the digest that is missing).
    const entries = yield* store.listTree(layout.rest).pipe(Effect.orElseSucceed(() => undefined))
    const inline = writableHere(entries)
    // Once its group is gone, a sandbox of a few hundred entries is kept for the next process (see the sandbox pool);
    // a tree this engine writes itself may go into one a finished process left (see `Refill`). Anything bigger is
    // removed, logs included, by the spawner, off this thread.
    const sandbox = yield* sandboxes.make(
      run.proc.description,
      (dir) => {
        const logs = Sandboxes.logsOf(dir)
        return spawner.remove([dir, logs.stdout, logs.stderr])
      },
      inline ? { used: true, wanted: shapeOf(entries!) } : { used: false }
    )
    return { sandbox, layout, entries, inline } satisfies Opened
  })

/** @internal */
export interface Filled {
  readonly mounts: SharedInputs.Mounts
  /** The process's working directory, absolute. */
  readonly cwd: string
}

/**
 * Writes the inputs into the sandbox (or has the sandboxer write them), mounts the shared trees and prepares the
 * sandbox's directories. A store that fails to write them fails the run with a `SandboxError` that keeps its error.
 *
 * @internal
 */
export const fill = (run: LocalRun, opened: Opened) =>
  Effect.gen(function*() {
    const { options, sandboxer, store, writeShared } = run.engine
    const { layout, sandbox } = opened
    const mutablePaths = run.proc.writablePaths
    const asSandboxError = <A, E>(effect: Effect.Effect<A, E | StoreError>) =>
      Effect.catchIf(
        effect,
        (e): e is StoreError => (e as { _tag?: string })._tag === "StoreError",
        (e) => Effect.fail(materializeFailed(sandbox.path, e))
      )
    const mounts = yield* timed(
      run,
      "materialize",
      Effect.zipRight(
        opened.inline
          ? store.materialize(layout.rest, sandbox.path, {
            createDestination: false,
            reuse: sandbox.reused,
            keepDirs: preparedDirs(run.proc),
            mutablePaths
          }).pipe(asSandboxError<void, Digest.MissingDigest>)
          // The sandboxer reads the store itself: what this process still commits in the background must land first.
          : Effect.zipRight(
            store.written,
            sandboxer.materialize(layout.rest, sandbox.path, { createDestination: false, mutablePaths })
          ),
        layout.shared.length === 0
          ? Effect.succeed(SharedInputs.none)
          : asSandboxError(
            SharedInputs.mountsOf(
              options.sharedTrees!,
              layout,
              sandbox.path,
              run.policy.workspaceTrees ?? [],
              writeShared,
              cachesOf(run.proc, options.namedCachesDir)
            )
          )
      )
    )
    const inTrees = new Set(
      [...cachesOf(run.proc, options.namedCachesDir).keys()].filter((rel) =>
        layout.shared.some((s) => s.writable !== undefined && rel.startsWith(`${s.path}/`))
      )
    )
    const cwd = yield* prepare(sandbox.path, run.proc, options.namedCachesDir, inTrees)
    return { mounts, cwd } satisfies Filled
  })
