/**
 * The engine's side of the spawner (`programs/spawner/main.ts`, speaking `Protocol.ts`): taken over from the CLI's loader (`Warm.ts`)
 * or started on warm-up or the first spawn, ended with the scope, started again if it ever dies. A spawn request
 * resolves once the child runs (its pid, which is also its process group) and its exit arrives later on `exited`.
 * Should the spawner die while children run, their exits are lost: those fail with a `SpawnError` rather than
 * report a made-up exit code (the engine still ends their groups).
 *
 * @internal
 */
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as FiberId from "effect/FiberId"
import type * as Scope from "effect/Scope"
import { type ChildProcess, spawn } from "node:child_process"
import * as fs from "node:fs"
import { SpawnError } from "../../domain/Process.js"
import * as Protocol from "./Protocol.js"
import * as WarmSpawner from "./Warm.js"

/** @internal */
export interface Exit {
  readonly code: number | null
  readonly signal: NodeJS.Signals | null
  /** Nothing of its process group was left when it exited (no member can join a group with none). */
  readonly alone?: boolean
}

/** What to run: `stdout` and `stderr` are the files the child's output is written to (created or truncated). @internal */
export type Request = Omit<Protocol.Spawn, "kind" | "id">

/** Why a child did not start: the errno code (ENOENT, ETXTBSY, …) and Node's message. @internal */
export interface StartFailure {
  readonly code: string
  readonly message: string
}

/** The {@link StartFailure} code of a request the spawner never answered because it died: safe to retry. @internal */
export const LOST = "KILN_SPAWNER_LOST"

/** @internal */
export interface Started {
  readonly pid: number
  readonly exited: Deferred.Deferred<Exit, SpawnError>
}

/** @internal */
export interface Spawner {
  readonly spawn: (request: Request) => Effect.Effect<Started, StartFailure | SpawnError>
  /** Removes these trees (a sandbox, its logs) in the spawner's process, read-only directories included. */
  readonly remove: (paths: ReadonlyArray<string>) => Effect.Effect<void, StartFailure>
  /** Starts the spawner ahead of the first spawn (a Node start, which then overlaps the engine's own work). */
  readonly warmUp: Effect.Effect<void>
  /**
   * What the spawner starts if this process dies before the spawner is ended (see `main.ts`): replaces what
   * was armed before, and is armed again in a spawner started after one died.
   */
  readonly arm: (postMortem: PostMortem) => Effect.Effect<void>
}

/** A command to start, detached, if the engine dies, and the file its stderr is appended to. @internal */
export type PostMortem = Omit<Protocol.Arm, "kind">

/** Options of {@link make}. @internal */
export interface Options {
  /**
   * Where ending the spawner is registered: by default this scope's finalizer. The engine ends it after its store
   * has closed, so that an engine killed while still closing its store is cleaned up after too.
   */
  readonly endWith?: (end: Effect.Effect<void>) => Effect.Effect<void>
}

interface Pending {
  readonly argv0: string
  /** The request's line (see {@link Running.lines}): a `rejected` reply names it by that. */
  readonly line: number
  readonly started: Deferred.Deferred<Started, StartFailure | SpawnError>
  exited?: Deferred.Deferred<Exit, SpawnError>
  /** Its pid (and group), once started. */
  pid?: number
  /** Its caller was interrupted before it started: once it has, its group is killed (nobody else will). */
  abandoned?: boolean
}

interface Removal {
  readonly line: number
  readonly removed: Deferred.Deferred<void, StartFailure>
}

interface Running {
  readonly child: ChildProcess
  readonly pending: Map<number, Pending>
  readonly removals: Map<number, Removal>
  /** Lines written to this spawner so far: each request is one, numbered from 0 as the spawner counts them. */
  lines: number
}

/** Writes one request to the spawner; returns its line's number. */
const send = (running: Running, request: Protocol.Request): number => {
  running.child.stdin!.write(Protocol.encode(request))
  return running.lines++
}

const killGroup = (pgid: number) => {
  try {
    process.kill(-pgid, "SIGKILL")
  } catch {
    // Its group ended meanwhile.
  }
}

/** Replies are awaited only while something is pending: the spawner alone never keeps the engine's process alive. */
const holdOpen = (running: Running) => {
  const stdout = running.child.stdout as unknown as { ref(): void; unref(): void }
  if (running.pending.size > 0 || running.removals.size > 0) stdout.ref()
  else stdout.unref()
}

