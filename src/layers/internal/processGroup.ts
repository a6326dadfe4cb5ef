/**
 * A child process in a process group of its own, whose group dies with the fiber that started it: on interruption
 * or timeout, SIGTERM to the whole group, a grace period, then SIGKILL to the group, and the group is awaited
 * until no member is left. Effect's own CommandExecutor sends SIGTERM only and then waits forever.
 *
 * @internal
 */
import { Deferred, Duration, Effect, FiberId, Schedule, type Scope } from "effect"
import { type ChildProcess, spawn } from "node:child_process"
import * as fs from "node:fs"
import { SpawnError } from "../../domain/Process.js"
import { describeErrno, errnoOf } from "./errno.js"

/** @internal */
export interface Exit {
  readonly code: number | null
  readonly signal: NodeJS.Signals | null
}

/** @internal */
export interface Group {
  readonly child: ChildProcess
  readonly pgid: number
  readonly exited: Deferred.Deferred<Exit>
  /** Set once the group was seen empty: its pgid may be reused by then, and must never be signalled again. */
  ended: boolean
}

/**
 * Whether any member of the group still runs. Members that were killed but not yet reaped (zombies: orphans wait for
 * init to reap them, which can take a while in containers) are dead, although `kill(-pgid, 0)` still finds them.
 *
 * @internal
 */
export const groupAlive = (pgid: number): boolean => {
  try {
    process.kill(-pgid, 0)
  } catch (e) {
    if (errnoOf(e) !== "EPERM") return false
  }
  let pids: Array<string>
  try {
    pids = fs.readdirSync("/proc").filter((p) => p.charCodeAt(0) >= 48 && p.charCodeAt(0) <= 57)
  } catch {
    return true
  }
  for (const pid of pids) {
    try {
      const stat = fs.readFileSync(`/proc/${pid}/stat`, "utf8")
      const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ")
      if (fields[2] === String(pgid) && fields[0] !== "Z") return true
    } catch {
      // It exited while we looked.
    }
  }
  return false
}

const signalGroup = (pgid: number, signal: NodeJS.Signals) => {
  try {
    process.kill(-pgid, signal)
  } catch (e) {
    if (errnoOf(e) !== "ESRCH") throw e
  }
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
    if (groupAlive(group.pgid)) {
      if (!(yield* Deferred.isDone(group.exited))) {
        yield* Effect.sync(() => signalGroup(group.pgid, "SIGTERM"))
        yield* Effect.interruptible(Deferred.await(group.exited)).pipe(Effect.timeout(grace), Effect.option)
      }
      // Whatever is left of the group (the leader, or grandchildren that outlived it) is killed outright.
      yield* Effect.sync(() => signalGroup(group.pgid, "SIGKILL"))
    }
    yield* Effect.interruptible(
      Effect.repeat(Effect.sync(() => groupAlive(group.pgid)), {
        until: (alive) => !alive,
        schedule: Schedule.spaced("5 millis")
      })
    ).pipe(Effect.timeout("10 seconds"), Effect.option)
    if (!groupAlive(group.pgid)) group.ended = true
  })

/** @internal */
export interface SpawnOptions {
  readonly argv: ReadonlyArray<string>
  readonly cwd: string
  readonly env: Readonly<Record<string, string>>
}

const spawnOnce = (options: SpawnOptions): Effect.Effect<Group, SpawnError | { readonly etxtbsy: true }> =>
  Effect.async<Group, SpawnError | { readonly etxtbsy: true }>((resume) => {
    const child = spawn(options.argv[0]!, options.argv.slice(1), {
      cwd: options.cwd,
      env: { ...options.env },
      // A new session and process group: a signal to -pgid reaches every descendant that did not leave it.
      detached: true,
      stdio: ["ignore", "pipe", "pipe"]
    })
    child.once("error", (e) => {
      if (errnoOf(e) === "ETXTBSY") return resume(Effect.fail({ etxtbsy: true } as const))
      resume(Effect.fail(new SpawnError({ argv0: options.argv[0]!, detail: describeErrno(e) })))
    })
    child.once("spawn", () => {
      const exited = Deferred.unsafeMake<Exit>(FiberId.none)
      child.once("exit", (code, signal) => Deferred.unsafeDone(exited, Effect.succeed({ code, signal })))
      resume(Effect.succeed({ child, pgid: child.pid!, exited, ended: false }))
    })
  })

/**
 * Spawns `argv` in its own process group, scoped: closing the scope ends the group (see {@link terminate}).
 * ETXTBSY — an executable that was just written and is still open somewhere — is retried with a short backoff,
 * as Pants does.
 *
 * @internal
 */
export const spawnGroup = (
  options: SpawnOptions,
  grace: Duration.DurationInput
): Effect.Effect<Group, SpawnError, Scope.Scope> =>
  Effect.acquireRelease(
    spawnOnce(options).pipe(
      Effect.retry({
        while: (e) => "etxtbsy" in e,
        schedule: Schedule.exponential("1 millis", 2).pipe(Schedule.upTo("100 millis"))
      }),
      Effect.catchIf(
        (e): e is { readonly etxtbsy: true } => "etxtbsy" in e,
        () => Effect.fail(new SpawnError({ argv0: options.argv[0]!, detail: "text file busy (ETXTBSY), retried" }))
      )
    ),
    (group) => terminate(group, grace)
  )

/** @internal */
export const defaultGrace = Duration.seconds(3)
