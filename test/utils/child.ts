import { Duration, Effect, Schedule } from "effect"
import { type ChildProcess, spawn, type SpawnOptions } from "node:child_process"
import * as fs from "node:fs"
import * as readline from "node:readline"
import { statOf } from "../../src/os/Proc.js"

/** A child process that is SIGKILLed when the scope closes, if the test has not ended it. */
export const spawnScoped = (command: string, args: ReadonlyArray<string>, options: SpawnOptions = {}) =>
  Effect.acquireRelease(
    Effect.sync(() => spawn(command, args, { stdio: ["ignore", "pipe", "pipe"], ...options })),
    (child) =>
      Effect.sync(() => {
        if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL")
      })
  )

/** The first line the child prints on stdout; fails if it exits first. */
export const firstLine = (child: ChildProcess) =>
  Effect.async<string, Error>((resume) => {
    const lines = readline.createInterface({ input: child.stdout! })
    let stderr = ""
    child.stderr?.on("data", (d) => (stderr += d))
    lines.once("line", (line) => {
      lines.close()
      resume(Effect.succeed(line))
    })
    child.once("exit", (code) => resume(Effect.fail(new Error(`exited with ${code} before a line: ${stderr}`))))
  })

/** How the child ended. */
export const exitOf = (child: ChildProcess) =>
  Effect.async<{ readonly code: number | null; readonly signal: NodeJS.Signals | null }>((resume) => {
    if (child.exitCode !== null || child.signalCode !== null) {
      return resume(Effect.succeed({ code: child.exitCode, signal: child.signalCode }))
    }
    child.once("exit", (code, signal) => resume(Effect.succeed({ code, signal })))
  })

/** Polls a condition until it holds; fails with `what` after `within`. A bounded wait, not a timing assertion. */
export const eventually = (what: string, condition: () => boolean, within: Duration.DurationInput = "10 seconds") =>
  Effect.repeat(Effect.sync(condition), { until: (ok) => ok, schedule: Schedule.spaced("20 millis") }).pipe(
    Effect.timeoutFail({
      duration: within,
      onTimeout: () => new Error(`timed out after ${Duration.format(within)}: ${what}`)
    }),
    Effect.asVoid
  )

/** Whether a process group still has a running member (zombies are dead). */
export { groupAlive } from "../../src/os/Proc.js"

/** The children of `pid` whose command line contains `marker`, from /proc. */
export const childrenOf = (pid: number, marker: string): Array<number> => {
  const found: Array<number> = []
  for (const name of fs.readdirSync("/proc")) {
    if (!/^\d+$/.test(name)) continue
    try {
      if (statOf(name)?.ppid === pid && fs.readFileSync(`/proc/${name}/cmdline`, "utf8").includes(marker)) {
        found.push(Number(name))
      }
    } catch {
      // It exited while we looked.
    }
  }
  return found
}

/**
 * The processes working for the engine `pid`, by the argument that names it (`kiln-spawner <pid>`, `--parent-pid
 * <pid>`), from /proc: the spawner and sandboxers are started detached, so they are not its children.
 */
export const helpersOf = (marker: string, pid: number): Array<number> => {
  const found: Array<number> = []
  for (const name of fs.readdirSync("/proc")) {
    if (!/^\d+$/.test(name)) continue
    try {
      if (fs.readFileSync(`/proc/${name}/cmdline`, "utf8").includes(`${marker}\0${pid}`)) found.push(Number(name))
    } catch {
      // It exited while we looked.
    }
  }
  return found
}

/** The processes whose command line holds `text` (a test's temp path: its processes, and kiln's helpers given it). */
export const processesNaming = (text: string): Array<number> => {
  const found: Array<number> = []
  for (const name of fs.readdirSync("/proc")) {
    if (!/^\d+$/.test(name)) continue
    try {
      if (fs.readFileSync(`/proc/${name}/cmdline`, "utf8").includes(text)) found.push(Number(name))
    } catch {
      // It exited while we looked.
    }
  }
  return found
}

/** Whether a process runs (a zombie is dead). */
export { isAlive as pidAlive } from "../../src/os/Proc.js"
