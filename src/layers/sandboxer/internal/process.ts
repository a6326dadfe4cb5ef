/**
 * Starting and stopping the sandboxer child process, and where its socket goes.
 *
 * @internal
 */
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as FiberId from "effect/FiberId"
import { type ChildProcess, spawn } from "node:child_process"
import * as fs from "node:fs"
import { SandboxerUnavailable } from "../../../domain/Sandbox.js"
import { describeErrno, errnoOf } from "../../../os/Errno.js"
import * as Paths from "./paths.js"

export {
  fixedSocketDirectory,
  freshSocketDirectory,
  logPathOf,
  MAX_SOCKET_PATH,
  socketDirectory,
  socketPath
} from "./paths.js"

/** @internal */
export interface Child {
  readonly process: ChildProcess
  readonly pid: number
  readonly socket: string
  readonly log: string
  readonly exited: Deferred.Deferred<number | null>
  readonly ready: Deferred.Deferred<void, SandboxerUnavailable>
  /** Set when it exits, or could not be spawned. */
  readonly gone: { value: boolean }
}

const spawnNew = (command: ReadonlyArray<string>, args: ReadonlyArray<string>, dir: string) =>
  Effect.gen(function*() {
    const socket = Paths.socketPath(dir)
    if (socket.length > Paths.MAX_SOCKET_PATH) {
      return yield* new SandboxerUnavailable({
        reason: `socket path ${socket} is longer than ${Paths.MAX_SOCKET_PATH} bytes`
      })
    }
    const log = Paths.logPathOf(socket)
    const logFd = yield* Effect.try({
      try: () => {
        Paths.ensurePrivateDir(dir)
        return fs.openSync(log, "a", 0o600)
      },
      catch: (e) => new SandboxerUnavailable({ reason: `cannot prepare ${dir}: ${describeErrno(e)}` })
    })
    const child = yield* Effect.try({
      try: () =>
        spawn(command[0]!, [...command.slice(1), ...Paths.leadingArgs(socket), ...args], {
          // stdin is a pipe this process never writes to: when it dies, however it dies, the kernel closes it and
          // the sandboxer sees end-of-file at once (polling the pid stays as the fallback).
          stdio: ["pipe", "pipe", logFd],
          // Its own session: a Ctrl-C at the terminal goes to the engine's process group, and must not take the
          // watchdog away while the engine is still tearing its processes down (the engine sends SIGTERM itself).
          detached: true
        }),
      catch: (e) => new SandboxerUnavailable({ reason: `cannot spawn ${command[0]}: ${describeErrno(e)}` })
    }).pipe(Effect.ensuring(Effect.sync(() => fs.closeSync(logFd))))
    return { child, log, socket }
  })

/**
 * Starts the sandboxer without waiting for it: from here on it has its arguments, and whatever happens to this
 * process it will clean up after it once it is up. `ready` completes when
 * it says `ready` on stdout, or fails (with its log's path) when it exits first.
 *
 * @internal
 */
export const launch = (
  command: ReadonlyArray<string>,
  args: ReadonlyArray<string>,
  dir: string
): Effect.Effect<Child, SandboxerUnavailable> =>
  Effect.gen(function*() {
    const { child, log, socket } = yield* spawnNew(command, args, dir)
    const exited = Deferred.unsafeMake<number | null>(FiberId.none)
    const ready = Deferred.unsafeMake<void, SandboxerUnavailable>(FiberId.none)
    const gone = { value: false }
    let buffered = ""
    child.stdout!.on("data", (chunk: Buffer) => {
      buffered += chunk.toString("utf8")
      if (buffered.includes("ready")) {
        Deferred.unsafeDone(ready, Effect.void)
        child.stdout!.removeAllListeners("data")
        child.stdout!.resume()
      }
    })
    child.on("error", (e) => {
      gone.value = true
      Deferred.unsafeDone(
        ready,
        Effect.fail(new SandboxerUnavailable({ reason: `cannot spawn: ${describeErrno(e)}`, log }))
      )
      Deferred.unsafeDone(exited, Effect.succeed(null))
    })
    child.on("exit", (code) => {
      gone.value = true
      Deferred.unsafeDone(
        ready,
        Effect.fail(new SandboxerUnavailable({ reason: `it exited with code ${code} while starting`, log }))
      )
      Deferred.unsafeDone(exited, Effect.succeed(code))
    })
    return { process: child, pid: child.pid ?? 0, socket, log, exited, ready, gone }
  })

/**
 * The command line of a sandboxer started after this process died, to clean up after it (`args` as for
 * {@link launch}), and its log file. Its stdin is not a pipe from this process, so it goes by the pid alone.
 *
 * @internal
 */
export const postMortem = (
  command: ReadonlyArray<string>,
  args: ReadonlyArray<string>,
  dir: string
): { readonly argv: ReadonlyArray<string>; readonly log: string } => {
  Paths.ensurePrivateDir(dir)
  const socket = Paths.socketPath(dir)
  return {
    argv: [...command, ...Paths.leadingArgs(socket).filter((a) => a !== "--parent-pipe"), ...args],
    log: Paths.logPathOf(socket)
  }
}

/** Waits (bounded) until it is ready; one that does not get there is stopped. @internal */
export const awaitReady = (child: Child, timeout: Duration.DurationInput): Effect.Effect<void, SandboxerUnavailable> =>
  Deferred.await(child.ready).pipe(
    Effect.timeoutFail({
      duration: timeout,
      onTimeout: () =>
        new SandboxerUnavailable({ reason: `it did not start within ${Duration.format(timeout)}`, log: child.log })
    }),
    Effect.tapError(() => stop(child, Duration.seconds(1)))
  )

/**
 * SIGTERM (the sandboxer drains in-flight work), then SIGKILL after `grace`. Finalizers are uninterruptible, so the
 * wait is made interruptible for its timeout to fire.
 *
 * @internal
 */
export const stop = (child: Child, grace: Duration.DurationInput): Effect.Effect<void> =>
  Effect.gen(function*() {
    // No pid: it was never spawned (and signalling pid 0 would signal this process's own group).
    if (child.pid <= 0 || (yield* Deferred.isDone(child.exited))) return
    const signal = (sig: NodeJS.Signals) =>
      Effect.sync(() => {
        try {
          process.kill(child.pid, sig)
        } catch (e) {
          if (errnoOf(e) !== "ESRCH") throw e
        }
      })
    yield* signal("SIGTERM")
    const done = yield* Effect.interruptible(Deferred.await(child.exited)).pipe(Effect.timeout(grace), Effect.option)
    if (done._tag === "None") {
      yield* Effect.logWarning(
        `the sandboxer (pid ${child.pid}) did not drain within ${Duration.format(grace)}: killing it`
      )
      yield* signal("SIGKILL")
      yield* Effect.interruptible(Deferred.await(child.exited)).pipe(Effect.timeout("5 seconds"), Effect.option)
    } else {
      // A clean exit leaves nothing worth reading, nor does one stopped before it logged anything (it may not have
      // been up yet: a run can end before its sandboxer has started); a crash keeps its log for the user.
      yield* Effect.sync(() => {
        if (done.value === 0 || fs.statSync(child.log, { throwIfNoEntry: false })?.size === 0) {
          fs.rmSync(child.log, { force: true })
        }
      })
    }
  })
