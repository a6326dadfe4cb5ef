/**
 * What a process leaves behind ends with it, even what left its process group: a daemon started with `setsid`, one
 * that double-forks (`setsid -f`), a background job of a shell with job control (`set -m`, `disown`). The native
 * spawner starts each process under a reaper of its own (a child subreaper: native/reaper.c) that kills every
 * descendant left once the process has exited; the process's exit status is reported as before. Asserted through the
 * real CLI after the process exits, after its timeout, after Ctrl-C (SIGINT) to kiln, and after kiln is SIGKILLed
 * (the spawner is the watchdog), and through the spawner alone with several processes at once: one process's end
 * never kills another's daemon.
 *
 * The Node spawner (a build without a C compiler) cannot make itself a subreaper (no prctl in Node): there, what
 * leaves the group survives, as documented in docs/architecture.md.
 */
import { assert, describe, it } from "@effect/vitest"
import { Deferred, Effect, Exit, Scope } from "effect"
import { type ChildProcess, spawn } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"
import * as ProcessGroup from "../../src/layers/runner/internal/processGroup.js"
import * as Spawner from "../../src/layers/spawner/Spawner.js"
import { eventually, exitOf, processesNaming } from "../utils/child.js"
import { cli } from "../utils/stack.js"
import { tempDir } from "../utils/temp.js"

/**
 * A temp root with a copy of `sleep` in it, whose path in /proc/<pid>/cmdline marks the processes of this test (and
 * no one else's); whatever still runs it, or names the root, is SIGKILLed when the scope closes.
 */
const markedRoot = Effect.gen(function*() {
  const root = yield* tempDir("kiln-descendants-")
  const sleep = path.join(root, "marker-sleep")
  fs.copyFileSync("/bin/sleep", sleep)
  fs.chmodSync(sleep, 0o755)
  const survivors = () => processesNaming(sleep)
  // Whatever names the root: the marked processes and the engine's helpers (its sandboxer is given the store there).
  const strays = () => processesNaming(`${root}/`)
  yield* Effect.addFinalizer(() =>
    Effect.sync(() => {
      for (const pid of strays()) {
        try {
          process.kill(pid, "SIGKILL")
        } catch {
          // Gone meanwhile.
        }
      }
    })
  )
  const flags = path.join(root, "flags")
  fs.mkdirSync(flags)
  return { root, sleep, flags, survivors, strays }
})

type Marked = Effect.Effect.Success<typeof markedRoot>

/**
 * A shell script that starts three daemons that leave its process group, waits until each has started (each says so
 * in `flags/<tag>-<name>`), then runs `tail`.
 */
const daemons = (m: Marked, tag: string, tail: string) => {
  const flag = (name: string) => path.join(m.flags, `${tag}-${name}`)
  return [
    `setsid sh -c 'echo > ${flag("setsid")}; exec ${m.sleep} 600' >/dev/null 2>&1 </dev/null &`,
    `setsid -f sh -c 'cd /; echo > ${flag("fork")}; exec ${m.sleep} 601' >/dev/null 2>&1 </dev/null`,
    `bash -c 'set -m; ${m.sleep} 602 >/dev/null 2>&1 </dev/null & disown; echo > ${flag("job")}'`,
    `until [ -e ${flag("setsid")} ] && [ -e ${flag("fork")} ] && [ -e ${flag("job")} ]; do sleep 0.01; done`,
    tail
  ].join("\n")
}

/** `kiln run` of `processes` in a workspace under the root, started (not awaited); killed at the scope's end. */
const startRun = (m: Marked, processes: Record<string, unknown>) =>
  Effect.gen(function*() {
    const ws = path.join(m.root, "ws")
    fs.mkdirSync(ws, { recursive: true })
    fs.mkdirSync(path.join(m.root, "sandboxes"), { recursive: true })
    fs.writeFileSync(path.join(ws, "a.txt"), "a\n")
    fs.writeFileSync(path.join(ws, "kiln.json"), JSON.stringify({ processes }))
    const child = yield* Effect.acquireRelease(
      Effect.sync(() =>
        spawn(process.execPath, [cli, "run", "--progress", "plain"], {
          cwd: ws,
          stdio: ["ignore", "ignore", "pipe"],
          env: {
            ...process.env,
            HOME: m.root,
            KILN_STORE_DIR: path.join(m.root, "store"),
            KILN_SANDBOX_ROOT: path.join(m.root, "sandboxes"),
            KILN_NAMED_CACHES_DIR: path.join(m.root, "named"),
            // The reaper as it works without the strict view (whose PID namespace ends them too: StrictView.test.ts):
            // the daemons run a tool and write flags outside the sandbox, which the view hides.
            KILN_STRICT_VIEW: "0"
          }
        })
      ),
      (child) => Effect.sync(() => child.exitCode === null && child.signalCode === null && child.kill("SIGKILL"))
    )
    let stderr = ""
    child.stderr!.on("data", (d) => (stderr += d))
    return { child, stderr: () => stderr }
  })

