/**
 * The engine's side of the sandboxer: materializes input trees into sandboxes through a sandboxer process of its
 * own (one per engine process, on its own socket), and registers process groups and sandboxes with it so that
 * they die with a SIGKILLed engine.
 *
 * @since 0.1.0
 */
import * as NodeSocket from "@effect/platform-node/NodeSocket"
import * as Socket from "@effect/platform/Socket"
import * as RpcClient from "@effect/rpc/RpcClient"
import { RpcClientError } from "@effect/rpc/RpcClientError"
import * as RpcSerialization from "@effect/rpc/RpcSerialization"
import { Context, Duration, Effect, ExecutionStrategy, Exit, Layer, Option, Scope } from "effect"
import * as fs from "node:fs"
import { fileURLToPath } from "node:url"
import type * as Digest from "../domain/Digest.js"
import { SandboxError, SandboxerUnavailable } from "../domain/Sandbox.js"
import { SandboxerRpcs } from "../domain/SandboxerRpc.js"
import * as Permits from "./internal/permits.js"
import * as SandboxDir from "./internal/sandboxDir.js"
import * as SandboxerProcess from "./internal/sandboxerProcess.js"
import * as Store from "./Store.js"

/**
 * @since 0.1.0
 * @category models
 */
export interface Adoption {
  readonly pgid?: number
  readonly sandbox?: string
}

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
      /** Have the watchdog adopt `destination` (a sandbox) in the same round trip. */
      readonly adopt?: boolean
    }
  ) => Effect.Effect<void, Digest.MissingDigest | SandboxError | SandboxerUnavailable>
  /** Has the watchdog SIGKILL this group and remove this sandbox if the engine dies. */
  readonly adopt: (adoption: Adoption) => Effect.Effect<void, SandboxerUnavailable>
  readonly release: (adoption: Adoption) => Effect.Effect<void, SandboxerUnavailable>
  /**
   * Sends an adoption or a release without waiting for the answer (the message is on the socket when this
   * returns); failures are logged. Saves a round trip per call on the hot path.
   */
  readonly notify: (kind: "adopt" | "release", adoption: Adoption) => Effect.Effect<void>
  /** The running sandboxer's pid, if one runs (none for the in-process implementation). */
  readonly pid: Effect.Effect<Option.Option<number>>
  /** Starts the sandboxer if it is not running yet (its start-up is a Node start, a few hundred ms). */
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
}

