/**
 * A spawner started by the CLI's loader before it loads the engine, for a `kiln run` that will run something: the
 * first process then finds it up instead of waiting for its Node start, which overlaps the engine's loading. The
 * engine takes it over on first use; one nobody takes sees its stdin end when this process exits, and exits too.
 *
 * Plain code: the loader uses it before Effect is loaded.
 *
 * @internal
 */
import type { ChildProcess, spawn as Spawn } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"
import { fileURLToPath } from "node:url"

const KEY = Symbol.for("kiln.warmSpawner")

/** Set in a warm spawner's environment (which no process it starts sees: each gets exactly its own). */
export const WARM_ENV = "KILN_SPAWNER_WARM"

/**
 * Names the spawner program to run instead of the one beside kiln's build: kiln run from its TypeScript sources (its
 * tests) has none beside it. A name ending in `.js`, `.cjs` or `.mjs` is run by Node; any other is executed.
 */
export const PROGRAM_ENV = "KILN_SPAWNER"

/**
 * The native spawner's file name for this platform and architecture: a package built on another kind of machine
 * has none for this one, and runs the Node spawner.
 *
 * @internal
 */
export const nativeName = `kiln-spawner-${process.platform}-${process.arch}`

/**
 * The spawner program: `dist/kiln-spawner-<platform>-<arch>` (`native/*.c`, compiled by the build when it has a C
 * compiler), or else `dist/spawner.cjs` (the bundle of `main.ts`). Both are two levels up from this module (`dist/layers/spawner/`) in the
 * library's build, an ES module, and beside the CLI's bundles, which are CommonJS (no `import.meta.url`) and know
 * `__dirname`.
 *
 * @internal
 */
export const programPath = (): string => {
  const named = process.env[PROGRAM_ENV]
  if (named !== undefined && named !== "") return named
  const url = (import.meta as { url?: string }).url
  const dist = url !== undefined ? fileURLToPath(new URL("../..", url)) : __dirname
  const native = path.join(dist, nativeName)
  return fs.existsSync(native) ? native : path.join(dist, "spawner.cjs")
}

/**
 * How to start a spawner working for `enginePid`: the program and its arguments, which `ps` shows as one short line.
 *
 * @internal
 */
export const commandFor = (
  enginePid: number,
  program: string = programPath()
): { readonly file: string; readonly args: Array<string> } =>
  /\.[cm]?js$/.test(program)
    ? { file: process.execPath, args: [program, "kiln-spawner", String(enginePid)] }
    : { file: program, args: ["kiln-spawner", String(enginePid)] }

const unref = (s: unknown) => (s as { unref?: () => void } | null)?.unref?.()

/** A warm spawner, and what it was started as: its command and the umask it (and every process it forks) has. */
interface Warm {
  readonly child: ChildProcess
  readonly startedAs: string
}

const startedAs = (command: { readonly file: string; readonly args: ReadonlyArray<string> }) =>
  JSON.stringify([command.file, command.args, process.umask()])

const alive = (child: ChildProcess) => child.exitCode === null && child.signalCode === null && child.pid !== undefined

/** The warm spawner, if it still runs as this process would start one now; one that does not is let go. */
const current = (command: { readonly file: string; readonly args: ReadonlyArray<string> }): Warm | undefined => {
  const g = globalThis as Record<symbol, unknown>
  const warm = g[KEY] as Warm | undefined
  if (warm === undefined) return undefined
  if (alive(warm.child) && warm.startedAs === startedAs(command)) return warm
  delete g[KEY]
  // Its stdin ended unarmed, it exits: a spawner whose engine ended cleanly.
  warm.child.stdin?.destroy()
  return undefined
}

/** Options of {@link startWarm}. @internal */
export interface StartOptions {
  /**
   * Only the native spawner, a few hundred kilobytes: a standby starts its next run's spawner while it waits, maybe
   * for a long time, and the Node one would hold a Node process's memory all the while.
   */
  readonly nativeOnly?: boolean
}

/**
 * Starts one for this process, unless one started as this process would start one now still runs (a standby starts
 * one while it waits for a run; the run's umask or spawner program may differ, and then it is replaced). Never
 * throws: without it, the engine starts its own.
 *
 * @internal
 */
export const startWarm = (spawn: typeof Spawn, options: StartOptions = {}): void => {
  try {
    const command = commandFor(process.pid)
    if (options.nativeOnly === true && command.file === process.execPath) return
    if (current(command) !== undefined) return
    const child = spawn(command.file, command.args, {
      stdio: ["pipe", "pipe", "inherit"],
      env: { [WARM_ENV]: "1" },
      // Its own session, as the engine's own spawner (Spawner.ts): it is the engine's watchdog.
      detached: true
    })
    // Its failures are the engine's to see when it takes it over: none may throw here.
    child.on("error", () => undefined)
    child.stdin?.on("error", () => undefined)
    // Until it is taken over, it must not keep this process alive.
    child.unref()
    unref(child.stdin)
    unref(child.stdout)
    ;(globalThis as Record<symbol, unknown>)[KEY] = { child, startedAs: startedAs(command) } satisfies Warm
  } catch {
    // The engine starts one when it needs it.
  }
}

/** The warm spawner, once, if it still runs as one started now would. @internal */
export const takeWarm = (): ChildProcess | undefined => {
  const warm = current(commandFor(process.pid))
  delete (globalThis as Record<symbol, unknown>)[KEY]
  return warm?.child
}