/**
 * A request the spawner could not use (the engine's bug: nothing kiln.json holds gets that far): what was asked on that
 * line fails, for good. A line that names no request still waiting is a spawner that cannot be trusted: `false`.
 */
const onRejected = (running: Running, reply: Protocol.Rejected): boolean => {
  const detail = `the spawner refused the request: ${reply.reason}`
  for (const [id, removal] of running.removals) {
    if (removal.line !== reply.line) continue
    running.removals.delete(id)
    holdOpen(running)
    Deferred.unsafeDone(removal.removed, Effect.fail({ code: "EINVAL", message: detail }))
    return true
  }
  for (const [id, p] of running.pending) {
    if (p.line !== reply.line || p.exited !== undefined) continue
    running.pending.delete(id)
    holdOpen(running)
    Deferred.unsafeDone(p.started, Effect.fail(new SpawnError({ argv0: p.argv0, detail })))
    return true
  }
  return false
}

const onReply = (running: Running, reply: Exclude<Protocol.Reply, Protocol.Rejected>) => {
  const removal = running.removals.get(reply.id)
  if (removal !== undefined) {
    running.removals.delete(reply.id)
    holdOpen(running)
    Deferred.unsafeDone(
      removal.removed,
      reply.kind === "failed" ? Effect.fail({ code: reply.code, message: reply.message }) : Effect.void
    )
    return
  }
  const p = running.pending.get(reply.id)
  if (p === undefined) return
  switch (reply.kind) {
    case "started": {
      p.pid = reply.pid
      if (p.abandoned === true) killGroup(reply.pid)
      p.exited = Deferred.unsafeMake<Exit, SpawnError>(FiberId.none)
      Deferred.unsafeDone(p.started, Effect.succeed({ pid: reply.pid, exited: p.exited }))
      return
    }
    case "failed": {
      running.pending.delete(reply.id)
      holdOpen(running)
      Deferred.unsafeDone(p.started, Effect.fail({ code: reply.code, message: reply.message }))
      return
    }
    case "exited": {
      running.pending.delete(reply.id)
      holdOpen(running)
      if (p.exited !== undefined) {
        Deferred.unsafeDone(p.exited, Effect.succeed({ code: reply.code, signal: reply.signal, alone: reply.alone }))
      }
    }
  }
}

/**
 * A spawner for this engine: the loader's warm one, else one started now (its program looked for once per start); or
 * why none can start, its program being missing.
 */
const spawnerProcess = (): ChildProcess | string => {
  const warm = WarmSpawner.takeWarm()
  if (warm !== undefined) return warm
  const program = WarmSpawner.programPath()
  if (!fs.existsSync(program)) return `kiln's spawner program is missing: ${program}`
  const command = WarmSpawner.commandFor(process.pid, program)
  return spawn(command.file, command.args, {
    stdio: ["pipe", "pipe", "inherit"],
    env: {},
    // Its own session: a SIGKILL of the engine's process group must leave the watchdog standing.
    detached: true
  })
}

const start = (child: ChildProcess): Running => {
  const running: Running = { child, pending: new Map(), removals: new Map(), lines: 0 }
  const lost = (why: string) => {
    for (const p of running.pending.values()) {
      // A request that had not started yet is safe to send again (to a new spawner): the caller retries it.
      if (p.exited === undefined) Deferred.unsafeDone(p.started, Effect.fail({ code: LOST, message: why }))
      else {
        Deferred.unsafeDone(
          p.exited,
          Effect.fail(new SpawnError({ argv0: p.argv0, detail: `${why} while it ran: its exit is unknown` }))
        )
      }
    }
    running.pending.clear()
    for (const r of running.removals.values()) Deferred.unsafeDone(r.removed, Effect.fail({ code: LOST, message: why }))
    running.removals.clear()
  }
  child.stdout!.setEncoding("utf8")
  child.stdout!.on(
    "data",
    Protocol.lineSplitter((line) => {
      const reply = Protocol.decodeReply(line)
      let untrusted: string
      if (reply.kind === "malformed") untrusted = `sent a malformed reply: ${reply.reason}`
      else if (reply.kind !== "rejected") return onReply(running, reply)
      else if (onRejected(running, reply)) return
      else untrusted = `refused line ${reply.line}, which holds no request waiting: ${reply.reason}`
      // A spawner that says what it should not cannot be trusted with the rest: what it was asked fails or goes to
      // a new one, as if it had died.
      lost(`the spawner (pid ${child.pid}) ${untrusted}`)
      child.kill("SIGKILL")
    })
  )
  child.once("error", (e) => lost(`the spawner could not run: ${e.message}`))
  child.once(
    "exit",
    (code, signal) => lost(`the spawner (pid ${child.pid}) exited (${signal ?? `code ${code}`})`)
  )
  child.stdin!.on("error", () => undefined)
  // The spawner must never hold the engine open: the scope ends it, and it ends itself when the engine is gone.
  child.unref()
  ;(child.stdin as unknown as { unref(): void }).unref()
  holdOpen(running)
  return running
}

