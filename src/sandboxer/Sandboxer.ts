/**
 * The engine's side of the sandboxer: materializes input trees into sandboxes through a sandboxer process of its
 * own (one per engine process, on its own socket), which is also the engine's watchdog: it is told the sandbox
 * roots once, and if the engine dies it finds the engine's sandboxes there by their names (each names its engine),
 * SIGKILLs the process groups working in them and removes them. Nothing crosses the socket per process for that.
 *
 * @since 0.1.0
 */
import * as NodeSocket from "@effect/platform-node/NodeSocket"
import * as Socket from "@effect/platform/Socket"
import * as RpcClient from "@effect/rpc/RpcClient"
import { RpcClientError } from "@effect/rpc/RpcClientError"
import * as RpcSerialization from "@effect/rpc/RpcSerialization"
import * as Context from "effect/Context"
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
import type * as Digest from "../domain/Digest.js"
import * as Permits from "../domain/Permits.js"
import { SandboxError, SandboxerUnavailable } from "../domain/Sandbox.js"
import { describeErrno } from "../os/Errno.js"
import * as SandboxDir from "../sandbox/internal/sandboxDir.js"
import * as Store from "../store/Store.js"
import * as SandboxerProcess from "./internal/process.js"
import { SandboxerRpcs } from "./Rpc.js"

/**
 * @since 0.1.0
 * @category models
 */
export interface Service {
  /** Writes the tree `digest` into `destination`. A blob absent from the store fails with `MissingDigest`. */
  readonly materialize: (
    digest: Digest.Digest,
    destination: string,
    options?: {
      readonly mutablePaths?: ReadonlyArray<string>
      /** Default true; false for a sandbox, which exists already (if it is gone, its engine removed it). */
      readonly createDestination?: boolean
    }
  ) => Effect.Effect<void, Digest.MissingDigest | SandboxError | SandboxerUnavailable>
  /**
   * Arms the watchdog over the sandboxes this process owns under `root` (see `Sandboxes`): once this returns, a
   * sandbox created there is removed, and the process groups working in it SIGKILLed, if this process dies. Call it
   * before creating the sandbox. It does not wait for the sandboxer to be ready (a Node start): one that is still
   * starting when the engine dies cleans up once it is up.
   */
  readonly watch: (root: string) => Effect.Effect<void, SandboxerUnavailable>
  /**
   * The command that cleans up after this process if it dies (a sandboxer told that its parent is this process:
   * it SIGKILLs the groups working in this process's sandboxes under `roots`, removes those, and clears the reader
   * slots this process left in the store), for a watchdog that outlives it to start then (the spawner does). None
   * for the in-process implementation.
   */
  readonly postMortem: (
    roots: ReadonlyArray<string>
  ) => Effect.Effect<
    Option.Option<{ readonly argv: ReadonlyArray<string>; readonly log: string }>,
    SandboxerUnavailable
  >
  /** The running sandboxer's pid, if one runs (none for the in-process implementation). */
  readonly pid: Effect.Effect<Option.Option<number>>
  /** Starts the sandboxer if it is not running yet, and waits until it is ready. */
  readonly ensureRunning: Effect.Effect<void, SandboxerUnavailable>
}

/**
 * @since 0.1.0
 * @category tags
 */
export class Sandboxer extends Context.Tag("kiln/Sandboxer")<Sandboxer, Service>() {}

/**
 * @since 0.1.0
 * @category models
 */
export interface Options {
  /** How to run `kiln`: default `[node, $KILN_CLI]`, or this process's own script when it is kiln's CLI. */
  readonly command?: ReadonlyArray<string>
  /** Where sockets and logs go (default `$XDG_RUNTIME_DIR/kiln`, else a short per-user temp dir). */
  readonly socketDir?: string
  readonly idleTimeout?: Duration.DurationInput
  readonly startTimeout?: Duration.DurationInput
  /** How long the sandboxer may drain after SIGTERM before it is SIGKILLed. Default 10 s. */
  readonly stopGrace?: Duration.DurationInput
  /**
   * Stop the sandboxer once the Store has released its environments, not when this layer closes: a SIGKILL in
   * between would leave reader slots nobody clears. For a stack whose Store closes right after it, as the CLI's; a
   * library that keeps one Store open under many short-lived Sandboxer layers should leave it off. Default false.
   */
  readonly outliveStore?: boolean
}

/**
 * `kiln`'s own CLI: `$KILN_CLI` (the CLI sets it), else `dist/cli.cjs` beside this module of the library build (an
 * installed package has no `cli.js`: npm packs no symlinks).
 */
const defaultCommand = (): ReadonlyArray<string> | undefined => {
  if (process.env.KILN_CLI !== undefined) return [process.execPath, process.env.KILN_CLI]
  const url = (import.meta as { url?: string }).url
  if (url !== undefined) {
    const cli = fileURLToPath(new URL("../cli.cjs", url))
    if (fs.existsSync(cli)) return [process.execPath, cli]
  }
  return undefined
}

