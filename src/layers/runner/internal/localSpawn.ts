/**
 * A local run's middle phases: its linked inputs watched, its command written out (in a mount namespace when it
 * mounts anything or is pinned to its exec root), and its process group spawned and waited for under a permit, ended whole before its outputs
 * are read.
 *
 * @internal
 */
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as fs from "node:fs"
import * as path from "node:path"
import * as ResolvedConfig from "../../../domain/config/ResolvedConfig.js"
import { CHROOT } from "../../../domain/Process.js"
import { SandboxError } from "../../../domain/Sandbox.js"
import { ioError } from "../../../os/IoError.js"
import * as MountNamespace from "../../../os/mounts/MountNamespace.js"
import type * as Sandboxes from "../../sandbox/Sandboxes.js"
import * as LinkedInputs from "../../store/LinkedInputs.js"
import type * as Store from "../../store/Store.js"
import { HostEnv } from "../HostEnv.js"
import * as Follow from "./follow.js"
import type { LocalRun } from "./localRun.js"
import type { Filled, Opened } from "./localSandbox.js"
import * as ProcessGroup from "./processGroup.js"
import { hostPathsOf, toolDirs, viewFor } from "./strictView.js"

/** The files of a tree that may be hard links to the store's blobs (see `LinkedInputs`): executables are copies. */
const linkable = (entries: ReadonlyArray<Store.TreeEntry> | undefined) =>
  (entries ?? []).flatMap((e) =>
    e.type === "file" && e.isExecutable !== true && e.digest!.sizeBytes >= LinkedInputs.THRESHOLD
      ? [{ path: e.path, digest: e.digest! }]
      : []
  )

/** @internal */
export interface Guard {
  /** Its large inputs that are the store's own blobs; undefined when it has none. */
  readonly watched: LinkedInputs.Watched | undefined
  /** Checks them once its group is gone: what changed, each removed from the store. */
  readonly checkAfter: Effect.Effect<Array<LinkedInputs.Changed>>
}

const unguarded: Guard = { watched: undefined, checkAfter: Effect.succeed([]) }

/**
 * Watches the process's large inputs that are the store's own blobs: looked at again once it is gone (`checkAfter`),
 * or, when it is interrupted, as its scope closes (its group is ended first): a blob it changed must not stay in the
 * store for the next run to link unnoticed.
 *
 * @internal
 */
export const guardLinked = (run: LocalRun, opened: Opened) => {
  const { linked, store } = run.engine
  const large = linkable(opened.entries)
  if (large.length === 0) return Effect.succeed(unguarded)
  let checkedAfter = false
  return Effect.map(
    Effect.acquireRelease(
      Effect.sync(() => LinkedInputs.watch(linked, store, opened.sandbox.path, large)),
      (w) =>
        Effect.zipRight(
          checkedAfter ?
            Effect.void :
            Effect.tap(LinkedInputs.check(store, w), (changed) =>
              Effect.forEach(changed, (c) =>
                Effect.logWarning(LinkedInputs.describe(run.proc.description, c)), {
                discard: true
              })),
          Effect.sync(() =>
            LinkedInputs.release(linked, w)
          )
        )
    ),
    (watched): Guard => ({
      watched,
      checkAfter: Effect.suspend(() => {
        checkedAfter = true
        return LinkedInputs.check(store, watched)
      })
    })
  )
}

/**
 * At most this many linked inputs are bound read-only in a process's mount namespace: each bind is two system calls
 * in the native spawner but an exec of mount(8) in the Node one (and in a kept sandbox's `__run.sh`), so a thousand
 * of them would add seconds to a process there, where the check after the process costs a hash comparison per input.
 */
const READ_ONLY_LINKS_MAX = 16

const substitute = (s: string, sandbox: string) => s.split(CHROOT).join(sandbox)

/** @internal */
export interface Command {
  readonly argv: ReadonlyArray<string>
  readonly env: Record<string, string>
  /** The mount namespace the spawner makes for it (see `MountNamespace.toWire`); undefined: none. */
  readonly namespace: ReadonlyArray<string> | undefined
}

