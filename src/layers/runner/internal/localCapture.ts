/**
 * A local run's last phases, once its group is gone: its linked inputs checked, its logs and declared outputs stored,
 * and its result made (the sandbox marked failed, or its outputs offered to write-back).
 *
 * @internal
 */
import * as Effect from "effect/Effect"
import * as fs from "node:fs"
import * as path from "node:path"
import * as Digest from "../../../domain/Digest.js"
import { type Process, ProcessResult, type SandboxKind } from "../../../domain/Process.js"
import { StoreError } from "../../../domain/StoreErrors.js"
import { ioError } from "../../../os/IoError.js"
import type * as Sandboxes from "../../sandbox/Sandboxes.js"
import * as LinkedInputs from "../../store/LinkedInputs.js"
import type { LocalRun } from "./localRun.js"
import type { Filled, Opened } from "./localSandbox.js"
import type { Guard, Waited } from "./localSpawn.js"
import { undeclaredWrites } from "./localUndeclared.js"

/**
 * A blob changed through a hard link is removed from the store, and the process's result refused: its input was not
 * what its digest says, whoever wrote it (itself, or another process of the run linked to the same blob).
 *
 * @internal
 */
export const refuseCorrupted = (opened: Opened, guard: Guard) =>
  Effect.gen(function*() {
    const corrupted = yield* guard.checkAfter
    if (corrupted.length > 0) {
      yield* opened.sandbox.markFailed
      return yield* new StoreError({ reason: "Corrupt", detail: LinkedInputs.refusal(corrupted) })
    }
  })

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
export interface Captured {
  readonly stdoutDigest: Digest.Digest
  readonly stderrDigest: Digest.Digest
  readonly outputDigest: Digest.Digest
  /** Each output file's path and digest, for write-back to take (see `Handoff`). */
  readonly files: ReadonlyArray<readonly [string, Digest.Digest]>
}

/**
 * Stores stdout and stderr with the declared outputs, in the same commits; a large log is streamed from its file.
 *
 * @internal
 */
export const capture = (run: LocalRun, filled: Filled, logs: ReturnType<typeof Sandboxes.logsOf>) =>
  Effect.gen(function*() {
    const { store } = run.engine
    const { proc } = run
    const captureStarted = Date.now()
    const outputs = {
      outputFiles: proc.outputFiles,
      outputDirectories: proc.outputDirectories,
      outputSymlinks: proc.outputSymlinks
    }
    const [out, err] = yield* Effect.zip(readLog(logs.stdout), readLog(logs.stderr))
    const inMemory = typeof out !== "string" && typeof err !== "string"
    const captured = yield* store.capture(filled.cwd, outputs, inMemory ? [out, err] : [])
    const [stdoutDigest, stderrDigest] = inMemory ? captured.blobs as readonly [Digest.Digest, Digest.Digest] : [
      yield* typeof out === "string" ? store.putFilePath(out) : store.putFile(out),
      yield* typeof err === "string" ? store.putFilePath(err) : store.putFile(err)
    ]
    run.timings.capture = Date.now() - captureStarted
    return { stdoutDigest, stderrDigest, outputDigest: captured.tree, files: captured.files } satisfies Captured
  })

/** Whether anything (a symlink too) is at `file`. */
const isThere = (file: string) => fs.lstatSync(file, { throwIfNoEntry: false }) !== undefined

/**
 * The declared outputs, not optional, that are not in the working directory `cwd`: directories with their `/`, as
 * kiln.json writes them.
 *
 * @internal
 */
export const missingOutputs = (proc: Process, cwd: string): Array<string> => {
  const optional = new Set(proc.optionalOutputs)
  const at = (out: string) => path.join(cwd, ...out.split("/"))
  return [
    ...proc.outputFiles.filter((f) => !optional.has(f) && !isThere(at(f))),
    ...proc.outputDirectories.filter((d) => !optional.has(d) && !isThere(at(d))).map((d) => `${d}/`)
  ]
}

/** The warning for `missing` outputs of `proc`, and how to say they may be missing. */
const missingWarning = (proc: Process, missing: ReadonlyArray<string>) =>
  `${proc.description}: ${missing.length === 1 ? "declared output" : "declared outputs"} ${missing.join(", ")} ` +
  `${missing.length === 1 ? "was" : "were"} not made: its result is not cached (an output it may leave unmade is ` +
  `declared with a leading ?: ${JSON.stringify(`?${missing[0]}`)})`

/**
 * The process's result. A workspace directory it mounted that changed meanwhile is warned of, and marks the result
 * as not cacheable; a failed one marks its sandbox failed (to keep it, per `keepSandboxes`).
 *
 * @internal
 */
export const report = (
  run: LocalRun,
  opened: Opened,
  filled: Filled,
  waited: Waited,
  captured: Captured,
  sandbox: SandboxKind
) =>
  Effect.gen(function*() {
    const { sandboxes } = run.engine
    const { proc } = run
    const { exit, timedOut } = waited
    // Whether the workspace directories it mounted held meanwhile is checked later, for many processes at once: its
    // result is cached only if they did.
    const trees = filled.mounts.fromWorkspace
    const inputsCheck = trees.length === 0
      ? undefined
      : yield* run.engine.options.treeChecks.after(proc.description, trees)
    const succeeded = !timedOut && exit.code === 0
    const missing = succeeded ? missingOutputs(proc, filled.cwd) : []
    if (missing.length > 0) yield* Effect.logWarning(missingWarning(proc, missing))
    // Only for a success: a failure's outputs are not written back either, and its line is what matters. (A tree
    // that could not be listed failed the run before it spawned: the entries are there when it ran.)
    const undeclared = !succeeded || opened.entries === undefined
      ? undefined
      : yield* undeclaredWrites(opened.sandbox.path, proc, opened.layout, opened.entries)
    const result = new ProcessResult({
      exitCode: timedOut ? null : exit.code,
      signal: timedOut ? "SIGTERM" : exit.signal,
      timedOut,
      stdoutDigest: captured.stdoutDigest,
      stderrDigest: captured.stderrDigest,
      outputDigest: captured.outputDigest,
      actionDigest: Digest.empty,
      durationMs: Date.now() - run.started,
      source: "ran",
      timings: run.timings,
      ...(inputsCheck !== undefined ? { inputsCheck } : {}),
      ...(missing.length > 0 ? { missingOutputs: missing } : {}),
      ...(undeclared !== undefined ? { undeclaredWrites: undeclared } : {}),
      sandbox
    }, true)
    if (!result.succeeded) yield* opened.sandbox.markFailed
    else if (sandboxes.keep !== "always") {
      // Its group is gone and its outputs are in the store: write-back may rename them into place (see `Handoff`).
      for (const [abs, digest] of captured.files) sandboxes.handoff.offer(abs, digest)
    }
    return result
  })
