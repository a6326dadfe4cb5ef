/**
 * A workspace whose runs may use standby engines (`src/programs/kiln/standby/`), in a runtime directory of its own,
 * for the tests of the standby through the built CLI: runs started as a user starts them (the Node loader or the
 * native `kiln`), each carrying a marker in its environment by which every standby it started is found and ended at
 * the test's end.
 */
import { assert } from "@effect/vitest"
import { Effect } from "effect"
import { spawn } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"
import * as Proc from "../../src/os/Proc.js"
import { standbyPids } from "../../src/programs/kiln/standby/protocol.js"
import { eventually, exitOf, helpersOf, processesNaming } from "./child.js"
import type { CliResult } from "./cliRun.js"
import { cli } from "./stack.js"
import { tempDir } from "./temp.js"

export const PATH = "/usr/bin:/bin"

/**
 * Who asks the standby: the Node loader (`node dist/cli.js`) or the native `kiln` command (`dist/kiln`, package.json's
 * bin: `native/client.c`), which must say and take exactly the same.
 */
export type Client = "node" | "native"
export const nativeCli = path.resolve("dist/kiln")
export const started = (client: Client, args: ReadonlyArray<string>): [string, Array<string>] =>
  client === "node" ? [process.execPath, [cli, ...args]] : [nativeCli, [...args]]

export const isAlive = (pid: number) => {
  try {
    process.kill(pid, 0)
    return true
  } catch {
    return false
  }
}

/** The standbys whose environment carries `mark` (their runs' marker): their pids. */
export const standbysOf = (mark: string): Array<number> =>
  standbyPids((pid) => Proc.environOf(pid)?.includes(`KILN_TEST_STANDBY_MARK=${mark}`) === true)

/** A workspace whose runs may use standbys, in a runtime directory of its own; its standbys end with the test. */
export const workspace = (processes: Record<string, unknown>, files: Record<string, string>, client: Client = "node") =>
  Effect.gen(function*() {
    const root = yield* tempDir("kiln-standby-")
    const ws = path.join(root, "ws")
    const run = path.join(root, "run")
    fs.mkdirSync(ws)
    fs.mkdirSync(run, { mode: 0o700 })
    fs.writeFileSync(path.join(ws, "kiln.json"), JSON.stringify({ processes }))
    for (const [rel, text] of Object.entries(files)) {
      fs.mkdirSync(path.dirname(path.join(ws, rel)), { recursive: true })
      fs.writeFileSync(path.join(ws, rel), text)
    }
    const env: NodeJS.ProcessEnv = {
      ...process.env,
      HOME: root,
      KILN_STORE_DIR: path.join(root, "store"),
      KILN_SANDBOX_ROOT: path.join(root, "sandboxes"),
      KILN_NAMED_CACHES_DIR: path.join(root, "named"),
      XDG_RUNTIME_DIR: run,
      KILN_STANDBY: "",
      KILN_STANDBY_DEBUG: "1",
      CI: "",
      KILN_TEST_STANDBY_MARK: root,
      // The native client runs the `node` on PATH: this one, whose standbys the test's runs start.
      PATH: `${path.dirname(process.execPath)}:${process.env.PATH ?? PATH}`
    }
    yield* Effect.addFinalizer(() =>
      Effect.gen(function*() {
        const killed = new Set<number>()
        // Again until none is left: a run's next standby is forked just after its client has its code.
        yield* eventually("the test's standbys are gone", () => {
          const left = standbysOf(root)
          for (const pid of left) {
            if (!killed.has(pid)) {
              try {
                process.kill(pid, "SIGKILL")
              } catch {
                // Gone meanwhile.
              }
            }
            killed.add(pid)
          }
          return left.length === 0
        })
        // A killed engine's spawner starts a post-mortem sandboxer, which clears its reader slots in the store under
        // the root: the root is removed once those spawners, and every process that names the root, have ended.
        yield* eventually(
          "the killed standbys' helpers are gone",
          () =>
            [...killed].every((pid) => helpersOf("kiln-spawner", pid).length === 0) &&
            processesNaming(`${root}/`).length === 0,
          "30 seconds"
        )
      }).pipe(Effect.orDie)
    )
    /** Waits for a standby to listen (its socket there, its process up): the next run is then handed to it. */
    const standbyWaits = eventually("a standby waits", () => {
      const dir = path.join(run, "kiln")
      const sockets = fs.existsSync(dir)
        ? fs.readdirSync(dir).filter((f) => f.startsWith("standby-") && f.endsWith(".sock"))
        : []
      return sockets.length === 1 && standbysOf(root).length === 1
    }, "30 seconds")
    let runs = 0
    // Into files, as a shell's redirection or a terminal: Node's own pipes to a child are sockets, which a standby
    // cannot open through /proc (the client then loads the engine itself).
    /** Runs `kiln` as `by` starts it (this workspace's client by default), or the program `by` names. */
    const kiln = (args: ReadonlyArray<string>, extra: NodeJS.ProcessEnv = {}, cwd = ws, by: Client | string = client) =>
      Effect.gen(function*() {
        const out = path.join(root, `out-${++runs}`)
        const err = path.join(root, `err-${runs}`)
        const fds = [fs.openSync(out, "w"), fs.openSync(err, "w")] as const
        const [file, argv] = by === "node" || by === "native" ? started(by, args) : [by, [...args]]
        const child = spawn(file, argv, {
          cwd,
          env: Object.fromEntries(Object.entries({ ...env, ...extra }).filter(([, v]) => v !== undefined)),
          stdio: ["ignore", fds[0], fds[1]]
        })
        fds.forEach((fd) => fs.closeSync(fd))
        yield* Effect.addFinalizer(() => Effect.sync(() => child.exitCode === null && child.kill("SIGKILL")))
        const exit = yield* exitOf(child)
        const result: CliResult = {
          code: exit.code,
          signal: exit.signal,
          stdout: fs.readFileSync(out, "utf8"),
          stderr: fs.readFileSync(err, "utf8")
        }
        return result
      })
    /** A run that exits 0, then the standby it started, once that waits: its pid. */
    const runThenStandby = (extra: NodeJS.ProcessEnv = {}) =>
      Effect.gen(function*() {
        const r = yield* kiln(["run"], extra)
        assert.strictEqual(r.code, 0, r.stderr)
        yield* standbyWaits
        return standbysOf(root)[0]!
      })
    return { root, ws, run, env, kiln, standbyWaits, runThenStandby, standbys: () => standbysOf(root), client }
  })
