/**
 * Runs a process in a fresh sandbox: materialize its inputs through the sandboxer, link its named caches, spawn it
 * in its own process group with exactly its declared environment, capture stdout, stderr and its declared outputs,
 * and remove the sandbox once the whole group is gone. The watchdog (`options.watch`) is armed over the sandbox root
 * first, so that the sandbox and whatever works in it die with a SIGKILLed engine too.
 *
 * `make` composes the phases over one `LocalRun` (see `localRun.ts`): open and fill the sandbox
 * (`localSandbox.ts`), spawn and wait (`localSpawn.ts`), capture and report (`localCapture.ts`).
 *
 * @internal
 */
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Scope from "effect/Scope"
import type * as Digest from "../../../domain/Digest.js"
import type { Process } from "../../../domain/Process.js"
import { materializeFailed, type SandboxError, type SandboxerUnavailable } from "../../../domain/Sandbox.js"
import * as Sandboxes from "../../sandbox/Sandboxes.js"
import type * as Sandboxer from "../../sandboxer/Sandboxer.js"
import type * as Spawner from "../../spawner/Spawner.js"
import * as LinkedInputs from "../../store/LinkedInputs.js"
import type * as SharedTrees from "../../store/SharedTrees.js"
import type * as Store from "../../store/Store.js"
import { capture, refuseCorrupted, report } from "./localCapture.js"
import * as LocalRun from "./localRun.js"
import { fill, openSandbox, writableHere } from "./localSandbox.js"
import { commandOf, guardLinked, spawnAndWait } from "./localSpawn.js"
import type { Runner, RunPolicy } from "./runner.js"
import { kindOf } from "./sandboxKind.js"
import * as SharedInputs from "./sharedInputs.js"

/** @internal */
export type LocalOptions = LocalRun.LocalOptions

/** @internal */
export const make = (
  store: Store.Service,
  sandboxer: Sandboxer.Service,
  sandboxes: Sandboxes.Service,
  spawner: Spawner.Spawner,
  options: LocalOptions
): Runner => {
  // The store's copy of a shared tree is written as a sandbox's inputs are: by the sandboxer when it is large, by this
  // engine when it is small (a `.bin` of shims, mounted over the workspace's), then made read-only and renamed into
  // place. Small ones by the sandboxer started it for them alone, on the first run of a store, and the next run with
  // processes started it again, on the memo's word that the last one used it.
  const writeShared: SharedTrees.Write<Digest.MissingDigest | SandboxError | SandboxerUnavailable> = (digest, into) =>
    Effect.flatMap(
      store.listTree(digest).pipe(Effect.orElseSucceed(() => undefined)),
      (entries) =>
        writableHere(entries)
          ? store.materialize(digest, into, { createDestination: false }).pipe(
            Effect.catchTag("StoreError", (e) => Effect.fail(materializeFailed(into, e)))
          )
          : Effect.zipRight(store.written, sandboxer.materialize(digest, into, { createDestination: false }))
    )
  const engine: LocalRun.LocalEngine = {
    store,
    sandboxer,
    sandboxes,
    spawner,
    options,
    planner: SharedInputs.planner(options.sharedTrees, sandboxes.root),
    linked: LinkedInputs.registry(),
    writeShared
  }
  const phases = (proc: Process, policy: RunPolicy) =>
    Effect.gen(function*() {
      const run = LocalRun.make(engine, proc, policy)
      const opened = yield* openSandbox(run)
      const filled = yield* fill(run, opened)
      const guard = yield* guardLinked(run, opened)
      const command = yield* commandOf(run, opened, filled, guard)
      const logs = Sandboxes.logsOf(opened.sandbox.path)
      const waited = yield* spawnAndWait(run, filled, command, logs)
      yield* refuseCorrupted(opened, guard)
      const captured = yield* capture(run, filled, logs)
      const sandbox = yield* kindOf(command.namespace !== undefined)
      return yield* report(run, opened, filled, waited, captured, sandbox)
    })
  // A run whose result a consumer waits for alone closes its scope (its sandbox given back or removed, its leases let
  // go) in the background: the consumer may start meanwhile. Its group is gone by then (`spawnAndWait`), and the
  // closing cannot be interrupted: the engine's own end waits for it (`LocalOptions.closeLater`). Any other closes
  // first: among processes that run side by side, a sandbox given back at once is the next one's to reuse. A failed
  // run closes first too.
  return (proc, policy) =>
    Effect.uninterruptibleMask((restore) =>
      Effect.flatMap(Scope.make(), (scope) =>
        Effect.onExit(
          restore(Scope.extend(phases(proc, policy), scope)),
          (exit) =>
            Exit.isSuccess(exit) && policy.awaited === true
              ? options.closeLater(Scope.close(scope, exit))
              : Scope.close(scope, exit)
        ))
    )
}
