/**
 * Sandboxes as scoped resources: a fresh directory per process, removed by its finalizer even when the process
 * left a read-only tree behind, kept for debugging on request with a `__run.sh` that re-runs the process.
 *
 * @since 0.1.0
 */
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import * as Ref from "effect/Ref"
import * as Scope from "effect/Scope"
import * as fs from "node:fs"
import * as path from "node:path"
import type * as Digest from "../../domain/Digest.js"
import { type KeepSandboxes, SandboxError } from "../../domain/Sandbox.js"
import type * as UnsafeDirectory from "../../domain/UnsafeDirectory.js"
import { cacheDir } from "../../os/CacheDir.js"
import { describeErrno, errnoOf } from "../../os/Errno.js"
import * as PrivateRoot from "../../os/PrivateRoot.js"
import * as Proc from "../../os/Proc.js"
import * as Handoffs from "./internal/handoff.js"
import * as SandboxDir from "./internal/sandboxDir.js"

/**
 * What `__run.sh` re-runs.
 *
 * @since 0.1.0
 * @category models
 */
export interface Command {
  readonly argv: ReadonlyArray<string>
  readonly env: Readonly<Record<string, string>>
  /** Relative to the sandbox. */
  readonly workingDirectory?: string
}

/**
 * @since 0.1.0
 * @category models
 */
export interface Sandbox {
  readonly path: string
  /**
   * Whether it may hold what a finished process left (made with `used`), for `Store.materialize`'s `reuse` to make
   * it hold exactly a tree; otherwise it is empty.
   */
  readonly reused: boolean
  /**
   * Records the command the sandbox runs, for the `__run.sh` of a kept sandbox: a function, called only when the
   * sandbox is kept (the script a kept sandbox re-runs its process with can cost more to make than the spawn itself).
   */
  readonly setCommand: (command: () => Command) => Effect.Effect<void>
  /** Records that the process failed, for `keepSandboxes: on-failure`. */
  readonly markFailed: Effect.Effect<void>
}

/**
 * @since 0.1.0
 * @category models
 */
export interface SweepReport {
  readonly removed: ReadonlyArray<string>
  readonly kept: number
  readonly failed: ReadonlyArray<{ readonly path: string; readonly detail: string }>
}

/**
 * @since 0.1.0
 * @category models
 */
export interface Service {
  readonly root: string
  readonly keep: KeepSandboxes
  /**
   * A sandbox of its own for a process, removed (or kept, per `keep`) when the scope closes: by `remove` if given
   * (the runner has its spawner remove it, off the engine's thread), else here, or here again if `remove` fails.
   * It is empty, unless `used` allows one a finished process left (see `Sandbox.reused`): then, given how many
   * directories and other entries the tree to be written holds (`wanted`), the one nearest to it, or a new one when
   * every idle one is further from it than an empty one.
   */
  readonly make: (
    description?: string,
    remove?: (sandbox: string) => Effect.Effect<void, unknown>,
    options?: {
      readonly used?: boolean
      readonly wanted?: { readonly dirs: number; readonly files: number }
    }
  ) => Effect.Effect<Sandbox, SandboxError, Scope.Scope>
  /** Removes sandboxes whose owner is dead (and kept ones too, with `kept`). */
  readonly sweep: (options?: { readonly kept?: boolean }) => Effect.Effect<SweepReport, SandboxError>
  /** Sandboxes that could not be removed in this process so far (each also logged as a warning). */
  readonly removalFailures: Effect.Effect<number>
  /**
   * Output files moved out of finished sandboxes for write-back to rename into place rather than write (see
   * `Handoff`); what nobody takes is removed when the scope closes.
   */
  readonly handoff: Handoff
}

/**
 * Output files handed from a finished sandbox to write-back by rename, not copy (the sandbox's handoff module says why).
 *
 * @since 0.1.0
 * @category models
 */
export interface Handoff {
  /** Moves `abs`, captured as `digest`, out of its sandbox for write-back to take; does nothing if it cannot. */
  readonly offer: (abs: string, digest: Digest.Digest) => void
  /**
   * Moves an offered file holding `digest` to `dest` (absent, in the directory it will be renamed within) with
   * `mode` under the umask; false, leaving nothing at `dest`, when none is offered or it is not fit to keep.
   */
  readonly take: (digest: Digest.Digest, dest: string, mode: number) => boolean
  /** How many offered files are waiting. */
  readonly held: () => number
}

/**
 * @since 0.1.0
 * @category tags
 */
export class Sandboxes extends Context.Tag("kiln/Sandboxes")<Sandboxes, Service>() {}

/**
 * @since 0.1.0
 * @category models
 */