/** @internal */
export const make = (options: Options = {}): Effect.Effect<Spawner, never, Scope.Scope> =>
  Effect.gen(function*() {
    let running: Running | undefined
    let nextId = 0
    let armed: Protocol.Arm | undefined
    let ended = false
    // Waits until the disarm has left this process (or the pipe failed, the spawner being gone): kiln exits with
    // `process.exit` right after its scope closes, which would drop a write still queued, and a spawner that never
    // read the disarm takes that for the engine's death and starts the post-mortem.
    const end = Effect.async<void>((resume) => {
      ended = true
      const stdin = running?.child.stdin
      running = undefined
      if (stdin == null || stdin.destroyed || stdin.writableEnded) return resume(Effect.void)
      // Disarmed first: this is a clean end, not the engine's death.
      if (armed !== undefined) stdin.write(Protocol.encode({ kind: "disarm" }))
      stdin.end(() => resume(Effect.void))
    }).pipe(
      // A spawner that stopped reading (stopped by a debugger, say) must not hold the engine's exit. This runs in a
      // finalizer, which is uninterruptible: the timeout only works inside `interruptible`.
      Effect.interruptible,
      Effect.timeoutOption("2 seconds"),
      Effect.asVoid
    )
    yield* options.endWith !== undefined ? options.endWith(end) : Effect.addFinalizer(() => end)
    /** The running spawner, started if there is none: or why none can start. */
    const current = (): Running | string => {
      if (running === undefined || running.child.exitCode !== null || running.child.signalCode !== null) {
        const child = spawnerProcess()
        if (typeof child === "string") return child
        running = start(child)
        if (armed !== undefined) send(running, armed)
      }
      return running
    }
    return {
      // A spawner that cannot start is reported by the spawn or removal that needs it.
      warmUp: Effect.sync(() => void current()),
      arm: (postMortem) =>
        Effect.sync(() => {
          // After the end, a new spawner would outlive this scope: nothing is started then.
          if (ended) return
          armed = { kind: "arm", ...postMortem }
          const r = current()
          if (typeof r !== "string") send(r, armed)
        }),
      remove: (paths) =>
        Effect.suspend(() => {
          const r = current()
          if (typeof r === "string") return Effect.fail({ code: "ENOENT", message: r })
          const id = nextId++
          const removed = Deferred.unsafeMake<void, StartFailure>(FiberId.none)
          r.removals.set(id, { line: send(r, { kind: "remove", id, paths }), removed })
          holdOpen(r)
          return Deferred.await(removed)
        }),
      spawn: (request) =>
        Effect.suspend(() => {
          const r = current()
          if (typeof r === "string") return Effect.fail(new SpawnError({ argv0: request.argv[0] ?? "", detail: r }))
          const id = nextId++
          const started = Deferred.unsafeMake<Started, StartFailure | SpawnError>(FiberId.none)
          const pending: Pending = {
            argv0: request.argv[0] ?? "",
            line: send(r, { kind: "spawn", id, ...request }),
            started
          }
          r.pending.set(id, pending)
          holdOpen(r)
          // A spawner that stopped reading (stopped, swapping) must not make the run deaf to Ctrl-C: the wait is
          // interruptible, and a process that starts after its caller gave up is killed on the spot.
          return Deferred.await(started).pipe(
            Effect.onInterrupt(() =>
              Effect.sync(() => {
                if (pending.pid !== undefined) killGroup(pending.pid)
                else pending.abandoned = true
              })
            )
          )
        })
    }
  })
