/**
 * The sandboxer processes of one engine, one generation at a time: a process is launched on first use, connected in
 * the background, and replaced when a call finds it unreachable (it died, or its socket vanished).
 *
 * @internal
 */
import * as NodeSocket from "@effect/platform-node/NodeSocket"
import * as Socket from "@effect/platform/Socket"
import * as RpcClient from "@effect/rpc/RpcClient"
import { RpcClientError } from "@effect/rpc/RpcClientError"
import * as RpcSerialization from "@effect/rpc/RpcSerialization"
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as ExecutionStrategy from "effect/ExecutionStrategy"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Scope from "effect/Scope"
import * as fs from "node:fs"
import { fileURLToPath } from "node:url"
import * as Permits from "../../../domain/Permits.js"
import { SandboxerUnavailable } from "../../../domain/Sandbox.js"
import * as Proc from "../../../os/Proc.js"
import { removeTree } from "../../../os/RemoveTree.js"
import type * as Store from "../../store/Store.js"
import { SandboxerRpcs } from "../Rpc.js"
import type { Options } from "../Sandboxer.js"
import * as SandboxerProcess from "./process.js"

/**
 * `kiln`'s own CLI: `$KILN_CLI` (the CLI sets it), else `dist/cli.cjs`, three levels up from this module in the
 * library's build (`dist/layers/sandboxer/internal/`; an installed package has no `cli.js`: npm packs no symlinks).
 */
const defaultCommand = (): ReadonlyArray<string> | undefined => {
  if (process.env.KILN_CLI !== undefined) return [process.execPath, process.env.KILN_CLI]
  const url = (import.meta as { url?: string }).url
  if (url !== undefined) {
    const cli = fileURLToPath(new URL("../../../cli.cjs", url))
    if (fs.existsSync(cli)) return [process.execPath, cli]
  }
  return undefined
}

/** The parent's store settings, passed on so that the sandboxer opens exactly the same store. */
const storeArgs = (o: Store.Service["options"]): Array<string> => [
  "--store-dir",
  o.root,
  "--store-shards",
  String(o.shardCount),
  "--store-max-readers",
  String(o.maxReaders),
  "--store-files-map-size",
  String(o.filesMapSize),
  "--store-directories-map-size",
  String(o.directoriesMapSize),
  "--store-actions-map-size",
  String(o.actionsMapSize),
  "--store-lease-time",
  `${o.leaseTimeMs}ms`,
  "--store-max-size",
  String(o.maxSizeBytes)
]

/** @internal */
export type Client = RpcClient.FromGroup<typeof SandboxerRpcs, RpcClientError>

/** One sandboxer process, and the client connected to it. @internal */
export interface Generation {
  readonly child: SandboxerProcess.Child
  /** The roots it watches: those on its command line and those sent since. */
  readonly roots: Set<string>
  /** Completes once it is ready and connected. */
  readonly client: Deferred.Deferred<Client, SandboxerUnavailable>
  readonly connected: { value: boolean }
  readonly scope: Scope.CloseableScope
}

/** @internal */
export interface Generations {
  /** Where sockets and logs go. */
  readonly dir: string
  /** Every root ever watched: a new sandboxer (after one died) watches them all from the start. */
  readonly roots: Set<string>
  /** The generation running now, if any. */
  readonly current: () => Generation | undefined
  /** The running generation, or a new one in place of `replace` (or of one that exited). */
  readonly generation: (replace?: Generation) => Effect.Effect<Generation, SandboxerUnavailable>
  /** Runs a call; on a transport failure (the sandboxer died, the socket vanished) respawns it and retries once. */
  readonly call: <A, E>(
    f: (client: Client) => Effect.Effect<A, E | RpcClientError>
  ) => Effect.Effect<A, Exclude<E, RpcClientError> | SandboxerUnavailable>
  /** How to run a sandboxer. */
  readonly command: Effect.Effect<ReadonlyArray<string>, SandboxerUnavailable>
  /** A sandboxer's arguments, watching `watching`. */
  readonly argsFor: (watching: Iterable<string>) => Array<string>
}

