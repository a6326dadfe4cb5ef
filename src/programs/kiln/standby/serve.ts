/**
 * The standby's side (see `protocol.ts`): take the lock of its key, load the engine with `main` held back, rehearse
 * the run that started it (see `Protocol.Rehearsal`), do a restore once on a throwaway store in its runtime directory
 * (`workspace/RestoreWarmUp.ts`), then listen. Each run that comes is taken on (its arguments,
 * working directory, environment, umask, and stdout and stderr that send back to the client) and checked: a no-op is
 * answered and the standby's own identity given back; the first run that will run processes it becomes: it sends
 * that run's exit code once its outcome is said (see `Protocol.RELEASE`), or at its end, and at its end starts the
 * next standby.
 *
 * What it must never do: serve a second run that runs (module state of one run is never seen by another; a check's
 * handovers are dropped after a no-op and after the rehearsal; what it keeps between checks is the run memo as
 * parsed, none of a check's findings, see `RunMemo.read`, but for the trees its rehearsal found as recorded and has
 * watched since, `RunMemo.groupWatches`), or hold anything of the user's while it waits (its working directory is
 * `/`; it opens no workspace or lock before a run, and the rehearsal only reads; an inotify watch holds no file
 * open and keeps no file system from being unmounted), but for the store's environments the last run opened, opened
 * ahead of the next (`store/OpenAhead.ts`: never made or written) and closed after {@link Protocol.STORE_HOLD_ENV}
 * without a run. Stopped while it waits, or idle for its time, it leaves neither socket nor lock.
 *
 * @internal
 */
import type { spawn as Spawn } from "node:child_process"
import * as fs from "node:fs"
import type * as Net from "node:net"
import { constants as osConstants } from "node:os"
import * as path from "node:path"
import type * as Warm from "../../../layers/spawner/Warm.js"
import { startStandby } from "./client.js"
import * as Identity from "./identity.js"
import * as Protocol from "./protocol.js"

/** The socket's own descriptor, for the exit code written from the `exit` event, where nothing asynchronous runs. */
const fdOf = (conn: Net.Socket): number | undefined => {
  const fd = (conn as unknown as { _handle?: { fd?: unknown } })._handle?.fd
  return typeof fd === "number" && fd >= 0 ? fd : undefined
}

/** Reads the request's line from `conn`, at most {@link Protocol.MAX_REQUEST_BYTES}. */
const readRequest = (conn: Net.Socket, then: (request: Protocol.Request | string) => void) => {
  const chunks: Array<Buffer> = []
  let size = 0
  const onData = (chunk: Buffer) => {
    const end = chunk.indexOf(10)
    chunks.push(end === -1 ? chunk : chunk.subarray(0, end))
    size += chunk.length
    if (end === -1 && size <= Protocol.MAX_REQUEST_BYTES) return
    conn.off("data", onData)
    then(end === -1 ? "the request is too long" : Protocol.parseRequest(Buffer.concat(chunks).toString("utf8")))
  }
  conn.on("data", onData)
}

export interface Hooks {
  readonly require: NodeJS.Require
  readonly net: typeof Net
  readonly spawn: typeof Spawn
  /** The CLI's loader (`dist/cli.cjs`): what the next standby runs. */
  readonly cli: string
  /** Loads the engine; its `main` leaves its start at {@link Protocol.DEFERRED_MAIN}. */
  readonly load: () => void
  /** Loads, while it waits, what every run loads lazily (LMDB's module). */
  readonly preload: () => void
  /** The no-op check (`noop.ts`) of a run's arguments, in the run's identity. */
  readonly answer: (args: ReadonlyArray<string>) => "answered" | "runs" | "other"
  /** The no-op check of a run's arguments, in the run's directory, for its compiled code only: nothing is written. */
  readonly rehearse: (args: ReadonlyArray<string>) => void
  /** Drops what a check left for an engine that did not start (it answered). */
  readonly forget: () => void
  /**
   * Whether a watch the rehearsal made has reported a change since last asked (then it is rehearsed again, once no
   * run has come for a moment: {@link Protocol.REWATCH_ENV}). A run taken on keeps the watches until its process
   * ends: closing them waits for the kernel to free each one.
   */
  readonly watchLost: () => boolean
  /**
   * Starts the spawner for the next run (the loader does so for a run it loads the engine for), unless one started
   * as it would be now runs already (see `Warm.startWarm`).
   */
  readonly startSpawner: (options?: Warm.StartOptions) => void
}