/** The parent's store settings, passed on so that the sandboxer opens exactly the same store. */
const storeArgs = (o: Store.Options): Array<string> => [
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

type Client = RpcClient.FromGroup<typeof SandboxerRpcs, RpcClientError>

interface Generation {
  readonly child: SandboxerProcess.Child
  /** The roots it watches: those on its command line and those sent since. */
  readonly roots: Set<string>
  /** Completes once it is ready and connected. */
  readonly client: Deferred.Deferred<Client, SandboxerUnavailable>
  readonly connected: { value: boolean }
  readonly scope: Scope.CloseableScope
}

const missingAfterNotFound = (store: Store.Service, digest: Digest.Digest) => store.ensureDownloaded(digest)

/**
 * Starts the sandboxer lazily, on first use; stops it (SIGTERM, drain, then SIGKILL) when the layer's scope closes,
 * or with `outliveStore` once the store it was built on has closed its environments.
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = (options: Options = {}): Effect.Effect<Service, never, Store.Store | Scope.Scope> =>
  Effect.gen(function*() {
    const store = yield* Store.Store
    // With outliveStore, sandboxers live until the store has released its environments: between this layer's end
    // and the store's, a SIGKILL of this process would leave reader slots that only a live watchdog clears.
    const lifetime = yield* Scope.make(ExecutionStrategy.sequential)
    yield* options.outliveStore === true
      ? store.afterClose(Scope.close(lifetime, Exit.void))
      : Effect.addFinalizer(() => Scope.close(lifetime, Exit.void))
    const lock = yield* Permits.make(1)
    const dir = options.socketDir ?? SandboxerProcess.socketDirectory()
    const grace = options.stopGrace ?? Duration.seconds(10)
    const startTimeout = options.startTimeout ?? Duration.seconds(30)
    const self = SandboxDir.self()
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

    const materializeOnce = (
      digest: Digest.Digest,
      destination: string,
      mutablePaths: ReadonlyArray<string>,
      createDestination: boolean
    ) =>
      // Uninterruptible: the sandboxer finishes a request it has started even when the engine is interrupted, so
      // the engine waits for the answer before its finalizers remove the sandbox the sandboxer is writing into.
      Effect.uninterruptible(
        call((client) => client.Materialize({ digest, destination, mutablePaths, createDestination }))
      )

    const watchSlowly = (root: string) =>
      Effect.gen(function*() {
        roots.add(root)
        const previous = current
        const gen = yield* generation()
        if (gen !== previous) {
          // A sandboxer that died before it was ever ready is likely to again: wait for this one, so that a
          // watchdog that cannot start fails the process (SandboxerUnavailable) instead of leaving it unwatched.
          if (previous !== undefined && !previous.connected.value) yield* Deferred.await(gen.client)
          return
        }
        if (gen.roots.has(root)) return
        yield* call((client) => client.Watch({ root }))
        gen.roots.add(root)
      })

    const service: Service = {
      materialize: (digest, destination, opts) =>
        Effect.gen(function*() {
          const mutablePaths = opts?.mutablePaths ?? []
          for (let attempt = 0;; attempt++) {
            const r = yield* Effect.either(
              materializeOnce(digest, destination, mutablePaths, opts?.createDestination !== false)
            )
            if (r._tag === "Right") return
            const e = r.left
            if (e._tag === "SandboxerUnavailable") return yield* Effect.fail(e)
            if (e._tag === "FailedPrecondition") {
              return yield* new SandboxError({ reason: "Materialize", path: destination, detail: e.reason })
            }
            // NotFound: never a reason to restart the sandboxer. Ask the store which blob is missing, for the typed
            // error backtracking needs; if none is (another process stored it meanwhile), try once more.
            yield* missingAfterNotFound(store, digest).pipe(
              Effect.catchTag("StoreError", (se) =>
                Effect.fail(new SandboxError({ reason: "Materialize", path: destination, detail: se.message })))
            )
            if (attempt >= 1) {
              return yield* new SandboxError({
                reason: "Materialize",
                path: destination,
                detail: `the sandboxer reported a missing blob twice, but the store has the whole tree`
              })
            }
          }
        }),
      // The hot path, once per process: a look at the running generation, no message.
      watch: (root) =>
        Effect.suspend(() =>
          current !== undefined && !current.child.gone.value && current.roots.has(root)
            ? Effect.void
            : watchSlowly(root)
        ),
      postMortem: (watching) =>
        Effect.flatMap(command, (cmd) =>
          Effect.try({
            try: () => Option.some(SandboxerProcess.postMortem(cmd, argsFor(watching), dir)),
            catch: (e) => new SandboxerUnavailable({ reason: `cannot prepare ${dir}: ${describeErrno(e)}` })
          })),
      pid: Effect.sync(() => Option.fromNullable(current?.child.pid)),
      ensureRunning: Effect.flatMap(generation(), (gen) => Effect.asVoid(Deferred.await(gen.client)))
    }
    return service
  })

/**
 * @since 0.1.0
 * @category layers
 */
export const layer = (options: Options = {}): Layer.Layer<Sandboxer, never, Store.Store> =>
  Layer.scoped(Sandboxer, make(options))

/**
 * Materializes in this process, for tests and for embedding apps that spawn no children. It has no watchdog:
 * `watch` does nothing, so a SIGKILLed host leaves its children and sandboxes behind (the next engine's sweep
 * removes the sandboxes).
 *
 * @since 0.1.0
 * @category layers
 */
export const layerInProcess: Layer.Layer<Sandboxer, never, Store.Store> = Layer.effect(
  Sandboxer,
  Effect.map(Store.Store, (store) => ({
    materialize: (digest, destination, opts) =>
      store.materialize(digest, destination, {
        mutablePaths: opts?.mutablePaths ?? [],
        createDestination: opts?.createDestination !== false
      }).pipe(
        Effect.catchTag(
          "StoreError",
          (e) => Effect.fail(new SandboxError({ reason: "Materialize", path: destination, detail: e.message }))
        )
      ),
    watch: () => Effect.void,
    postMortem: () => Effect.succeed(Option.none()),
    pid: Effect.succeed(Option.none()),
    ensureRunning: Effect.void
  }))
)
