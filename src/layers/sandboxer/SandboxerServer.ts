/**
 * The sandboxer's request handlers and its watchdog over the parent engine.
 *
 * Why a separate process at all: a large input tree (thousands of files) written on the engine's one thread would hold
 * up every other process of the run; the sandboxer writes it beside the engine, and never spawns a child, so nothing
 * it writes is ever open in a forked process (`ETXTBSY`). Trees up to a shared tree's size the engine writes itself
 * (see the runner's `localSandbox.writableHere`). Its watchdog over the engine is its other task.
 *
 * A public module of the sandboxer concern for its program (`src/programs/sandboxer.ts`), not exported from the
 * package.
 */
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Schedule from "effect/Schedule"
import * as Digest from "../../domain/Digest.js"
import type { StoreConfigConflict, StoreError } from "../../domain/StoreErrors.js"
import type { UnsafeDirectory } from "../../domain/UnsafeDirectory.js"
import { describeErrno, errnoOf } from "../../os/Errno.js"
import * as MountNamespace from "../../os/mounts/MountNamespace.js"
import * as Proc from "../../os/Proc.js"
import * as Sandboxes from "../sandbox/Sandboxes.js"
import type * as Store from "../store/Store.js"
import * as Paths from "./internal/paths.js"
import { FailedPrecondition, NotFound } from "./Rpc.js"

/** Where the sandboxer listening on a socket writes its log: its program removes it when it ends cleanly. */
export const logPathOf = (socket: string): string => Paths.logPathOf(socket)

/** @internal */
export interface State {
  /** Sandbox roots whose sandboxes owned by the parent die with it. */
  readonly roots: Set<string>
  inFlight: number
  draining: boolean
  lastRequest: number
}

/** @internal */
export const makeState = (roots: Iterable<string> = []): State => ({
  roots: new Set(roots),
  inFlight: 0,
  draining: false,
  lastRequest: Date.now()
})

const tracked = <A, E>(state: State, effect: Effect.Effect<A, E>): Effect.Effect<A, E | FailedPrecondition> =>
  Effect.suspend((): Effect.Effect<A, E | FailedPrecondition> => {
    state.lastRequest = Date.now()
    if (state.draining) return Effect.fail(new FailedPrecondition({ reason: "the sandboxer is shutting down" }))
    state.inFlight++
    return Effect.ensuring(effect, Effect.sync(() => void state.inFlight--))
  })

/**
 * The request handlers. `store` opens the store on first use (memoized by the caller): a sandboxer whose engine
 * writes its small sandboxes itself may never need it, and opening 49 LMDB environments was a fifth of its start-up.
 *
 * @internal
 */
export const handlers = (
  store: Effect.Effect<Store.Service, StoreError | StoreConfigConflict | UnsafeDirectory>,
  state: State
) => ({
  Materialize: (req: {
    readonly digest: Digest.Digest
    readonly destination: string
    readonly mutablePaths: ReadonlyArray<string>
    readonly createDestination?: boolean | undefined
  }) =>
    tracked(
      state,
      Effect.logInfo(`materialize ${Digest.format(req.digest)} into ${req.destination}`).pipe(
        Effect.zipRight(Effect.flatMap(store, (s) =>
          s.materialize(req.digest, req.destination, {
            mutablePaths: req.mutablePaths,
            createDestination: req.createDestination !== false
          }))),
        Effect.catchTags({
          MissingDigest: (e) => Effect.fail(new NotFound({ digest: e.digest })),
          StoreError: (e) => Effect.fail(new FailedPrecondition({ reason: e.message, cause: e })),
          StoreConfigConflict: (e) => Effect.fail(new FailedPrecondition({ reason: e.message })),
          UnsafeDirectory: (e) => Effect.fail(new FailedPrecondition({ reason: e.message }))
        }),
        // A request is finished even when the server is told to stop: draining waits for it.
        Effect.uninterruptible
      )
    ),
  Watch: (req: { readonly root: string }) =>
    Effect.sync(() => {
      state.lastRequest = Date.now()
      state.roots.add(req.root)
    }),
  Ping: () => Effect.sync(() => ({ pid: process.pid }))
})

/**
 * Waits (bounded) for in-flight requests to finish, refusing new ones meanwhile. Runs in a finalizer, which is
 * uninterruptible: the timeout only works inside `interruptible`.
 *
 * @internal
 */
