/**
 * The checks that the workspace directories a process mounted held while it ran (`WorkspaceTree.unchanged`), made
 * for many processes at once. Each check `lstat`s every path of a tree: after each process, a `node_modules` of
 * 60,000 paths mounted by every process of a run cost O(files × processes), ~80 ms of the engine's thread each time.
 *
 * A check that finds a tree as its snapshot recorded it says that nothing under it changed from the snapshot until
 * the check began (a change moves a path's `ctime`, which never goes back), so it vouches for every process that had
 * ended by then. A process that ends is given a ticket (its result's `inputsCheck`) and is not checked on its own: the
 * checks are made together, once per tree, a while after the first one waiting (long enough that they cost a small
 * share of the run, whatever the trees' size), when the caller settles (a run's end), and when the runner closes.
 * Only what a result is trusted for waits for its ticket: its action cache entry and its upload are written once
 * its trees held, and never if one did not; its outputs, its report and its dependents go on at once, as they did
 * when the result was this run's but not cached.
 *
 * @internal
 */
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Queue from "effect/Queue"
import type * as Scope from "effect/Scope"
import type { WorkspaceTree } from "../ProcessRunner.js"

/** @internal */
export interface TreeChecks {
  /** A process (`description`) that mounted `trees` has ended: its ticket, to ask {@link held} later. */
  readonly after: (description: string, trees: ReadonlyArray<WorkspaceTree>) => Effect.Effect<number>
  /** Whether every tree of the ticket's process held while it ran; waits for its check. */
  readonly held: (ticket: number) => Effect.Effect<boolean>
  /** Checks now every tree a process waits on; the tickets found changed so far. */
  readonly settle: Effect.Effect<ReadonlySet<number>>
}

/** @internal */
export interface Options {
  /**
   * How long after the first process waits the trees are checked. Default: 50 times what checking the trees waiting
   * then costs (measured by the rounds before), from one to ten seconds: the checks cost ~2 % of a run's time at
   * most, and a result's entry waits about that long (a `node_modules` of 60,000 paths: ~4 s).
   */
  readonly delay?: Duration.DurationInput
}

interface Waiting {
  readonly description: string
  readonly trees: ReadonlyArray<WorkspaceTree>
  readonly answer: Deferred.Deferred<boolean>
  /** A round has checked its trees and is giving the answers (until then, {@link TreeChecks.held} waits). */
  taken: boolean
}

const MIN_DELAY_MS = 1_000
/** At most: how long an entry waits (and another kiln waiting for the same action), what a SIGKILL loses. */
const MAX_DELAY_MS = 10_000
/** The checks' cost is kept to about 1/50 of the time they wait. */
const DELAY_PER_CHECK_MS = 50
/** What checking a path is taken to cost until a round has measured it (an `lstat` of a cached inode, on threads). */
const FIRST_MS_PER_PATH = 0.002

/** How many paths checking `trees` `lstat`s, each distinct tree once. */
const sizeOf = (trees: ReadonlyArray<WorkspaceTree>): number => {
  const seen = new Map<WorkspaceTree["unchanged"], number>()
  for (const t of trees) seen.set(t.unchanged, t.files)
  let paths = 0
  for (const n of seen.values()) paths += n
  return paths
}

/**
 * The checks, with their background fiber in `scope`'s lifetime; closing it checks whatever still waits (the
 * entries waiting on it are then written or dropped, never left waiting).
 *
 * @internal
 */
export const make = (options: Options = {}): Effect.Effect<TreeChecks, never, Scope.Scope> =>
  Effect.gen(function*() {
    const fixedMs = options.delay === undefined ? undefined : Duration.toMillis(Duration.decode(options.delay))
    const waiting = new Map<number, Waiting>()
    const changed = new Set<number>()
    let next = 0
    let msPerPath = FIRST_MS_PER_PATH
    const wake = yield* Queue.sliding<void>(1)

    /**
     * Every tree a process waits on checked once (the same tree for many processes is one `unchanged`), every answer
     * known before any is given; never interrupted halfway, or a process taken would wait for ever.
     */
    const round = Effect.uninterruptible(Effect.suspend(() => {
      const taken = [...waiting].filter(([, w]) => !w.taken)
      if (taken.length === 0) return Effect.void
      const started = performance.now()
      const held = new Map<WorkspaceTree["unchanged"], boolean>()
      const holds = (tree: WorkspaceTree) => {
        let h = held.get(tree.unchanged)
        if (h === undefined) {
          // A check that cannot be made (the addon out of memory) says nothing held: the processes taken are
          // answered all the same, and nothing waits for ever.
          try {
            h = tree.unchanged()
          } catch {
            h = false
          }
          held.set(tree.unchanged, h)
        }
        return h
      }
      const answers = taken.map(([ticket, w]) => {
        w.taken = true
        const moved = w.trees.filter((t) => !holds(t))
        if (moved.length > 0) changed.add(ticket)
        return { ticket, w, moved }
      })
      const paths = sizeOf(taken.flatMap(([, w]) => w.trees))
      if (paths > 0) msPerPath = (performance.now() - started) / paths
      return Effect.forEach(answers, ({ moved, ticket, w }) =>
        Effect.zipRight(
          moved.length === 0 ? Effect.void : Effect.logWarning(
            `${w.description}: ${
              moved.map((t) => t.abs).join(", ")
            } changed since the run hashed it (checked after it ended): its result is not cached`
          ),
          Effect.sync(() => waiting.delete(ticket)).pipe(
            Effect.zipRight(Deferred.succeed(w.answer, moved.length === 0))
          )
        ), { discard: true })
    }))

    // From the trees waiting when the first process ends: a large tree is checked less often than a small one.
    const delayMs = () =>
      fixedMs ?? Math.min(
        MAX_DELAY_MS,
        Math.max(MIN_DELAY_MS, DELAY_PER_CHECK_MS * msPerPath * sizeOf([...waiting.values()].flatMap((w) => w.trees)))
      )
    // Woken by the first process to wait; the round then takes every one that came meanwhile.
    yield* Effect.forkScoped(Effect.forever(
      Effect.zipRight(
        Queue.take(wake),
        Effect.zipRight(Effect.suspend(() => Effect.sleep(Duration.millis(delayMs()))), round)
      )
    ))
    yield* Effect.addFinalizer(() => round)

    return {
      after: (description, trees) =>
        Effect.gen(function*() {
          const ticket = next++
          waiting.set(ticket, { description, trees, answer: yield* Deferred.make<boolean>(), taken: false })
          // A sliding queue of one: the wakes of many processes ending before the round are one.
          yield* Queue.offer(wake, undefined)
          return ticket
        }),
      held: (ticket) =>
        Effect.suspend(() => {
          const w = waiting.get(ticket)
          return w === undefined ? Effect.succeed(!changed.has(ticket)) : Deferred.await(w.answer)
        }),
      settle: Effect.as(round, changed)
    }
  })
