/**
 * The engine's side of the sandboxer: materializes input trees into sandboxes through a sandboxer process of its
 * own (one per engine process, on its own socket), which is also the engine's watchdog: it is told the sandbox
 * roots once, and if the engine dies it finds the engine's sandboxes there by their names (each names its engine),
 * SIGKILLs the process groups working in them and removes them. Nothing crosses the socket per process for that.
 *
 * @since 0.1.0
 */
import * as Context from "effect/Context"
import * as Deferred from "effect/Deferred"
import type * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as ExecutionStrategy from "effect/ExecutionStrategy"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Scope from "effect/Scope"
import type * as Digest from "../../domain/Digest.js"
import { materializeFailed, SandboxError, SandboxerUnavailable } from "../../domain/Sandbox.js"
import { describeErrno } from "../../os/Errno.js"
import * as HelperLifetime from "../lifetime/HelperLifetime.js"
import * as Store from "../store/Store.js"
import * as Generations from "./internal/generations.js"
import * as SandboxerProcess from "./internal/process.js"

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
  /**
   * Starts the sandboxer if it is not running yet, without waiting for it: its Node start then overlaps whatever
   * the caller does before its first `materialize`.
   */
  readonly start: Effect.Effect<void, SandboxerUnavailable>
  /** Whether anything was materialized through it in this process (a start alone does not count). */
  readonly used: Effect.Effect<boolean>
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

const missingAfterNotFound = (store: Store.Service, digest: Digest.Digest) =>
  store.ensureTree(digest, { complete: true })

/**
 * Starts the sandboxer lazily, on first use; stops it (SIGTERM, drain, then SIGKILL) when the layer's scope closes,
 * or, with a `HelperLifetime` in the layer graph, when that ends.
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = (options: Options = {}): Effect.Effect<Service, never, Store.Store | Scope.Scope> =>
  Effect.gen(function*() {
    const store = yield* Store.Store
    // With a HelperLifetime beneath the Store, sandboxers live until the store has released its environments:
    // between this layer's end and the store's, a SIGKILL of this process would leave reader slots that only a live
    // watchdog clears.
    const lifetime = yield* Scope.make(ExecutionStrategy.sequential)
    yield* HelperLifetime.endWith(Scope.close(lifetime, Exit.void))
    const generations = yield* Generations.make(options, store, lifetime)
    const { argsFor, call, command, dir, generation, roots } = generations
    const isWatched = (root: string) => {
      const current = generations.current()
      return current !== undefined && !current.child.gone.value && current.roots.has(root)
    }

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
        const previous = generations.current()
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

    let used = false
    const service: Service = {
      materialize: (digest, destination, opts) =>
        Effect.gen(function*() {
          used = true
          const mutablePaths = opts?.mutablePaths ?? []
          for (let attempt = 0;; attempt++) {
            const r = yield* Effect.either(
              materializeOnce(digest, destination, mutablePaths, opts?.createDestination !== false)
            )
            if (r._tag === "Right") return
            const e = r.left
            if (e._tag === "SandboxerUnavailable") return yield* Effect.fail(e)
            if (e._tag === "FailedPrecondition") {
              // The sandboxer's store error, when that is what failed, comes across whole: a full disk stays NoSpace.
              return yield* e.cause === undefined
                ? new SandboxError({ reason: "Materialize", path: destination, detail: e.reason })
                : materializeFailed(destination, e.cause)
            }
            // NotFound: never a reason to restart the sandboxer. Ask the store which blob is missing, for the typed
            // error backtracking needs; if none is (another process stored it meanwhile), try once more.
            yield* missingAfterNotFound(store, digest).pipe(
              Effect.catchTag("StoreError", (se) => Effect.fail(materializeFailed(destination, se)))
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
          isWatched(root)
            ? Effect.void
            : watchSlowly(root)
        ),
      postMortem: (watching) =>
        Effect.flatMap(command, (cmd) =>
          Effect.try({
            try: () => Option.some(SandboxerProcess.postMortem(cmd, argsFor(watching), dir)),
            catch: (e) => new SandboxerUnavailable({ reason: `cannot prepare ${dir}: ${describeErrno(e)}` })
          })),
      pid: Effect.sync(() => Option.fromNullable(generations.current()?.child.pid)),
      ensureRunning: Effect.flatMap(generation(), (gen) => Effect.asVoid(Deferred.await(gen.client))),
      start: Effect.asVoid(generation()),
      used: Effect.sync(() => used)
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
        Effect.catchTag("StoreError", (e) => Effect.fail(materializeFailed(destination, e)))
      ),
    watch: () => Effect.void,
    postMortem: () => Effect.succeed(Option.none()),
    pid: Effect.succeed(Option.none()),
    ensureRunning: Effect.void,
    start: Effect.void,
    used: Effect.succeed(false)
  }))
)