export const drain = (state: State, grace: Duration.DurationInput) =>
  Effect.gen(function*() {
    state.draining = true
    if (state.inFlight === 0) return
    yield* Effect.logInfo(`draining ${state.inFlight} in-flight request(s)`)
    const finished = yield* Effect.interruptible(
      Effect.repeat(Effect.sync(() => state.inFlight), {
        until: (n) => n === 0,
        schedule: Schedule.spaced("10 millis")
      })
    ).pipe(Effect.timeout(grace), Effect.option)
    if (finished._tag === "None") {
      yield* Effect.logWarning(`gave up on ${state.inFlight} request(s) after ${Duration.format(grace)}`)
    }
  })

/**
 * The process groups of processes whose working directory is inside one of the sandboxes (where they see it, at the
 * exec root or at its own path): every process a sandbox runs starts there, and the engine's spawner (which also
 * kills the groups it started when the engine dies) may be gone too.
 */
const groupsWorkingIn = (sandboxes: ReadonlyArray<string>): Set<number> =>
  // Never the sandboxer's own group, nor init's.
  Proc.groupsWorkingIn(sandboxes, (pgid) => pgid <= 1 || pgid === process.pid, MountNamespace.EXEC_ROOT)

/** SIGKILLs every process group working in a sandbox of `owner`, then removes those sandboxes. @internal */
export const destroyOwned = (state: State, owner: Sandboxes.Owner) =>
  Effect.gen(function*() {
    const sandboxes = Sandboxes.ownedBy(state.roots, owner)
    for (const pgid of groupsWorkingIn(sandboxes)) {
      try {
        process.kill(-pgid, "SIGKILL")
      } catch (e) {
        if (errnoOf(e) !== "ESRCH") {
          yield* Effect.logWarning(`could not kill process group ${pgid}: ${describeErrno(e)}`)
        }
      }
    }
    for (const sandbox of sandboxes) {
      yield* Effect.try(() => Sandboxes.remove(sandbox)).pipe(
        Effect.catchAll((e) => Effect.logWarning(`could not remove sandbox ${sandbox}: ${describeErrno(e.error)}`))
      )
    }
    return sandboxes.length
  })

/** @internal */
export interface Watch {
  readonly parentPid: number
  /** The parent's start time as /proc records it; guards against a recycled pid. Empty to skip the check. */
  readonly parentStartTime: string
  readonly idleTimeout: Duration.Duration
}

/**
 * Completes when the parent is gone (after destroying its sandboxes) or the sandboxer has idled too long.
 * Polled: a pid cannot be waited on by a process that is not its parent.
 *
 * @internal
 */
export const watch = (
  state: State,
  w: Watch,
  parentPipe?: NodeJS.ReadableStream
): Effect.Effect<"parent-died" | "idle"> =>
  Effect.gen(function*() {
    const parent = { pid: w.parentPid, startTime: w.parentStartTime }
    const parentAlive = () => Proc.ownerAlive(parent)
    const idleMs = Duration.toMillis(w.idleTimeout)
    const poll = Effect.gen(function*() {
      for (;;) {
        if (!parentAlive()) return "parent-died" as const
        // Never idle out while the parent has sandboxes: a process may run for longer than the timeout.
        if (
          state.inFlight === 0 && Date.now() - state.lastRequest > idleMs &&
          Sandboxes.ownedBy(state.roots, parent).length === 0
        ) return "idle" as const
        yield* Effect.sleep("200 millis")
      }
    })
    const pipeClosed = parentPipe === undefined ? Effect.never : Effect.async<"parent-died">((resume) => {
      const done = () => resume(Effect.succeed("parent-died"))
      parentPipe.once("end", done)
      parentPipe.once("close", done)
      parentPipe.once("error", done)
      parentPipe.resume()
    })
    const why = yield* Effect.raceFirst(poll, pipeClosed)
    if (why === "parent-died") {
      const n = yield* destroyOwned(state, parent)
      yield* Effect.logWarning(`parent ${w.parentPid} is gone: removed its ${n} sandbox(es) and ended what ran in them`)
    } else {
      yield* Effect.logInfo(`idle for ${Duration.format(w.idleTimeout)}: exiting`)
    }
    return why
  })