export interface Options {
  /**
   * Default `$KILN_SANDBOX_ROOT`, else `$XDG_CACHE_HOME/kiln/sandboxes` (`~/.cache/kiln/sandboxes`): the user's own,
   * made 0700, and beside the default store, so that large files are hard-linked rather than copied. One that
   * another user owns or can write (or could replace) is refused (`UnsafeDirectory`).
   */
  readonly root?: string
  readonly keep?: KeepSandboxes
  /** Sweep orphaned sandboxes in the background when the layer starts. Default true. */
  readonly sweepOnStart?: boolean
  /**
   * Whether a finished sandbox, as its process left it, may be refilled for the next process (see `Refill`); without,
   * only emptied ones are reused, and every tree is written into an empty directory. Default true.
   */
  readonly reuse?: boolean
}

/**
 * @since 0.1.0
 * @category constructors
 */
export const defaultRoot = (env: NodeJS.ProcessEnv = process.env): string =>
  cacheDir("sandboxes", "KILN_SANDBOX_ROOT", env)

const quote = (s: string) => `'${s.replace(/'/g, `'\\''`)}'`

/** A script that re-runs the process exactly: same directory, an environment of exactly its variables, same argv. */
const runScript = (sandbox: string, command: Command) => {
  const cwd = command.workingDirectory === undefined || command.workingDirectory === ""
    ? sandbox
    : path.join(sandbox, command.workingDirectory)
  const env = Object.keys(command.env).sort().map((k) => quote(`${k}=${command.env[k]}`))
  return `#!/bin/sh\n# Re-runs the process of this kept kiln sandbox.\ncd ${quote(cwd)} && exec env -i ${
    env.join(" ")
  }${env.length > 0 ? " " : ""}${command.argv.map(quote).join(" ")}\n`
}

const sweepError = (root: string) => (e: unknown) =>
  new SandboxError({
    reason: "Sweep",
    path: root,
    detail: `cannot sweep orphaned sandboxes: ${describeErrno(e)}`,
    ...(errnoOf(e) !== undefined ? { errno: errnoOf(e)! } : {})
  })

/**
 * @since 0.1.0
 * @category constructors
 */
export const make = (
  options: Options = {}
): Effect.Effect<Service, UnsafeDirectory.UnsafeDirectory, Scope.Scope> =>
  Effect.gen(function*() {
    const root = path.resolve(options.root ?? defaultRoot())
    // A root another user made first (`/dev/shm/kiln`), or one others can write or swap, would let them read every
    // process's inputs and replace a running sandbox: refused before any sandbox is made or swept there. A missing
    // one is made on first need (see `SandboxDir.create`), where only this user can make it: the check says so.
    yield* PrivateRoot.verify("sandbox root", root, "own")
    const keep = options.keep ?? "never"
    const owner = Proc.self()
    const failures = yield* Ref.make(0)
    const reuse = options.reuse ?? true
    const idle = SandboxDir.pool(root, owner, { keepUsed: reuse })

    const removalFailed = (dir: string, error: unknown) =>
      Effect.zipRight(
        Ref.update(failures, (n) => n + 1),
        Effect.logWarning(`could not remove sandbox ${dir}: ${describeErrno(error)}`).pipe(
          Effect.annotateLogs({ path: dir, errno: errnoOf(error) ?? "unknown" })
        )
      )

    const release = (
      dir: string,
      description: string,
      command: (() => Command) | undefined,
      keepIt: boolean,
      remove: ((sandbox: string) => Effect.Effect<void, unknown>) | undefined
    ) =>
      Effect.gen(function*() {
        if (keepIt) {
          const kept = yield* Effect.try(() => {
            SandboxDir.markKept(dir, owner)
            if (command !== undefined) {
              fs.writeFileSync(path.join(dir, "__run.sh"), runScript(dir, command()), { mode: 0o755 })
            }
          }).pipe(Effect.either)
          if (kept._tag === "Right") {
            // Its process's logs are in the store already.
            SandboxDir.removeLogs(dir)
            return yield* Effect.logInfo(`kept the sandbox of ${description}: ${dir}`)
          }
          yield* Effect.logWarning(
            `could not keep the sandbox of ${description} (${describeErrno(kept.left.error)}); removing it`
          )
        }
        if (!keepIt && idle.recycle(dir)) return
        if (!keepIt && remove !== undefined) {
          const removedElsewhere = yield* Effect.either(remove(dir))
          if (Either.isRight(removedElsewhere)) return
          yield* Effect.logDebug(`removing ${dir} here: ${describeErrno(removedElsewhere.left)}`)
        }
        // Nothing is beside a sandbox but its name says whose it is; a failed keep (an owner file) or a failed
        // `remove` (anything) may have left more, which the whole removal takes too.
        const removeAll = keepIt || remove !== undefined ? SandboxDir.remove : SandboxDir.removeOwn
        const removed = yield* Effect.try(() => removeAll(dir)).pipe(Effect.either)
        if (removed._tag === "Left") yield* removalFailed(dir, removed.left.error)
      })

    yield* Effect.addFinalizer(() =>
      Effect.forEach(idle.drain(), (f) => removalFailed(f.path, f.error), { discard: true })
    )
    const handoff = Handoffs.make(root, owner)
    yield* Effect.addFinalizer(() =>
      Effect.suspend(() => {
        const dir = handoff.directory()
        return Effect.try(() => handoff.close()).pipe(Effect.catchAll((e) => removalFailed(dir ?? root, e.error)))
      })
    )

    const service: Service = {
      root,
      keep,
      make: (description = "a process", remove, makeOptions) =>
        Effect.gen(function*() {
          const state = { command: undefined as (() => Command) | undefined, failed: false }
          // On the scope itself (as `Effect.acquireRelease` would, less its diffs of the fiber's references before
          // and after the release, which cost more than the release here): a sandbox's release needs none of them.
          const { path: dir, entries } = yield* Effect.uninterruptible(Effect.tap(
            Effect.try({
              try: (): SandboxDir.Idle =>
                idle.take(reuse && makeOptions?.used === true, makeOptions?.wanted) ??
                  { path: SandboxDir.create(root, owner), entries: 0, shape: { dirs: 0, files: 0 } },
              catch: (e) =>
                new SandboxError({
                  reason: "Create",
                  path: root,
                  detail: `cannot create a sandbox: ${describeErrno(e)}`,
                  ...(errnoOf(e) !== undefined ? { errno: errnoOf(e)! } : {})
                })
            }),
            ({ path: dir }) =>
              Effect.flatMap(Effect.scope, (scope) =>
                Scope.addFinalizerExit(scope, (exit) =>
                  release(
                    dir,
                    description,
                    state.command,
                    keep === "always" || (keep === "on-failure" && (Exit.isFailure(exit) || state.failed)),
                    remove
                  )))
          ))
          return {
            path: dir,
            reused: entries > 0,
            setCommand: (command) => Effect.sync(() => void (state.command = command)),
            markFailed: Effect.sync(() => void (state.failed = true))
          }
        }),
      sweep: (opts) =>
        Effect.try({
          try: () => SandboxDir.sweep(root, opts?.kept === true ? { kept: true } : {}),
          catch: sweepError(root)
        }).pipe(
          Effect.tap((r) =>
            Effect.forEach(r.failed, (f) =>
              Effect.zipRight(
                Ref.update(failures, (n) => n + 1),
                Effect.logWarning(`could not remove orphaned sandbox ${f.path}: ${describeErrno(f.error)}`)
              ), { discard: true })
          ),
          Effect.map((r) => ({
            removed: r.removed,
            kept: r.kept,
            failed: r.failed.map((f) => ({ path: f.path, detail: describeErrno(f.error) }))
          }))
        ),
      removalFailures: Ref.get(failures),
      handoff
    }
    if (options.sweepOnStart !== false) {
      yield* Effect.forkScoped(
        service.sweep().pipe(
          Effect.catchAll((e) => Effect.logWarning(e.message)),
          Effect.withSpan("Sandboxes.sweepOnStart")
        )
      )
    }
    return service
  })

/**
 * @since 0.1.0
 * @category layers
 */
export const layer = (options: Options = {}): Layer.Layer<Sandboxes, UnsafeDirectory.UnsafeDirectory> =>
  Layer.scoped(Sandboxes, make(options))

/**
 * Who made a sandbox: a process, by pid and start time (a recycled pid is not mistaken for it).
 *
 * @since 0.1.0
 * @category models
 */
export interface Owner {
  // Proc.Owner's fields, spelled out: a public module's declarations name only modules the package exports.
  readonly pid: number
  /** Start time in clock ticks since boot; empty where it could not be read. */
  readonly startTime: string
  /** A kept sandbox is the user's to inspect: sweeps leave it to `kiln clean --kept`. */
  readonly kept?: boolean
}

/**
 * The sandboxes under `roots` that `owner` made and did not keep, found by their names (or owner files): what a
 * watchdog removes after its engine died, without the engine telling it anything per process.
 *
 * @since 0.1.0
 * @category sandboxes
 */
export const ownedBy: (roots: Iterable<string>, owner: Owner) => Array<string> = SandboxDir.ownedBy

/**
 * Removes a sandbox, read-only parts included, with its logs and owner file.
 *
 * @since 0.1.0
 * @category sandboxes
 */
export const remove: (sandbox: string) => void = SandboxDir.remove

/**
 * Where a process running in `sandbox` writes its stdout and stderr: files beside it, read into the store once its
 * process group is gone.
 *
 * @since 0.1.0
 * @category sandboxes
 */
export const logsOf = (sandbox: string): { readonly stdout: string; readonly stderr: string } => ({
  stdout: `${sandbox}${SandboxDir.STDOUT_SUFFIX}`,
  stderr: `${sandbox}${SandboxDir.STDERR_SUFFIX}`
})