/**
 * Where the process sees its sandbox (`proc.execRoot`, when it is pinned) and the mode of the namespace that shows it
 * there. A process pinned to a path this machine cannot show it at fails: run at its random path, its result would
 * be stored under a key that says otherwise.
 */
const pinnedOf = (run: LocalRun, opened: Opened) => {
  const { execRoot } = run.proc
  if (execRoot === undefined) return Effect.succeed(undefined)
  const here = MountNamespace.execRoot()
  return here.root === execRoot
    ? Effect.succeed({ root: execRoot, mode: MountNamespace.probe().mode! })
    : Effect.fail(
      new SandboxError({
        reason: "Create",
        path: opened.sandbox.path,
        detail: `${run.proc.description} is to run at ${execRoot}, which this machine cannot show its sandbox at (${
          here.root !== undefined ? `it shows it at ${here.root}` : here.why
        })`
      })
    )
}

/**
 * The command as it is spawned, the path the process sees its sandbox at put in for `CHROOT` (`proc.execRoot`, else
 * the sandbox's own), and recorded in the sandbox.
 *
 * @internal
 */
export const commandOf = (run: LocalRun, opened: Opened, filled: Filled, guard: Guard) =>
  Effect.gen(function*() {
    const { proc } = run
    const { layout, sandbox } = opened
    const { mounts } = filled.mounts
    const pinned = yield* pinnedOf(run, opened)
    const seen = pinned?.root ?? sandbox.path
    const env = Object.fromEntries(Object.entries(proc.env).map(([k, v]) => [k, substitute(v, seen)]))
    const command = proc.argv.map((a) => substitute(a, seen))
    // The mounts are the process's own: they vanish with it, whatever ends it. Where it has a mount namespace
    // anyway, each input that is a store blob's hard link is bound read-only over itself: a write in place, or a
    // chmod, fails there, instead of being noticed after. Up to a few (see READ_ONLY_LINKS_MAX); the check after the
    // process covers the rest.
    const { watched } = guard
    const view = yield* viewFor(proc)
    const namespace = view !== undefined || pinned !== undefined || mounts.length > 0
    const protect = namespace && watched !== undefined && watched.linked.length <= READ_ONLY_LINKS_MAX
    const readOnly = !protect ? [] : watched.linked.map((l) => {
      const file = path.join(sandbox.path, ...l.rel.split("/"))
      return { source: file, target: file }
    })
    // Pinned, the sandbox (the mounts inside it included) is bound over the exec root and the process starts in its
    // working directory there: what it sees of its own path is the same in every run. In a view that is not pinned,
    // the view's root shows the sandbox at its own path.
    const at = pinned !== undefined
      ? {
        sandbox: sandbox.path,
        cwd: path.posix.join(pinned.root, ...path.relative(sandbox.path, filled.cwd).split(path.sep))
      }
      : view !== undefined
      ? { sandbox: sandbox.path, cwd: filled.cwd, root: sandbox.path }
      : undefined
    // The view's private /tmp is where temporary files go, unless the process says otherwise. Not in `proc.env`: the
    // key is the same with the view and without.
    const viewEnv = view === undefined || env.TMPDIR !== undefined ? env : { ...env, TMPDIR: "/tmp" }
    const spawnedEnv = yield* withPassedThrough(viewEnv, proc.passThroughEnv)
    const shown = view === undefined ? undefined : {
      ...view,
      hostPaths: hostPathsOf(
        view,
        toolDirs(spawnedEnv.PATH, seen, [run.engine.store.options.root, run.engine.sandboxes.root])
      ),
      // Its sandbox links to them (see `localSandbox.ts`): they are its own state, kept from one run to the next.
      writablePaths: Object.keys(proc.namedCaches).map((name) => path.join(run.engine.options.namedCachesDir, name))
    }
    const made: MountNamespace.Namespace | undefined = !namespace
      ? undefined
      : {
        mode: pinned?.mode ?? layout.mode ?? MountNamespace.probe().mode!,
        mounts: [...mounts, ...readOnly],
        pinned: at,
        view: shown
      }
    // A kept sandbox's `__run.sh` makes the namespace with unshare(1) and mount(8), as the Node spawner does; the
    // script is made only for a sandbox that is kept. Its record has the rest, never a pass-through value: only the
    // spawned process gets those.
    yield* sandbox.setCommand(() => ({
      argv: made === undefined
        ? command
        : MountNamespace.wrap(made.mode, made.mounts, command, viewEnv, made.pinned, made.view),
      env: viewEnv,
      workingDirectory: proc.workingDirectory
    }))
    return {
      argv: command,
      env: spawnedEnv,
      namespace: made === undefined ? undefined : MountNamespace.toWire(made)
    } satisfies Command
  })

