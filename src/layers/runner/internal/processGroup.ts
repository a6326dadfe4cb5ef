/**
 * A child process in a process group of its own, whose group dies with the fiber that started it: on interruption
 * or timeout, SIGTERM to the whole group, a grace period, then SIGKILL to the group, and the group is awaited
 * until no member is left. Effect's own CommandExecutor sends SIGTERM only and then waits forever.
 *
 * @internal
 */
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Schedule from "effect/Schedule"
import * as Scope from "effect/Scope"
import { SpawnError } from "../../../domain/Process.js"
import { describeErrno, errnoOf } from "../../../os/Errno.js"
import * as Proc from "../../../os/Proc.js"
import * as Spawner from "../../spawner/Spawner.js"

/** @internal */
export type Exit = Spawner.Exit

/** @internal */
export interface Group {
  readonly pgid: number
  /** The leader's exit; fails only when the spawner died meanwhile and the exit is unknown. */
  readonly exited: Deferred.Deferred<Exit, SpawnError>
  /** Set once the group was seen empty: its pgid may be reused by then, and must never be signalled again. */
  ended: boolean
}

const signalGroup = (pgid: number, signal: NodeJS.Signals) => {
  try {
    process.kill(-pgid, signal)
  } catch (e) {
    if (errnoOf(e) !== "ESRCH") throw e
  }
}

/**
 * Records what the spawner saw when the leader exited: a group with no member left then is over for good (no process
 * can join a group that has none), so ending it costs nothing.
 *
 * @internal
 */
export const exitSeen = (group: Group, exit: Exit): void => {
  if (exit.alone === true) group.ended = true
}

/**
 * Ends the group: SIGTERM, up to `grace` for the leader to exit, SIGKILL to every member left, then waits (bounded)
 * until the group is empty. Finalizers run uninterruptibly, so the waits are made interruptible for their timeouts.
 *
 * @internal
 */
export const terminate = (group: Group, grace: Duration.DurationInput): Effect.Effect<void> =>
  Effect.gen(function*() {
    if (group.ended) return
    // The common case, a leader that exited alone: nothing to signal or wait for.
    if (!Proc.groupAlive(group.pgid)) return void (group.ended = true)
    if (!(yield* Deferred.isDone(group.exited))) {
      yield* Effect.sync(() => signalGroup(group.pgid, "SIGTERM"))
      yield* Effect.interruptible(Deferred.await(group.exited)).pipe(Effect.timeout(grace), Effect.option)
    }
    // Whatever is left of the group (the leader, or grandchildren that outlived it) is killed outright.
    yield* Effect.sync(() => signalGroup(group.pgid, "SIGKILL"))
    yield* Effect.interruptible(
      Effect.repeat(Effect.sync(() => Proc.groupAlive(group.pgid)), {
        until: (alive) => !alive,
        schedule: Schedule.spaced("5 millis")
      })
    ).pipe(Effect.timeout("10 seconds"), Effect.option)
    if (!Proc.groupAlive(group.pgid)) group.ended = true
  })

/** A start worth trying again: the binary was busy (ETXTBSY), or the spawner died before it answered. */
interface Retryable {
  readonly retry: string
}

const spawnOnce = (spawner: Spawner.Spawner, request: Spawner.Request) =>
  spawner.spawn(request).pipe(
    Effect.map((started): Group => ({ pgid: started.pid, exited: started.exited, ended: false })),
    Effect.mapError((e): SpawnError | Retryable =>
      e instanceof SpawnError
        ? e
        : e.code === "ETXTBSY"
        ? { retry: "text file busy (ETXTBSY), retried" }
        : e.code === Spawner.LOST
        ? { retry: e.message }
        : new SpawnError({ argv0: request.argv[0]!, detail: describeErrno(e) })
    )
  )

/**
 * Spawns `argv` in its own process group, scoped: closing the scope ends the group (see {@link terminate}).
 * ETXTBSY — an executable that was just written and is still open somewhere — is retried with a short backoff,
 * as Pants does; so is a request the spawner died before answering (it goes to a new spawner).
 *
 * The wait for the spawner's answer is interruptible: a spawner that stopped reading must not leave a run that
 * ignores Ctrl-C and SIGTERM. A group started by then is ended all the same; one that starts later is killed by the
 * spawner's client (see `Spawner.ts`).
 *
 * @internal
 */
export const spawnGroup = (
  spawner: Spawner.Spawner,
  request: Spawner.Request,
  grace: Duration.DurationInput
): Effect.Effect<Group, SpawnError, Scope.Scope> =>
  Effect.uninterruptibleMask((restore) => {
    let started: Group | undefined
    // The retry's schedule is driven only after a first try failed: a schedule per spawn is work every process paid.
    const spawned = spawnOnce(spawner, request).pipe(
      Effect.catchIf(
        (e): e is Retryable => "retry" in e,
        () =>
          spawnOnce(spawner, request).pipe(
            Effect.retry({
              while: (e) => "retry" in e,
              schedule: Schedule.exponential("1 millis", 2).pipe(Schedule.upTo("100 millis"))
            })
          )
      ),
      Effect.catchIf(
        (e): e is Retryable => "retry" in e,
        (e) => Effect.fail(new SpawnError({ argv0: request.argv[0]!, detail: e.retry }))
      ),
      Effect.tap((group) => void (started = group))
    )
    return restore(spawned).pipe(
      // Interrupted between its start and here: nobody else holds the group to end it.
      Effect.onInterrupt(() => started !== undefined ? terminate(started, grace) : Effect.void),
      // On the scope itself: ending a group needs none of the spawning fiber's references.
      Effect.tap((group) => Effect.flatMap(Effect.scope, (scope) => Scope.addFinalizer(scope, terminate(group, grace))))
    )
  })

/** @internal */
export const defaultGrace = Duration.seconds(3)
