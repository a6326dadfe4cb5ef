/**
 * Runs a process in a fresh sandbox: materialize its inputs through the sandboxer, link its named caches, spawn it
 * in its own process group with exactly its declared environment, capture stdout, stderr and its declared outputs,
 * and remove the sandbox once the whole group is gone. The watchdog (`options.watch`) is armed over the sandbox root
 * first, so that the sandbox and whatever works in it die with a SIGKILLed engine too.
 *
 * @internal
 */
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as fs from "node:fs"
import * as path from "node:path"
import * as Digest from "../../../domain/Digest.js"
import type * as Permits from "../../../domain/Permits.js"
import { CHROOT, type Process, ProcessResult } from "../../../domain/Process.js"
import { outputSegments as segmentsOf } from "../../../domain/Process.js"
import { SandboxError, type SandboxerUnavailable } from "../../../domain/Sandbox.js"
import { StoreError } from "../../../domain/StoreErrors.js"
import { describeErrno } from "../../../os/Errno.js"
import { ioError } from "../../../os/IoError.js"
import { mkdirp } from "../../../os/Mkdirp.js"
import * as MountNamespace from "../../../os/MountNamespace.js"
import * as Sandboxes from "../../sandbox/Sandboxes.js"
import type * as Sandboxer from "../../sandboxer/Sandboxer.js"
import type * as Spawner from "../../spawner/Spawner.js"
import * as LinkedInputs from "../../store/LinkedInputs.js"
import type * as SharedTrees from "../../store/SharedTrees.js"
import type * as Store from "../../store/Store.js"
import * as ProcessGroup from "./processGroup.js"
import type { Runner } from "./runner.js"
import * as SharedInputs from "./sharedInputs.js"

/** @internal */
export interface LocalOptions {
  readonly namedCachesDir: string
  readonly grace: Duration.DurationInput
  /** Arms the watchdog over the sandboxes under `root`: once this returns, they die with this process. */
  readonly watch: (root: string) => Effect.Effect<void, SandboxerUnavailable>
  /** Held while a process group lives: at most so many at once. */
  readonly running: Permits.Permits
  /** Large input subtrees are mounted from here rather than written into each sandbox; without, all are written. */
  readonly sharedTrees?: SharedTrees.Service | undefined
}

const substitute = (s: string, sandbox: string) => s.split(CHROOT).join(sandbox)

/**
 * Throws when a directory on the way to `segments` under `sandbox` is a symlink (the inputs put one there): making
 * or using the path would reach outside the sandbox. The engine refuses such a config before; this is the last check.
 */
const noSymlinkOn = (sandbox: string, segments: ReadonlyArray<string>, what: string) => {
  let abs = sandbox
  for (const segment of segments) {
    abs = path.join(abs, segment)
    const st = fs.lstatSync(abs, { throwIfNoEntry: false })
    if (st === undefined || !(st.isDirectory() || st.isSymbolicLink())) return
    if (st.isSymbolicLink()) {
      throw new Error(`${what} goes through \`${path.relative(sandbox, abs)}\`, a symlink in the sandbox`)
    }
  }
}