/** `env` and the pass-through variables' values, from kiln's environment (else their defaults) as it is now. */
const withPassedThrough = (env: Record<string, string>, entries: ReadonlyArray<string>) =>
  entries.length === 0 ? Effect.succeed(env) : Effect.map(HostEnv, (host) => {
    const passed: Record<string, string> = { ...env }
    for (const entry of entries) {
      const value = ResolvedConfig.valueOf(entry, host)
      // Unset since the config was loaded (a library caller's environment): the process runs without it.
      if (value !== undefined) passed[ResolvedConfig.entryOf(entry).name] = value
    }
    return passed
  })

/** @internal */
export interface Waited {
  readonly exit: ProcessGroup.Exit
  readonly timedOut: boolean
}

/**
 * Spawns the process group and waits for its leader (up to its timeout), then ends the rest of the group. stdout and
 * stderr go to `logs`, files beside the sandbox (outside it: the process sees only its inputs), read once the group
 * is gone: no pipe for the engine to service while the process runs, and memory stays bounded.
 *
 * @internal
 */
export const spawnAndWait = (
  run: LocalRun,
  filled: Filled,
  command: Command,
  logs: ReturnType<typeof Sandboxes.logsOf>
) =>
  Effect.gen(function*() {
    const { options, spawner } = run.engine
    const { proc, timings } = run
    const queued = Date.now()
    // The permit is held while the process group lives, and only then: its sandbox is filled before and captured
    // after while other processes run (what a permit bounds is the tools running at once). The group is ended
    // before the permit goes, except when interrupted: then the scope's finalizer ends it, a moment later. (A scope
    // of its own would cost every process another change of its fiber's context.)
    const waited = yield* options.running.withPermit(
      Effect.gen(function*() {
        const runStarted = Date.now()
        timings.queue = runStarted - queued
        if (run.policy.onStart !== undefined) yield* run.policy.onStart
        const group = yield* ProcessGroup.spawnGroup(
          spawner,
          {
            argv: command.argv,
            cwd: filled.cwd,
            env: command.env,
            ...(command.namespace !== undefined ? { namespace: command.namespace } : {}),
            ...logs
          },
          options.grace
        )
        // Followed (when asked) until the whole group is gone: what a straggler wrote is told too.
        return yield* Follow.following(
          logs,
          run.policy.onOutput,
          Effect.gen(function*() {
            const exited: Option.Option<ProcessGroup.Exit> = proc.timeoutMs === undefined
              ? Option.some(yield* Deferred.await(group.exited))
              : yield* Effect.timeoutOption(Deferred.await(group.exited), Duration.millis(proc.timeoutMs))
            const timedOut = Option.isNone(exited)
            if (Option.isSome(exited)) ProcessGroup.exitSeen(group, exited.value)
            // The leader exited (or timed out): end whatever is left of its group before reading outputs, so no
            // straggler writes into the sandbox while it is captured or removed.
            yield* ProcessGroup.terminate(group, timedOut ? options.grace : Duration.zero)
            const exit = Option.isSome(exited) ? exited.value : yield* Deferred.await(group.exited)
            timings.run = Date.now() - runStarted
            return { exit, timedOut } satisfies Waited
          })
        )
      }).pipe(Effect.ensuring(run.policy.onEnd ?? Effect.void))
    )
    if (waited.timedOut) {
      yield* Effect.try({
        try: () =>
          fs.appendFileSync(
            logs.stderr,
            `\nkiln: ${proc.description} timed out after ${Duration.format(Duration.millis(proc.timeoutMs!))}\n`
          ),
        catch: ioError(logs.stderr, `cannot note the timeout of ${proc.description}`)
      })
    }
    return waited
  })