const ended = (run: { readonly child: ChildProcess }) => exitOf(run.child)

const process_ = (argv: ReadonlyArray<string>, extra: Record<string, unknown> = {}) => ({
  argv,
  inputs: ["a.txt"],
  cache: "never",
  ...extra
})

describe("descendants that leave the process group (native spawner)", () => {
  it.scopedLive("end when their process exits", () =>
    Effect.gen(function*() {
      const m = yield* markedRoot
      const run = yield* startRun(m, {
        p: process_(["/bin/sh", "-c", daemons(m, "p", "echo done > o.txt")], { outputs: ["o.txt"] })
      })
      const exit = yield* ended(run)
      assert.strictEqual(exit.code, 0, run.stderr())
      yield* eventually("no daemon survives its process", () => m.survivors().length === 0)
    }))

  it.scopedLive("end when their process times out, and the timeout is reported", () =>
    Effect.gen(function*() {
      const m = yield* markedRoot
      const run = yield* startRun(m, {
        t: process_(["/bin/sh", "-c", daemons(m, "t", `exec ${m.sleep} 603`)], { timeout: "1s" })
      })
      const exit = yield* ended(run)
      assert.strictEqual(exit.code, 1, run.stderr())
      assert.include(run.stderr(), "t timed out after 1s")
      yield* eventually("no daemon survives the timeout", () => m.survivors().length === 0)
    }))

  for (const signal of ["SIGINT", "SIGKILL"] as const) {
    it.scopedLive(`end when kiln gets ${signal} while their process runs`, () =>
      Effect.gen(function*() {
        const m = yield* markedRoot
        const up = path.join(m.flags, "up")
        const run = yield* startRun(m, {
          i: process_(["/bin/sh", "-c", daemons(m, "i", `echo > ${up}; exec ${m.sleep} 604`)])
        })
        yield* eventually("the process and its daemons run", () => fs.existsSync(up), "30 seconds")
        assert.strictEqual(m.survivors().length, 4)
        run.child.kill(signal)
        const exit = yield* ended(run)
        if (signal === "SIGINT") assert.strictEqual(exit.code, 130, run.stderr())
        yield* eventually("nothing survives the run", () => m.survivors().length === 0)
        // Its sandboxer too, which clears the killed engine's reader slots on its way out: once it has gone, nothing
        // writes under the root when the scope removes it.
        yield* eventually("the sandboxer ends with its engine", () => m.strays().length === 0)
      }))
  }

  it.scopedLive("each process's daemons end with it, not with another process that ends first", () =>
    Effect.gen(function*() {
      const m = yield* markedRoot
      const spawner = yield* Spawner.make()
      const start = (tag: string, tail: string) =>
        Effect.gen(function*() {
          const scope = yield* Scope.make()
          const group = yield* Scope.extend(
            ProcessGroup.spawnGroup(spawner, {
              argv: ["/bin/sh", "-c", daemons(m, tag, tail)],
              cwd: m.root,
              env: { PATH: process.env.PATH ?? "/usr/bin:/bin" },
              stdout: path.join(m.root, `${tag}.out`),
              stderr: path.join(m.root, `${tag}.err`)
            }, "1 second"),
            scope
          )
          return { group, scope }
        })
      const running = path.join(m.flags, "long-running")
      const long = yield* start("long", `echo > ${running}; exec ${m.sleep} 605`)
      yield* eventually("the long process and its daemons run", () => fs.existsSync(running), "30 seconds")
      const short = yield* start("short", "exit 7")
      assert.deepStrictEqual(yield* Deferred.await(short.group.exited), { code: 7, signal: null, alone: true })
      yield* Scope.close(short.scope, Exit.void)
      // The short one's three are gone; the long one and its three still run.
      yield* eventually("the short process's daemons are gone", () => m.survivors().length === 4)
      assert.isFalse(yield* Deferred.isDone(long.group.exited))
      // Ended as a timeout or an interruption ends it: its group is signalled, its reaper ends the rest.
      yield* Scope.close(long.scope, Exit.void)
      const exit = yield* Deferred.await(long.group.exited)
      assert.strictEqual(exit.signal, "SIGTERM")
      assert.isTrue(exit.alone)
      yield* eventually("nothing survives", () => m.survivors().length === 0)
    }))
})