/** Takes the lock of a key's standby (a file naming its pid), unless a standby holds it. */
const claim = (lock: string): boolean => {
  for (let attempt = 0; attempt < 2; attempt++) {
    try {
      fs.writeFileSync(lock, String(process.pid), { flag: "wx", mode: 0o600 })
      return true
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== "EEXIST") return false
      let holder = 0
      try {
        holder = Number(fs.readFileSync(lock, "utf8"))
      } catch {
        // Released meanwhile: try again.
      }
      // A lock naming a pid the system has given another process since is stale.
      if (Protocol.isStandby(holder) && holder !== process.pid) return false
      try {
        fs.unlinkSync(lock)
      } catch {
        // Another took it away first.
      }
    }
  }
  return false
}

/** Gives the lock up, if it is still this process's. */
const release = (lock: string): void => {
  try {
    if (fs.readFileSync(lock, "utf8") === String(process.pid)) fs.unlinkSync(lock)
  } catch {
    // Gone already.
  }
}

/**
 * Checks the run that started this standby, in its directory, and drops what the check found (see
 * {@link Protocol.Rehearsal}); it then waits at the root again, holding nothing of that workspace. A directory that is
 * gone, or a check that fails, only leaves the standby as cold as it would have been.
 */
const rehearse = (rehearsal: Protocol.Rehearsal, hooks: Hooks): void => {
  try {
    process.chdir(rehearsal.cwd)
    hooks.rehearse(rehearsal.argv)
  } catch {
    // Cold, then.
  } finally {
    hooks.forget()
    process.chdir("/")
  }
}

/**
 * Once a run is taken over: its end sends its exit code after all it wrote (`process.exit` waits for the connection
 * to pass both on) and starts a standby for the next run; the client's signals are raised here; a client that dies
 * (SIGKILL) ends its run, as the engine's own death would. A run may send its code earlier ({@link Protocol.RELEASE}):
 * the client then ends, and this process's own end only starts the next standby.
 */
const wireRun = (conn: Net.Socket, key: string, hooks: Hooks, request: Protocol.Request) => {
  const exit = process.exit.bind(process)
  let ended = false
  let released = false
  /**
   * The next standby, forked in the same turn as the client is sent its code, just after: the fork takes this loaded
   * process's thread some milliseconds, and the new process's load competes for the cores, which the client's wait
   * need not include. A harness that ends the standbys as soon as a run ends may list them before this one exists,
   * so it looks again until none is left (the tests' own sweep does).
   */
  const startNext = () => startStandby(hooks.spawn, hooks.cli, key, request)
  const end = (code: number) => {
    if (ended) return
    ended = true
    // A client released earlier has its code, and the next standby was started then.
    if (released) return exit(code)
    conn.ref()
    conn.once("close", () => exit(code))
    conn.end(Protocol.exitFrame(code), () => exit(code))
    startNext()
  }
  const release: Protocol.Release = (code) => {
    if (ended || released) return
    released = true
    // What the run wrote is queued on the connection ahead of the code; whatever it writes from now on is dropped
    // (`identity.ts`), as the client has gone.
    conn.end(Protocol.exitFrame(code))
    // It loads while this process closes, and listens once loaded.
    startNext()
  }
  ;(globalThis as Record<symbol, unknown>)[Protocol.RELEASE] = release
  process.exit = ((code?: number | string | null) => {
    end(Number(code ?? process.exitCode ?? 0) || 0)
  }) as typeof process.exit
  // A run whose work is done and whose process would end on its own.
  process.on("beforeExit", () => end(Number(process.exitCode ?? 0) || 0))
  // A crash ends the process at once: the client is told the code, if the connection takes it now.
  process.on("exit", (code) => {
    if (ended || released) return
    const fd = fdOf(conn)
    try {
      if (fd !== undefined) fs.writeSync(fd, Protocol.exitFrame(code))
    } catch {
      // The client then says its run ended without a code.
    }
  })
  conn.on("data", (bytes: Buffer) => {
    for (const b of bytes) {
      const signal = Protocol.SIGNALS[b - 1]
      if (signal === undefined) continue
      // A signal the run does not handle (SIGHUP) kills this process as it would kill a kiln without a standby, and
      // leaves no `exit` event to say so: the client is told the code a shell gives such a death first.
      if (process.listenerCount(signal) === 0 && !ended && !released) {
        ended = true
        const fd = fdOf(conn)
        try {
          if (fd !== undefined) fs.writeSync(fd, Protocol.exitFrame(128 + osConstants.signals[signal]))
        } catch {
          // The client then says its run ended without a code.
        }
      }
      process.kill(process.pid, signal)
    }
  })
  conn.on("close", () => {
    if (!ended && !released) process.kill(process.pid, "SIGTERM")
  })
  // The run's own work keeps the process up until it ends.
  conn.unref()
}

