/**
 * The engine's side of the spawner (see `spawnerSource.ts`): taken over from the CLI's loader (`warmSpawner.ts`) or
 * started on warm-up or the first spawn, ended with the scope,
 * started again if it ever dies. A spawn request resolves once the child runs (its pid, which is also its process
 * group) and its exit arrives later on `exited`. Should the spawner die while children run, their exits are lost:
 * those fail with a `SpawnError` rather than report a made-up exit code (the engine still ends their groups).
 *
 * @internal
 */
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as FiberId from "effect/FiberId"
import type * as Scope from "effect/Scope"
import { type ChildProcess, spawn } from "node:child_process"
import { SpawnError } from "../domain/Process.js"
import * as WarmSpawner from "./Warm.js"

/** @internal */
export interface Exit {
  readonly code: number | null
  readonly signal: NodeJS.Signals | null
  /** Nothing of its process group was left when it exited (no member can join a group with none). */
  readonly alone?: boolean
}

/** @internal */
export interface Request {
  readonly argv: ReadonlyArray<string>
  readonly cwd: string
  readonly env: Readonly<Record<string, string>>
  /** Files the child's stdout and stderr are written to (created or truncated). */
  readonly stdout: string
  readonly stderr: string
}

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
   * What the spawner starts if this process dies before the spawner is ended (see `spawnerSource.ts`): replaces what
   * was armed before, and is armed again in a spawner started after one died.
   */
  readonly arm: (postMortem: PostMortem) => Effect.Effect<void>
}

/** A command to start, detached, if the engine dies, and the file its stderr is appended to. @internal */
export interface PostMortem {
  readonly argv: ReadonlyArray<string>
  readonly log: string
}

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
  readonly started: Deferred.Deferred<Started, StartFailure | SpawnError>
  exited?: Deferred.Deferred<Exit, SpawnError>
}

interface Running {
  readonly child: ChildProcess
  readonly pending: Map<number, Pending>
  readonly removals: Map<number, Deferred.Deferred<void, StartFailure>>
}

/** Replies are awaited only while something is pending: the spawner alone never keeps the engine's process alive. */
const holdOpen = (running: Running) => {
  const stdout = running.child.stdout as unknown as { ref(): void; unref(): void }
  if (running.pending.size > 0 || running.removals.size > 0) stdout.ref()
  else stdout.unref()
}

type Reply =
  | { readonly id: number; readonly pid: number }
  | { readonly id: number; readonly removed: true }
  | {
    readonly id: number
    readonly code: number | null
    readonly signal: NodeJS.Signals | null
    readonly alone?: boolean
  }
  | { readonly id: number; readonly error: string; readonly message: string }

const onReply = (running: Running, reply: Reply) => {
  const removal = running.removals.get(reply.id)
  if (removal !== undefined) {
    running.removals.delete(reply.id)
    holdOpen(running)
    Deferred.unsafeDone(
      removal,
      "error" in reply ? Effect.fail({ code: reply.error, message: reply.message }) : Effect.void
    )
    return
  }
  const p = running.pending.get(reply.id)
  if (p === undefined) return
  if ("pid" in reply) {
    p.exited = Deferred.unsafeMake<Exit, SpawnError>(FiberId.none)
    Deferred.unsafeDone(p.started, Effect.succeed({ pid: reply.pid, exited: p.exited }))
  } else if ("error" in reply) {
    running.pending.delete(reply.id)
    holdOpen(running)
    Deferred.unsafeDone(p.started, Effect.fail({ code: reply.error, message: reply.message }))
  } else if ("code" in reply) {
    running.pending.delete(reply.id)
    holdOpen(running)
    if (p.exited !== undefined) {
      Deferred.unsafeDone(
        p.exited,
        Effect.succeed({ code: reply.code, signal: reply.signal, alone: reply.alone === true })
      )
    }
  }
}

const start = (): Running => {
  const child = WarmSpawner.takeWarm() ?? spawn(process.execPath, WarmSpawner.argsFor(process.pid), {
    stdio: ["pipe", "pipe", "inherit"],
    env: {},
    // Its own session: a SIGKILL of the engine's process group must leave the watchdog standing.
    detached: true
  })
  const running: Running = { child, pending: new Map(), removals: new Map() }
  let buffered = ""
  child.stdout!.setEncoding("utf8")
  child.stdout!.on("data", (chunk: string) => {
    buffered += chunk
    for (let i = buffered.indexOf("\n"); i !== -1; i = buffered.indexOf("\n")) {
      const line = buffered.slice(0, i)
      buffered = buffered.slice(i + 1)
      let reply: Reply
      try {
        reply = JSON.parse(line) as Reply
      } catch {
        continue
      }
      onReply(running, reply)
    }
  })
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
    for (const d of running.removals.values()) Deferred.unsafeDone(d, Effect.fail({ code: LOST, message: why }))
    running.removals.clear()
  }
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
    let armed: string | undefined
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
      if (armed !== undefined) stdin.write(`${JSON.stringify({ disarm: true })}\n`)
      stdin.end(() => resume(Effect.void))
    }).pipe(
      // A spawner that stopped reading (stopped by a debugger, say) must not hold the engine's exit. This runs in a
      // finalizer, which is uninterruptible: the timeout only works inside `interruptible`.
      Effect.interruptible,
      Effect.timeoutOption("2 seconds"),
      Effect.asVoid
    )
    yield* options.endWith !== undefined ? options.endWith(end) : Effect.addFinalizer(() => end)
    const current = () => {
      if (running === undefined || running.child.exitCode !== null || running.child.signalCode !== null) {
        running = start()
        if (armed !== undefined) running.child.stdin!.write(armed)
      }
      return running
    }
    return {
      warmUp: Effect.sync(() => void current()),
      arm: (postMortem) =>
        Effect.sync(() => {
          // After the end, a new spawner would outlive this scope: nothing is started then.
          if (ended) return
          armed = `${JSON.stringify({ arm: postMortem })}\n`
          current().child.stdin!.write(armed)
        }),
      remove: (paths) =>
        Effect.suspend(() => {
          const r = current()
          const id = nextId++
          const removed = Deferred.unsafeMake<void, StartFailure>(FiberId.none)
          r.removals.set(id, removed)
          holdOpen(r)
          r.child.stdin!.write(`${JSON.stringify({ id, remove: paths })}\n`)
          return Deferred.await(removed)
        }),
      spawn: (request) =>
        Effect.suspend(() => {
          const r = current()
          const id = nextId++
          const started = Deferred.unsafeMake<Started, StartFailure | SpawnError>(FiberId.none)
          r.pending.set(id, { argv0: request.argv[0] ?? "", started })
          holdOpen(r)
          r.child.stdin!.write(`${JSON.stringify({ id, ...request })}\n`)
          return Deferred.await(started)
        })
    }
  })
