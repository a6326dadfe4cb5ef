/**
 * The state one local run shares between its phases: the engine's services and settings (the same for every
 * process), the process and its policy, when it began and how long each phase took. Each phase (open the sandbox
 * and fill it, spawn and wait, capture, report) is a function of its own that reads this record and what the phases
 * before it returned; `local.ts` composes them.
 *
 * @internal
 */
import type * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import type * as Digest from "../../../domain/Digest.js"
import type * as Permits from "../../../domain/Permits.js"
import type { Process } from "../../../domain/Process.js"
import type { SandboxError, SandboxerUnavailable } from "../../../domain/Sandbox.js"
import type * as Sandboxes from "../../sandbox/Sandboxes.js"
import type * as Sandboxer from "../../sandboxer/Sandboxer.js"
import type * as Spawner from "../../spawner/Spawner.js"
import type * as LinkedInputs from "../../store/LinkedInputs.js"
import type * as SharedTrees from "../../store/SharedTrees.js"
import type * as Store from "../../store/Store.js"
import type { RunPolicy } from "./runner.js"
import type * as SharedInputs from "./sharedInputs.js"
import type * as TreeChecks from "./treeChecks.js"

/** @internal */
export interface LocalOptions {
  readonly namedCachesDir: string
  readonly grace: Duration.DurationInput
  /** Arms the watchdog over the sandboxes under `root`: once this returns, they die with this process. */
  readonly watch: (root: string) => Effect.Effect<void, SandboxerUnavailable>
  /** Held while a process group lives: at most so many at once. */
  readonly running: Permits.Permits
  /**
   * Runs a finished run's closing (its scope's) in the background, where the engine's end waits for it, never
   * interrupting it.
   */
  readonly closeLater: (closing: Effect.Effect<void>) => Effect.Effect<void>
  /** Large input subtrees are mounted from here rather than written into each sandbox; without, all are written. */
  readonly sharedTrees?: SharedTrees.Service | undefined
  /** Where a process that mounted workspace directories waits for the check that they held (see `treeChecks.ts`). */
  readonly treeChecks: TreeChecks.TreeChecks
}

/** What every local run of one engine uses: its services, its settings, and what its runs share. @internal */
export interface LocalEngine {
  readonly store: Store.Service
  readonly sandboxer: Sandboxer.Service
  readonly sandboxes: Sandboxes.Service
  readonly spawner: Spawner.Spawner
  readonly options: LocalOptions
  readonly planner: SharedInputs.Planner
  /** The store's blobs hard-linked into sandboxes now, across this engine's processes. */
  readonly linked: LinkedInputs.Registry
  /** Writes a shared tree's copy in the store (see `SharedTrees.place`). */
  readonly writeShared: SharedTrees.Write<Digest.MissingDigest | SandboxError | SandboxerUnavailable>
}

/** @internal */
export interface LocalRun {
  readonly engine: LocalEngine
  readonly proc: Process
  readonly policy: RunPolicy
  /** `Date.now()` when the run began: the result's duration counts from it. */
  readonly started: number
  /** How long each phase took, by name: the result's `timings`. */
  readonly timings: Record<string, number>
}

/** @internal */
export const make = (engine: LocalEngine, proc: Process, policy: RunPolicy): LocalRun => ({
  engine,
  proc,
  policy,
  started: Date.now(),
  timings: {}
})

/** Runs `effect`, noting how long it took (however it ended) as the phase `name`. @internal */
export const timed = <A, E, R>(run: LocalRun, name: string, effect: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
  Effect.suspend(() => {
    const t = Date.now()
    return Effect.ensuring(effect, Effect.sync(() => void (run.timings[name] = Date.now() - t)))
  })