/** Generations that end with `lifetime`. @internal */
export const make = (
  options: Options,
  store: Store.Service,
  lifetime: Scope.Scope
): Effect.Effect<Generations> =>
  Effect.gen(function*() {
    const lock = yield* Permits.make(1)
    const shared = options.socketDir ?? SandboxerProcess.fixedSocketDirectory()
    const dir = shared ?? SandboxerProcess.freshSocketDirectory()
    // A directory of this engine's own (no shared one was usable) goes with it: one a run left behind in /tmp each.
    // Added before any generation starts, so it runs after every generation's end.
    if (shared === undefined) yield* Scope.addFinalizer(lifetime, Effect.sync(() => removeTree(dir)))
    const grace = options.stopGrace ?? Duration.seconds(10)
    const startTimeout = options.startTimeout ?? Duration.seconds(30)
    const self = Proc.self()
    /** Every root ever watched: a new sandboxer (after one died) watches them all from the start. */
    const roots = new Set<string>()
    let current: Generation | undefined

    const connect = (child: SandboxerProcess.Child, scope: Scope.Scope) =>
      Effect.gen(function*() {
        yield* SandboxerProcess.awaitReady(child, startTimeout)
        // The protocol (and its socket) must live in the generation's scope, not only while the client is made.
        const protocol = yield* Layer.buildWithScope(
          RpcClient.layerProtocolSocket().pipe(
            Layer.provide(NodeSocket.layerNet({ path: child.socket })),
            Layer.provide(RpcSerialization.layerMsgPack)
          ),
          scope
        )
        return yield* RpcClient.make(SandboxerRpcs).pipe(Effect.provide(protocol), Scope.extend(scope))
      }).pipe(
        Effect.catchTag("SocketError", (e) =>
          Effect.fail(
            new SandboxerUnavailable({ reason: `cannot connect to ${child.socket}: ${e.message}`, log: child.log })
          ))
      )

    const command = Effect.suspend(() => {
      const command = options.command ?? defaultCommand()
      return command !== undefined ? Effect.succeed(command) : Effect.fail(
        new SandboxerUnavailable({ reason: "cannot tell how to run kiln: set KILN_CLI or pass `command`" })
      )
    })
    const argsFor = (watching: Iterable<string>) => [
      "--parent-start-time",
      self.startTime === "" ? "-" : self.startTime,
      "--idle-timeout",
      `${Duration.toMillis(options.idleTimeout ?? Duration.minutes(15))}ms`,
      ...[...watching].flatMap((root) => ["--watch-root", root]),
      ...storeArgs(store.options)
    ]

    const launch = Effect.gen(function*() {
      const child = yield* SandboxerProcess.launch(yield* command, argsFor(roots), dir)
      const scope = yield* Scope.fork(lifetime, ExecutionStrategy.sequential)
      yield* Scope.addFinalizer(scope, SandboxerProcess.stop(child, grace))
      const generation: Generation = {
        child,
        roots: new Set(roots),
        client: yield* Deferred.make<Client, SandboxerUnavailable>(),
        connected: { value: false },
        scope
      }
      // Connected in the background: a process runs without waiting for the sandboxer unless it needs a request.
      yield* Effect.forkIn(
        Effect.intoDeferred(
          connect(child, scope).pipe(
            Effect.tap(() => Effect.sync(() => void (generation.connected.value = true))),
            Effect.tapError((e) => Effect.logWarning(`the sandboxer (pid ${child.pid}) is unavailable: ${e.message}`))
          ),
          generation.client
        ),
        scope
      )
      return generation
    })

    /** The running generation, or a new one in place of `replace` (or of one that exited). */
    const generation = (replace?: Generation) =>
      lock.withPermit(Effect.gen(function*() {
        if (current !== undefined && current !== replace && !current.child.gone.value) return current
        if (current !== undefined) {
          const old = current
          current = undefined
          yield* Scope.close(old.scope, Exit.void)
        }
        current = yield* launch
        return current
      }))

    /**
     * A socket error is a transport failure too: writing to a sandboxer that was just SIGKILLed can fail with EPIPE
     * before the protocol notices the closed socket, and it surfaced as a SocketError (even a defect), not as an
     * RpcClientError, so the engine failed instead of respawning.
     */
    const asTransport = <A, E>(effect: Effect.Effect<A, E | RpcClientError>) =>
      effect.pipe(
        Effect.catchIf(
          (e): e is Extract<E, Socket.SocketError> => Socket.isSocketError(e),
          (e) => Effect.fail(new RpcClientError({ reason: "Protocol", message: e.message, cause: e }))
        ),
        Effect.catchSomeDefect((d) =>
          Socket.isSocketError(d)
            ? Option.some(Effect.fail(new RpcClientError({ reason: "Protocol", message: d.message, cause: d })))
            : Option.none()
        )
      )

    /** Runs a call; on a transport failure (the sandboxer died, the socket vanished) respawns it and retries once. */
    const call = <A, E>(f: (client: Client) => Effect.Effect<A, E | RpcClientError>) =>
      Effect.gen(function*() {
        const gen = yield* generation()
        const first = yield* Effect.either(asTransport(f(yield* Deferred.await(gen.client))))
        if (first._tag === "Right") return first.right
        if (!(first.left instanceof RpcClientError)) return yield* Effect.fail(first.left as E)
        yield* Effect.logWarning(
          `the sandboxer (pid ${gen.child.pid}) is unreachable (${first.left.message}): restarting it`
        )
        const next = yield* generation(gen)
        return yield* asTransport(f(yield* Deferred.await(next.client)))
      }).pipe(
        Effect.catchIf(
          (e): e is RpcClientError => e instanceof RpcClientError,
          (e) => Effect.fail(new SandboxerUnavailable({ reason: e.message }))
        )
      )

    return {
      dir,
      roots,
      current: () => current,
      generation,
      call,
      command,
      argsFor
    } satisfies Generations
  })