const prepare = (sandbox: string, process: Process, namedCachesDir: string) =>
  Effect.try({
    try: () => {
      const wdSegments = segmentsOf(process.workingDirectory)
      if (wdSegments === undefined) {
        throw new Error(`working directory \`${process.workingDirectory}\` escapes the sandbox`)
      }
      noSymlinkOn(sandbox, wdSegments, `working directory \`${process.workingDirectory}\``)
      const wd = path.join(sandbox, ...wdSegments)
      if (wdSegments.length > 0) mkdirp(wd)
      for (const [name, rel] of Object.entries(process.namedCaches)) {
        const segments = segmentsOf(rel)
        if (segments === undefined || segments.length === 0) {
          throw new Error(`named cache path \`${rel}\` escapes the sandbox`)
        }
        noSymlinkOn(sandbox, segments, `named cache path \`${rel}\``)
        const target = path.join(namedCachesDir, name)
        // The root private to its user when kiln makes it, as the store's (the runner checked one that exists).
        mkdirp(namedCachesDir, 0o700)
        mkdirp(target)
        const link = path.join(sandbox, ...segments)
        mkdirp(path.dirname(link))
        fs.symlinkSync(target, link)
      }
      for (const out of [...process.outputFiles, ...process.outputDirectories]) {
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

/**
 * The directories `prepare` makes (the valid ones: `prepare` reports the others), which a used sandbox that is
 * refilled keeps rather than removes for `prepare` to make again.
 */
const preparedDirs = (process: Process): Array<string> => {
  const wd = segmentsOf(process.workingDirectory)
  if (wd === undefined) return []
  const dirs = [wd.join("/")]
  for (const out of [...process.outputFiles, ...process.outputDirectories]) {
    const segments = segmentsOf(out)
    if (segments !== undefined && segments.length > 1) dirs.push([...wd, ...segments.slice(0, -1)].join("/"))
  }
  return dirs.filter((d) => d !== "")
}

const INLINE_MAX_FILES = 256
const INLINE_MAX_BYTES = 4 * 1024 * 1024

/**
 * Whether the engine may write this input tree itself rather than ask the sandboxer: small, and without executables.
 * Executables are written only by the sandboxer, a process that never forks: a file written here could still be
 * open for writing in a child forked meanwhile, and exec'ing it would fail with ETXTBSY (Pants's reason for a
 * separate sandboxer). A small tree costs less to write than the round trip to the sandboxer; a large one would
 * hold up the engine's other processes.
 */
const writableHere = (entries: ReadonlyArray<Store.TreeEntry> | undefined) => {
  if (entries === undefined || entries.length > INLINE_MAX_FILES) return false
  let bytes = 0
  for (const e of entries) {
    if (e.type === "file") {
      if (e.isExecutable === true) return false
      bytes += e.digest!.sizeBytes
    }
  }
  return bytes <= INLINE_MAX_BYTES
}

/** The files of a tree that may be hard links to the store's blobs (see `LinkedInputs`): executables are copies. */
const linkable = (entries: ReadonlyArray<Store.TreeEntry> | undefined) =>
  (entries ?? []).flatMap((e) =>
    e.type === "file" && e.isExecutable !== true && e.digest!.sizeBytes >= LinkedInputs.THRESHOLD
      ? [{ path: e.path, digest: e.digest! }]
      : []
  )

/**
 * At most this many linked inputs are bound read-only in a process's mount namespace: each bind is an exec of
 * mount(8), 1.5-2 ms apiece here (1,000 of them added 1.5-2.5 s to a process), where the check after the process
 * costs about 16 µs per input.
 */
const READ_ONLY_LINKS_MAX = 16

/** Small logs are read whole and stored in one call; a large one is streamed into the store from its file. */
const LOG_IN_MEMORY_MAX = 4 * 1024 * 1024

const readLog = (file: string): Effect.Effect<Buffer | string, StoreError> =>
  Effect.try({
    try: () => {
      const size = fs.statSync(file, { throwIfNoEntry: false })?.size ?? 0
      return size === 0 ? Buffer.alloc(0) : size <= LOG_IN_MEMORY_MAX ? fs.readFileSync(file) : file
    },
    catch: ioError(file, "cannot read the output of the process")
  })

/** @internal */
export const make = (
  store: Store.Service,
  sandboxer: Sandboxer.Service,
  sandboxes: Sandboxes.Service,
  spawner: Spawner.Spawner,
  options: LocalOptions
): Runner => {
  const planner = SharedInputs.planner(options.sharedTrees)
  const linked = LinkedInputs.registry()
  // A shared tree is written by the sandboxer, like any large tree, then made read-only and renamed into place.
  const writeShared: SharedTrees.Write<Digest.MissingDigest | SandboxError | SandboxerUnavailable> = (digest, into) =>
    Effect.zipRight(store.written, sandboxer.materialize(digest, into, { createDestination: false }))
  return (process, policy) =>
    Effect.scoped(Effect.gen(function*() {
      const started = Date.now()
      const timings: Record<string, number> = {}
      const phase = <A, E, R>(name: string, effect: Effect.Effect<A, E, R>) =>
        Effect.suspend(() => {
          const t = Date.now()
          return Effect.ensuring(effect, Effect.sync(() => void (timings[name] = Date.now() - t)))
        })

      // Before the sandbox exists: from its mkdir on (its name says whose it is), it dies with this engine.
      yield* options.watch(sandboxes.root)
      const layout = yield* planner.layoutOf(process, policy.workspaceTrees ?? [])
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
        process.description,
        (dir) => {
          const logs = Sandboxes.logsOf(dir)
          return spawner.remove([dir, logs.stdout, logs.stderr])
        },
        { used: inline }
      )
      const mutablePaths = process.writablePaths
      const asSandboxError = <A, E>(effect: Effect.Effect<A, E | StoreError>) =>
        Effect.catchIf(
          effect,
          (e): e is StoreError => (e as { _tag?: string })._tag === "StoreError",
          (e) => Effect.fail(new SandboxError({ reason: "Materialize", path: sandbox.path, detail: e.message }))
        )
      const mounts = yield* phase(
        "materialize",
        Effect.zipRight(
          inline
            ? store.materialize(layout.rest, sandbox.path, {
              createDestination: false,
              reuse: sandbox.reused,
              keepDirs: preparedDirs(process),
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
                policy.workspaceTrees ?? [],
                writeShared
              )
            )
        )
      )
      const cwd = yield* prepare(sandbox.path, process, options.namedCachesDir)
      // Its large inputs that are the store's own blobs: looked at again once it is gone.
      const large = linkable(entries)
      // Checked once its group is gone (below), or, when it is interrupted, as its scope closes (its group is ended
      // first): a blob it changed must not stay in the store for the next run to link unnoticed.
      const checkLinked = (w: LinkedInputs.Watched) =>
        Effect.tap(LinkedInputs.check(store, w), (changed) =>
          Effect.forEach(changed, (c) =>
            Effect.logWarning(LinkedInputs.describe(process.description, c)), {
            discard: true
          }))
      let linkedChecked = false
      const watched = large.length === 0 ? undefined : yield* Effect.acquireRelease(
        Effect.sync(() =>
          LinkedInputs.watch(linked, store, sandbox.path, large)
        ),
        (w) =>
          Effect.zipRight(
            linkedChecked ? Effect.void : checkLinked(w),
            Effect.sync(() => LinkedInputs.release(linked, w))
          )
      )
      const env = Object.fromEntries(Object.entries(process.env).map(([k, v]) => [k, substitute(v, sandbox.path)]))
      const command = process.argv.map((a) => substitute(a, sandbox.path))
      // The mounts are the process's own: they vanish with it, whatever ends it. Where it has a mount namespace
      // anyway, each input that is a store blob's hard link is bound read-only over itself: a write in place, or a
      // chmod, fails there, instead of being noticed after. Up to a few: each is a mount(8) of its own (see
      // READ_ONLY_LINKS_MAX); the check after the process covers the rest.
      const protect = mounts.mounts.length > 0 && watched !== undefined &&
        watched.linked.length <= READ_ONLY_LINKS_MAX
      const readOnly = !protect ? [] : watched.linked.map((l) => {
        const file = path.join(sandbox.path, ...l.rel.split("/"))
        return { source: file, target: file }
      })
      const argv = mounts.mounts.length === 0
        ? command
        : MountNamespace.wrap(layout.mode!, [...mounts.mounts, ...readOnly], command, env)
      yield* sandbox.setCommand({ argv, env, workingDirectory: process.workingDirectory })

      // stdout and stderr go to files beside the sandbox (outside it: the process sees only its inputs), read once the
      // group is gone: no pipe for the engine to service while the process runs, and memory stays bounded.
      const logs = {
        ...Sandboxes.logsOf(sandbox.path)
      }
      const queued = Date.now()
      // The permit is held while the process group lives, and only then: its sandbox is filled before and captured
      // after while other processes run (what a permit bounds is the tools running at once). The group is ended
      // before the permit goes, except when interrupted: then the scope's finalizer ends it, a moment later. (A scope
      // of its own would cost every process another change of its fiber's context.)
      const { exit, timedOut } = yield* options.running.withPermit(Effect.gen(function*() {
        const runStarted = Date.now()
        timings.queue = runStarted - queued
        const group = yield* ProcessGroup.spawnGroup(spawner, { argv, cwd, env, ...logs }, options.grace)
        const waited: Option.Option<ProcessGroup.Exit> = process.timeoutMs === undefined
          ? Option.some(yield* Deferred.await(group.exited))
          : yield* Effect.timeoutOption(Deferred.await(group.exited), Duration.millis(process.timeoutMs))
        const timedOut = Option.isNone(waited)
        if (Option.isSome(waited)) ProcessGroup.exitSeen(group, waited.value)
        // The leader exited (or timed out): end whatever is left of its group before reading outputs, so no straggler
        // writes into the sandbox while it is captured or removed.
        yield* ProcessGroup.terminate(group, timedOut ? options.grace : Duration.zero)
        const exit = Option.isSome(waited) ? waited.value : yield* Deferred.await(group.exited)
        timings.run = Date.now() - runStarted
        return { exit, timedOut }
      }))
      if (timedOut) {
        yield* Effect.try({
          try: () =>
            fs.appendFileSync(
              logs.stderr,
              `\nkiln: ${process.description} timed out after ${Duration.format(Duration.millis(process.timeoutMs!))}\n`
            ),
          catch: ioError(logs.stderr, `cannot note the timeout of ${process.description}`)
        })
      }

      // A blob changed through a hard link is removed from the store, and the process's result refused: its input was
      // not what its digest says, whoever wrote it (itself, or another process of the run linked to the same blob).
      linkedChecked = true
      const corrupted = watched === undefined ? [] : yield* LinkedInputs.check(store, watched)
      if (corrupted.length > 0) {
        yield* sandbox.markFailed
        return yield* new StoreError({ reason: "Corrupt", detail: LinkedInputs.refusal(corrupted) })
      }

      const captureStarted = Date.now()
      // stdout and stderr are stored with the outputs, in the same commits; a large log is streamed from its file.
      const outputs = {
        outputFiles: process.outputFiles,
        outputDirectories: process.outputDirectories,
        outputSymlinks: process.outputSymlinks
      }
      const [out, err] = yield* Effect.zip(readLog(logs.stdout), readLog(logs.stderr))
      const inMemory = typeof out !== "string" && typeof err !== "string"
      const captured = yield* store.capture(cwd, outputs, inMemory ? [out, err] : [])
      const [stdoutDigest, stderrDigest] = inMemory ? captured.blobs as readonly [Digest.Digest, Digest.Digest] : [
        yield* typeof out === "string" ? store.putFilePath(out) : store.putFile(out),
        yield* typeof err === "string" ? store.putFilePath(err) : store.putFile(err)
      ]
      const outputDigest = captured.tree
      timings.capture = Date.now() - captureStarted
      // A workspace directory it mounted that changed meanwhile: its result is not that of its input tree.
      const changed = mounts.fromWorkspace.filter((w) => !w.unchanged())
      if (changed.length > 0) {
        yield* Effect.logWarning(
          `${process.description}: ${
            changed.map((w) => w.abs).join(", ")
          } changed while it ran: its result is not cached`
        )
      }
      const result = new ProcessResult({
        exitCode: timedOut ? null : exit.code,
        signal: timedOut ? "SIGTERM" : exit.signal,
        timedOut,
        stdoutDigest,
        stderrDigest,
        outputDigest,
        actionDigest: Digest.empty,
        durationMs: Date.now() - started,
        source: "ran",
        timings,
        ...(changed.length > 0 ? { inputsChanged: true } : {})
      }, true)
      if (!result.succeeded) yield* sandbox.markFailed
      else if (sandboxes.keep !== "always") {
        // Its group is gone and its outputs are in the store: write-back may rename them into place (see `Handoff`).
        for (const [abs, digest] of captured.files) sandboxes.handoff.offer(abs, digest)
      }
      return result
    }))
}