/**
 * Serves as the standby of `key`: no-op runs are answered and the standby goes on waiting; the first run that will run
 * processes is taken over, and the standby is then that run. It exits when another serves already, or after the idle
 * time with no run.
 */
export const serve = (key: string, hooks: Hooks): void => {
  const socket = Protocol.socketOf(key)
  // No directory runs would find it in: it would wait for nobody.
  if (socket === undefined) return process.exit(0)
  const lock = `${socket.slice(0, -".sock".length)}.pid`
  const idleEnv = Number(process.env[Protocol.IDLE_ENV] ?? Protocol.DEFAULT_IDLE_MS)
  const idleMs = Number.isFinite(idleEnv) && idleEnv > 0 ? idleEnv : Protocol.DEFAULT_IDLE_MS
  const rewatchEnv = Number(process.env[Protocol.REWATCH_ENV] ?? Protocol.DEFAULT_REWATCH_MS)
  const rewatchMs = Number.isFinite(rewatchEnv) && rewatchEnv >= 0 ? rewatchEnv : Protocol.DEFAULT_REWATCH_MS
  const holdEnv = Number(process.env[Protocol.STORE_HOLD_ENV] ?? Protocol.DEFAULT_STORE_HOLD_MS)
  const storeHoldMs = Number.isFinite(holdEnv) && holdEnv >= 0 ? holdEnv : Protocol.DEFAULT_STORE_HOLD_MS
  // One standby of a key: a second one started meanwhile (two runs ending together) leaves at once.
  if (!claim(lock)) return process.exit(0)
  // Stopped while it waits (`kill`, a logout): it leaves neither its socket nor its lock behind. A signal that comes
  // while it loads is handled once the load is done.
  const stopping = { listening: undefined as (() => void) | undefined }
  const stop = () => {
    stopping.listening?.()
    release(lock)
    process.exit(0)
  }
  for (const signal of Protocol.SIGNALS) process.on(signal, stop)
  const rehearsal = Protocol.parseRehearsal(process.env[Protocol.REHEARSAL_ENV])
  delete process.env[Protocol.REHEARSAL_ENV]
  const deferred: Protocol.DeferredMain = {}
  ;(globalThis as Record<symbol, unknown>)[Protocol.DEFERRED_MAIN] = deferred
  hooks.load()
  // A bundle that left no start cannot serve: runs find no socket and load the engine themselves.
  const { idle, start } = deferred
  if (start === undefined || idle === undefined) {
    release(lock)
    return process.exit(0)
  }
  hooks.preload()
  if (rehearsal !== undefined) rehearse(rehearsal, hooks)
  // The next run's spawner, started while nothing waits: forking this loaded process takes its thread some
  // milliseconds that a run would wait for. A run with another umask or spawner program replaces it (`Warm.ts`).
  hooks.startSpawner({ nativeOnly: true })
  // After the spawner's fork: every environment mapped makes a fork of this process slower.
  if (rehearsal !== undefined && rehearsal.stores.length > 0) deferred.openAhead?.(rehearsal.stores)
  // The socket appears only once loaded and warmed up (a restore done once on a throwaway store: see
  // `workspace/RestoreWarmUp.ts`): a run that comes earlier does its own work rather than wait for this.
  const listen = () => {
    const modules = Identity.modulesOf(hooks.require)
    try {
      fs.unlinkSync(socket)
    } catch {
      // None left behind.
    }
    const server = hooks.net.createServer()
    server.on("error", () => {
      release(lock)
      process.exit(0)
    })
    server.listen(socket, () => {
      const ino = fs.statSync(socket).ino
      stopping.listening = () => {
        server.close()
        try {
          // Only its own: a standby that replaced it after a race keeps its socket.
          if (fs.statSync(socket).ino === ino) fs.unlinkSync(socket)
        } catch {
          // Gone already.
        }
        release(lock)
      }
      const stopListening = stopping.listening
      waitForRuns({
        server,
        stopListening,
        // Taken: the run's own handlers are the ones for these signals from now on.
        taken: () => {
          for (const signal of Protocol.SIGNALS) process.off(signal, stop)
          stopListening()
        },
        idleMs,
        rewatchMs,
        storeHoldMs,
        closeAhead: deferred.closeAhead ?? (() => undefined),
        key,
        hooks,
        idle,
        start,
        modules,
        rehearsal
      })
    })
  }
  if (deferred.warmUp === undefined) listen()
  else deferred.warmUp(path.dirname(socket), listen)
}

