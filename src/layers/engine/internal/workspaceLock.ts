/**
 * One run at a time writes back into a workspace: a run takes the workspace's lock before its first write-back and
 * keeps it to its end, so the outputs a workspace holds are always one run's, never two runs' files interleaved (or
 * one run's prune removing the other's temp file). A run that finds the lock held says so once and waits, as Bazel
 * does; a run that does not write back (the CLI's no-op answer) never takes it.
 *
 * The lock is a `GenerationLock` (it survives its holder's `kill -9`) in a directory named by the workspace's device
 * and inode: the same workspace reached by two paths (a symlink, a bind mount) is one lock. It lives with kiln's own
 * files, not in the workspace, and not in the store: two runs on different stores write the same workspace, so the
 * CLI keeps it in the user's cache directory (`~/.cache/kiln/locks`), as Bazel keeps its lock in the output base.
 * That directory must be the user's alone, as the store's root must (`os/PrivateDir.ts`): whoever else can write it
 * can plant a holder (every run waits on it) or remove one (two runs write one workspace at once).
 *
 * @internal
 */
import * as Effect from "effect/Effect"
import * as Schedule from "effect/Schedule"
import type * as Scope from "effect/Scope"
import * as fs from "node:fs"
import * as path from "node:path"
import type { StoreError } from "../../../domain/StoreErrors.js"
import { describeErrno, errnoOf } from "../../../os/Errno.js"
import * as GenerationLock from "../../../os/GenerationLock.js"
import { ioError } from "../../../os/IoError.js"
import { mkdirp } from "../../../os/Mkdirp.js"
import * as PrivateDir from "../../../os/PrivateDir.js"
import * as Proc from "../../../os/Proc.js"

/** How often a waiting run looks again: soon at first, then every quarter second. */
const WAIT = Schedule.exponential("5 millis", 2).pipe(Schedule.union(Schedule.spaced("250 millis")))

/** @internal */
export interface WorkspaceLock {
  /**
   * Takes the lock the first time (waiting while another run holds it), then holds it to the end of the run's
   * scope. Says whether the run before died holding it, during its write-back: its temp files may lie beside outputs.
   */
  readonly hold: Effect.Effect<{ readonly previousDied: boolean }, StoreError>
}

/** What a directory kiln cannot make says: the user's cache directory is read-only, not theirs, or not one. */
const unwritable = (e: unknown) => ["EACCES", "EPERM", "EROFS", "ENOTDIR"].includes(errnoOf(e) ?? "")

/**
 * The lock of `workspace`, kept under `root` (or, when kiln cannot write there, under `fallback`, saying so),
 * released when the scope closes if it was taken. @internal
 */
export const make = (
  workspace: string,
  root: string,
  fallback: string
): Effect.Effect<WorkspaceLock, never, Scope.Scope> =>
  Effect.gen(function*() {
    const me = Proc.self()
    let held: { readonly dir: string; readonly generation: number } | undefined
    yield* Effect.addFinalizer(() =>
      held === undefined ? Effect.void : Effect.try(() => GenerationLock.release(held!.dir, held!.generation, me)).pipe(
        // Left held by a process about to exit: the next run finds its holder dead and takes it.
        Effect.catchAll((e) =>
          Effect.logWarning(`could not release the workspace lock in ${held!.dir}: ${describeErrno(e.error)}`)
        )
      )
    )
    const take = Effect.gen(function*() {
      const key = yield* Effect.try({
        try: () => {
          // A workspace that is not there yet is made, as write-back would make it.
          if (!fs.existsSync(workspace)) mkdirp(workspace)
          const st = fs.statSync(workspace, { bigint: true })
          return `${st.dev}-${st.ino}`
        },
        catch: ioError(workspace, "cannot take the workspace lock")
      })
      const usable = yield* Effect.try(() => {
        // Made 0700, and judged once made: another user's directory there (made first under a sticky /tmp), or one
        // others can write, would let them plant a holder (runs wait on it) or remove one (two runs write at once).
        const unsafe = PrivateDir.ensure(root, "own")
        if (unsafe !== undefined) throw new PrivateDir.UnsafeDirectoryError("workspace lock directory", root, unsafe)
      }).pipe(
        Effect.as(root),
        Effect.catchAll((e) =>
          unwritable(e.error) && fallback !== root
            ? Effect.as(
              Effect.logWarning(
                `cannot keep the workspace lock in ${root} (${describeErrno(e.error)}): kept in the store instead, ` +
                  "where runs on another store do not see it"
              ),
              fallback
            )
            : Effect.fail(ioError(root, "cannot take the workspace lock")(e.error))
        )
      )
      const dir = path.join(usable, key)
      let said = false
      let stale = false
      const attempt = Effect.try({
        try: () => {
          const a = GenerationLock.tryTake(dir, me, workspace)
          // Noted at once: an interruption from here on still releases it.
          if (a._tag === "Taken") {
            held = { dir, generation: a.generation }
            stale = a.stale !== undefined
          }
          return a
        },
        catch: ioError(dir, "cannot take the workspace lock")
      }).pipe(Effect.tap((a) => {
        if (a._tag === "Taken" || said) return Effect.void
        said = true
        return Effect.logInfo(`waiting for another kiln run in this workspace (pid ${a.by.pid})`)
      }))
      yield* Effect.repeat(attempt, { schedule: WAIT, until: (a) => a._tag === "Taken" })
      return { previousDied: stale }
    })
    return { hold: yield* Effect.cached(take) }
  })