/** `kiln`'s own CLI: `$KILN_CLI` (the CLI sets it), else `dist/cli.js` beside this module of the library build. */
const defaultCommand = (): ReadonlyArray<string> | undefined => {
  if (process.env.KILN_CLI !== undefined) return [process.execPath, process.env.KILN_CLI]
  const url = (import.meta as { url?: string }).url
  if (url !== undefined) {
    const cli = fileURLToPath(new URL("../cli.js", url))
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
  readonly client: Client
  readonly scope: Scope.CloseableScope
}

const missingAfterNotFound = (store: Store.Service, digest: Digest.Digest) => store.ensureDownloaded(digest)

/**
 * Starts the sandboxer lazily, on first use; stops it (SIGTERM, drain, then SIGKILL) when the layer's scope closes.
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = (options: Options = {}): Effect.Effect<Service, never, Store.Store | Scope.Scope> =>
  Effect.gen(function*() {
    const store = yield* Store.Store
    const layerScope = yield* Effect.scope
    const lock = yield* Permits.make(1)
    const dir = options.socketDir ?? SandboxerProcess.socketDirectory()
    const grace = options.stopGrace ?? Duration.seconds(10)
    const self = SandboxDir.self()
    let current: Generation | undefined

    const spawnGeneration = Effect.gen(function*() {
      const command = options.command ?? defaultCommand()
      if (command === undefined) {
        return yield* new SandboxerUnavailable({
          reason: "cannot tell how to run kiln: set KILN_CLI or pass `command`"
        })
      }
      const args = [
        "--parent-start-time",
        self.startTime === "" ? "-" : self.startTime,
        "--idle-timeout",
        `${Duration.toMillis(options.idleTimeout ?? Duration.minutes(15))}ms`,
        ...storeArgs(store.options)
      ]
      const child = yield* SandboxerProcess.start(command, args, dir, options.startTimeout ?? Duration.seconds(30))
      const scope = yield* Scope.fork(layerScope, ExecutionStrategy.sequential)
      yield* Scope.addFinalizer(scope, SandboxerProcess.stop(child, grace))
      // The protocol (and its socket) must live in the generation's scope, not only while the client is made.
      const client = yield* Layer.buildWithScope(
        RpcClient.layerProtocolSocket().pipe(
          Layer.provide(NodeSocket.layerNet({ path: child.socket })),
          Layer.provide(RpcSerialization.layerMsgPack)
        ),
        scope
      ).pipe(
        Effect.flatMap((protocol) => RpcClient.make(SandboxerRpcs).pipe(Effect.provide(protocol), Scope.extend(scope))),
        Effect.catchTag("SocketError", (e) =>
          Effect.zipRight(
            Scope.close(scope, Exit.void),
            Effect.fail(
              new SandboxerUnavailable({ reason: `cannot connect to ${child.socket}: ${e.message}`, log: child.log })
            )
          ))
      )
      return { child, client, scope } satisfies Generation
    })

    const watched = { groups: new Set<number>(), sandboxes: new Set<string>() }
    const track = (kind: "adopt" | "release", a: Adoption) =>
      Effect.sync(() => {
        const op = kind === "adopt" ? "add" : "delete"
        if (a.pgid !== undefined) watched.groups[op](a.pgid)
        if (a.sandbox !== undefined) watched.sandboxes[op](a.sandbox)
      })

    const generation = (replace?: Generation) =>
      lock.withPermit(Effect.gen(function*() {
        if (current !== undefined && current !== replace) return current
        if (current !== undefined) {
          const old = current
          current = undefined
          yield* Scope.close(old.scope, Exit.void)
        }
        current = yield* spawnGeneration
        if (replace !== undefined) {
          // A new sandboxer knows nothing of what the old one watched: hand it everything still adopted.
          const client = current.client
          yield* Effect.forEach([...watched.groups], (pgid) => client.Adopt({ pgid }), { discard: true })
          yield* Effect.forEach([...watched.sandboxes], (sandbox) => client.Adopt({ sandbox }), { discard: true })
        }
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
        const first = yield* Effect.either(asTransport(f(gen.client)))
        if (first._tag === "Right") return first.right
        if (!(first.left instanceof RpcClientError)) return yield* Effect.fail(first.left as E)
        yield* Effect.logWarning(
          `the sandboxer (pid ${gen.child.pid}) is unreachable (${first.left.message}): restarting it`
        )
        const next = yield* generation(gen)
        return yield* asTransport(f(next.client))
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
      adopt: boolean
    ) =>
      // Uninterruptible: the sandboxer finishes a request it has started even when the engine is interrupted, so
      // the engine waits for the answer before its finalizers remove the sandbox the sandboxer is writing into.
      Effect.uninterruptible(call((client) => client.Materialize({ digest, destination, mutablePaths, adopt })))

    const service: Service = {
      materialize: (digest, destination, opts) =>
        Effect.gen(function*() {
          const mutablePaths = opts?.mutablePaths ?? []
          for (let attempt = 0;; attempt++) {
            if (opts?.adopt === true) yield* track("adopt", { sandbox: destination })
            const r = yield* Effect.either(materializeOnce(digest, destination, mutablePaths, opts?.adopt === true))
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
      adopt: (adoption) => Effect.zipRight(track("adopt", adoption), call((client) => client.Adopt(adoption))),
      release: (adoption) => Effect.zipRight(track("release", adoption), call((client) => client.Release(adoption))),
      notify: (kind, adoption) =>
        Effect.zipRight(
          track(kind, adoption),
          Effect.asVoid(Effect.forkIn(
            call((client) => kind === "adopt" ? client.Adopt(adoption) : client.Release(adoption)).pipe(
              Effect.catchAll((e) =>
                Effect.logWarning(`could not tell the sandboxer to ${kind} ${JSON.stringify(adoption)}: ${e.message}`)
              )
            ),
            layerScope
          ))
        ),
      pid: Effect.sync(() => Option.fromNullable(current?.child.pid)),
      ensureRunning: Effect.asVoid(generation()).pipe(
        Effect.catchIf(
          (e): e is RpcClientError => e instanceof RpcClientError,
          (e) => Effect.fail(new SandboxerUnavailable({ reason: e.message }))
        )
      )
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
 * `adopt` and `release` do nothing, so a SIGKILLed host leaves its children and sandboxes behind.
 *
 * @since 0.1.0
 * @category layers
 */
export const layerInProcess: Layer.Layer<Sandboxer, never, Store.Store> = Layer.effect(
  Sandboxer,
  Effect.map(Store.Store, (store) => ({
    materialize: (digest, destination, opts) =>
      store.materialize(digest, destination, { mutablePaths: opts?.mutablePaths ?? [] }).pipe(
        Effect.catchTag(
          "StoreError",
          (e) => Effect.fail(new SandboxError({ reason: "Materialize", path: destination, detail: e.message }))
        )
      ),
    adopt: () => Effect.void,
    release: () => Effect.void,
    notify: () => Effect.void,
    pid: Effect.succeed(Option.none()),
    ensureRunning: Effect.void
  }))
)