interface Waiting {
  readonly server: Net.Server
  /** Closes the socket and gives the lock up. */
  readonly stopListening: () => void
  /** The same, when a run is taken on: signals are the run's from then on. */
  readonly taken: () => void
  readonly idleMs: number
  readonly rewatchMs: number
  /** How long the store's environments opened ahead are kept after the standby started or last answered a run. */
  readonly storeHoldMs: number
  readonly closeAhead: () => void
  readonly key: string
  readonly hooks: Hooks
  /** The bundle's start of the run taken on, and its idle wait (see {@link Protocol.DeferredMain}). */
  readonly start: () => void
  readonly idle: (ms: number, then: () => void) => () => void
  readonly modules: Identity.Modules
  /** The run that started this standby, checked again to watch a tree anew (see {@link rehearse}). */
  readonly rehearsal: Protocol.Rehearsal | undefined
}

/** Listening: answers no-ops, and becomes the first run that will run processes; exits when idle. */
const waitForRuns = (
  {
    closeAhead,
    hooks,
    idle,
    idleMs,
    key,
    modules,
    rehearsal,
    rewatchMs,
    server,
    start,
    stopListening,
    storeHoldMs,
    taken
  }: Waiting
): void => {
  let cancelIdle: (() => void) | undefined
  let cancelHold: (() => void) | undefined
  const waitIdle = () => {
    cancelIdle?.()
    cancelIdle = idle(idleMs, () => {
      stopListening()
      process.exit(0)
    })
    // The store is held for a shorter while than the engine: a user may want its disk unmounted, or its space back.
    cancelHold?.()
    cancelHold = idle(storeHoldMs, closeAhead)
  }
  waitIdle()
  let serving = false
  // A tree whose watch reported a change is watched anew by rehearsing again, once no run has come for a moment: a
  // run that comes first is answered at once (its check stats the tree), and the rehearsal waits for the next lull.
  // On the bundle's clock, as the idle wait.
  let cancelRewatch: (() => void) | undefined
  const rewatchLater = () => {
    if (rehearsal === undefined) return
    cancelRewatch?.()
    cancelRewatch = idle(rewatchMs, () => {
      cancelRewatch = undefined
      if (!serving) rehearse(rehearsal, hooks)
    })
  }
  server.on("connection", (conn: Net.Socket) => {
    const decline = (why: string) =>
      conn.end(Buffer.concat([Buffer.from([Protocol.DECLINED]), Buffer.from(`${why}\n`)]))
    conn.on("error", () => undefined)
    readRequest(conn, (request) => {
      const owed = cancelRewatch !== undefined
      cancelRewatch?.()
      cancelRewatch = undefined
      const declined = (why: string) => {
        if (owed) rewatchLater()
        decline(why)
      }
      if (serving) return declined("it serves another run")
      if (typeof request === "string") return declined(request)
      let restore: Identity.Restore
      try {
        restore = Identity.assume(modules, conn, request, hooks.cli)
      } catch (e) {
        return declined(`cannot take the run on: ${(e as Error).message}`)
      }
      conn.write(Buffer.from([Protocol.ACCEPTED]))
      const verdict = hooks.answer(request.argv)
      if (verdict === "answered") {
        restore()
        hooks.forget()
        conn.end(Protocol.exitFrame(0))
        if (hooks.watchLost() || owed) rewatchLater()
        return waitIdle()
      }
      serving = true
      cancelIdle?.()
      cancelHold?.()
      taken()
      wireRun(conn, key, hooks, request)
      // As the loader does: only a run that will most likely run a process has its spawner made sure of before the
      // engine (a restore only writes outputs back; the engine takes or starts one at its first spawn, if it comes).
      if (verdict === "runs") hooks.startSpawner()
      start()
    })
  })
}
