/**
 * Starting and stopping the sandboxer child process, and where its socket goes.
 *
 * @internal
 */
import { Deferred, Duration, Effect } from "effect"
import { type ChildProcess, spawn } from "node:child_process"
import { randomBytes } from "node:crypto"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { SandboxerUnavailable } from "../../domain/Sandbox.js"
import { describeErrno, errnoOf } from "./errno.js"
import { mkdirp } from "./mkdirp.js"

/** `sockaddr_un.sun_path` is 108 bytes on Linux, NUL included. @internal */
export const MAX_SOCKET_PATH = 107

/**
 * A directory for sandboxer sockets: `$XDG_RUNTIME_DIR/kiln`, or a short per-user temp dir when that is unset or
 * too long. Never under the store or the workspace, whose paths can be arbitrarily long.
 *
 * @internal
 */
export const socketDirectory = (env: NodeJS.ProcessEnv = process.env): string => {
  const uid = typeof process.getuid === "function" ? process.getuid() : 0
  const candidates = [
    ...(env.XDG_RUNTIME_DIR !== undefined && path.isAbsolute(env.XDG_RUNTIME_DIR)
      ? [path.join(env.XDG_RUNTIME_DIR, "kiln")]
      : []),
    path.join(os.tmpdir(), `kiln-${uid}`),
    `/tmp/kiln-${uid}`
  ]
  return candidates.find((d) => d.length + 40 <= MAX_SOCKET_PATH) ?? `/tmp/kiln-${uid}`
}

/** A fresh socket path for this engine process: its pid plus a random suffix. @internal */
export const socketPath = (dir: string): string =>
  path.join(dir, `sb-${process.pid}-${randomBytes(4).toString("hex")}.sock`)

/** @internal */
export const logPathOf = (socket: string): string => socket.replace(/\.sock$/, ".log")

const ensurePrivateDir = (dir: string) => {
  mkdirp(dir, 0o700)
  const st = fs.statSync(dir)
  const uid = typeof process.getuid === "function" ? process.getuid() : st.uid
  if (st.uid !== uid) throw new Error(`${dir} belongs to another user`)
}

/** @internal */
export interface Child {
  readonly process: ChildProcess
  readonly pid: number
  readonly socket: string
  readonly log: string
  readonly exited: Deferred.Deferred<number | null>
}

/**
 * Spawns the sandboxer and waits until it says `ready` on stdout (bounded), or fails with its log's path when it
 * exits or times out first.
 *
 * @internal
 */
export const start = (
  command: ReadonlyArray<string>,
  args: ReadonlyArray<string>,
  dir: string,
  timeout: Duration.DurationInput
): Effect.Effect<Child, SandboxerUnavailable> =>
  Effect.gen(function*() {
    const socket = socketPath(dir)
    if (socket.length > MAX_SOCKET_PATH) {
      return yield* new SandboxerUnavailable({
        reason: `socket path ${socket} is longer than ${MAX_SOCKET_PATH} bytes`
      })
    }
    const log = logPathOf(socket)
    const logFd = yield* Effect.try({
      try: () => {
        ensurePrivateDir(dir)
        return fs.openSync(log, "a", 0o600)
      },
      catch: (e) => new SandboxerUnavailable({ reason: `cannot prepare ${dir}: ${describeErrno(e)}` })
    })
    const exited = yield* Deferred.make<number | null>()
    const ready = yield* Deferred.make<void, SandboxerUnavailable>()
    const child = yield* Effect.try({
      try: () =>
        spawn(command[0]!, [...command.slice(1), "sandboxer", "--socket", socket, "--parent-pipe", ...args], {
          // stdin is a pipe this process never writes to: when it dies, however it dies, the kernel closes it and
          // the sandboxer sees end-of-file at once (polling the pid stays as the fallback).
          stdio: ["pipe", "pipe", logFd],
          // Its own session: a Ctrl-C at the terminal goes to the engine's process group, and must not take the
          // watchdog away while the engine is still tearing its processes down (the engine sends SIGTERM itself).
          detached: true
        }),
      catch: (e) => new SandboxerUnavailable({ reason: `cannot spawn ${command[0]}: ${describeErrno(e)}` })
    }).pipe(Effect.ensuring(Effect.sync(() => fs.closeSync(logFd))))
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
      Deferred.unsafeDone(
        ready,
        Effect.fail(new SandboxerUnavailable({ reason: `cannot spawn: ${describeErrno(e)}`, log }))
      )
      Deferred.unsafeDone(exited, Effect.succeed(null))
    })
    child.on("exit", (code) => {
      Deferred.unsafeDone(
        ready,
        Effect.fail(new SandboxerUnavailable({ reason: `it exited with code ${code} while starting`, log }))
      )
      Deferred.unsafeDone(exited, Effect.succeed(code))
    })
    const started = yield* Deferred.await(ready).pipe(
      Effect.timeoutFail({
        duration: timeout,
        onTimeout: () =>
          new SandboxerUnavailable({ reason: `it did not start within ${Duration.format(timeout)}`, log })
      }),
      Effect.either
    )
    const handle: Child = { process: child, pid: child.pid!, socket, log, exited }
    if (started._tag === "Left") {
      yield* stop(handle, Duration.seconds(1))
      return yield* Effect.fail(started.left)
    }
    return handle
  })

/**
 * SIGTERM (the sandboxer drains in-flight work), then SIGKILL after `grace`. Finalizers are uninterruptible, so the
 * wait is made interruptible for its timeout to fire.
 *
 * @internal
 */
export const stop = (child: Child, grace: Duration.DurationInput): Effect.Effect<void> =>
  Effect.gen(function*() {
    if (yield* Deferred.isDone(child.exited)) return
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
    } else if (done.value === 0) {
      // A clean exit leaves nothing worth reading; a crash keeps its log for the user.
      yield* Effect.sync(() => fs.rmSync(child.log, { force: true }))
    }
  })
