/**
 * The standby engine end to end, through the built CLI (`src/programs/kiln/standby/`): a run that ran processes leaves
 * a kiln with the engine loaded, waiting in the user's runtime directory; the next `kiln run` hands itself to it, and
 * everything the user sees is that run's own: its output where the client's goes, its exit code, its files, its
 * environment and working directory, its signals. No-ops are answered and the standby waits on; a change after them
 * is seen. Each test's runs carry a marker in their environment, by which every standby they started is found and
 * ended at the test's end.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { spawn, spawnSync } from "node:child_process"
import * as fs from "node:fs"
import * as net from "node:net"
import * as path from "node:path"
import * as Proc from "../../src/os/Proc.js"
import { eventually, exitOf } from "../utils/child.js"
import type { CliResult } from "../utils/cliRun.js"
import { cli } from "../utils/stack.js"
import { isAlive, nativeCli, PATH, started, workspace } from "../utils/standbyWorkspace.js"
import { tempDir } from "../utils/temp.js"

const gen = {
  argv: ["/bin/sh", "-c", "mkdir -p out && cat src/* > out/gen.txt && grep -q fail src/a.txt && exit 3; true"],
  inputs: ["src/**"],
  outputs: ["out/gen.txt"],
  env: { PATH }
}

const summaryOf = (r: CliResult) => JSON.parse(r.stdout) as { ran: number; cacheHits: number; failed: number }

/** A run (with `--summary -`) that a standby took on and that ran `gen`, which wrote `text`. */
const tookOnAndRan = (r: CliResult, ws: string, text: string) => {
  assert.strictEqual(r.code, 0, r.stderr)
  assert.include(r.stderr, "kiln: standby: taken on")
  assert.strictEqual(summaryOf(r).ran, 1)
  assert.strictEqual(fs.readFileSync(path.join(ws, "out/gen.txt"), "utf8"), text)
}

for (const client of ["node", "native"] as const) {
  describe(`kiln run through a standby, asked by the ${client} client`, () => {
    it.scopedLive("a run that will run processes is handed to the standby the run before left; all it does is its own", () =>
      Effect.gen(function*() {
        const w = yield* workspace({ gen }, { "src/a.txt": "one\n" }, client)
        const first = yield* w.kiln(["run", "--progress", "plain"])
        assert.strictEqual(first.code, 0, first.stderr)
        assert.include(first.stderr, "kiln: standby: none waiting")
        yield* w.standbyWaits
        fs.writeFileSync(path.join(w.ws, "src/a.txt"), "two\n")
        const second = yield* w.kiln(["run", "--progress", "plain", "--summary", "-"])
        assert.strictEqual(second.code, 0, second.stderr)
        assert.include(second.stderr, "kiln: standby: taken on")
        assert.match(second.stderr, /^✓ gen \d/m, second.stderr)
        assert.strictEqual(summaryOf(second).ran, 1)
        assert.strictEqual(fs.readFileSync(path.join(w.ws, "out/gen.txt"), "utf8"), "two\n")
        // A failure is the run's too: its report on the client's stderr, and exit 1.
        yield* w.standbyWaits
        fs.writeFileSync(path.join(w.ws, "src/a.txt"), "fail\n")
        const failed = yield* w.kiln(["run", "--progress", "plain"])
        assert.strictEqual(failed.code, 1, failed.stderr)
        assert.include(failed.stderr, "kiln: standby: taken on")
        assert.match(failed.stderr, /^✗ gen/m)
      }))

    it.scopedLive("a no-op is answered and the standby waits on; a change made after it is seen", () =>
      Effect.gen(function*() {
        const w = yield* workspace({ gen }, { "src/a.txt": "one\n" }, client)
        const standby = yield* w.runThenStandby()
        // Three: the check of a no-op leaves what it found for an engine that never starts; the next check must not take it.
        for (let i = 0; i < 3; i++) {
          const noop = yield* w.kiln(["run", "--summary", "-"])
          assert.strictEqual(noop.code, 0, noop.stderr)
          assert.include(noop.stderr, "kiln: standby: taken on")
          assert.deepStrictEqual([summaryOf(noop).ran, summaryOf(noop).cacheHits], [0, 1])
          assert.deepStrictEqual(w.standbys(), [standby], "the standby that answered still waits")
        }
        // What the last check found is never taken for the next one's: the edit runs the process.
        fs.writeFileSync(path.join(w.ws, "src/a.txt"), "two\n")
        const edited = yield* w.kiln(["run", "--summary", "-"])
        assert.strictEqual(edited.code, 0, edited.stderr)
        assert.include(edited.stderr, "kiln: standby: taken on")
        assert.strictEqual(summaryOf(edited).ran, 1)
        assert.strictEqual(fs.readFileSync(path.join(w.ws, "out/gen.txt"), "utf8"), "two\n")
        yield* eventually("the standby that ran it has ended", () => !isAlive(standby))
      }))

    it.scopedLive("the client ends once the run's outcome is said; the engine still closes all it opened", () =>
      Effect.gen(function*() {
        const w = yield* workspace({ gen }, { "src/a.txt": "one\n" }, client)
        const standby = yield* w.runThenStandby()
        fs.writeFileSync(path.join(w.ws, "src/a.txt"), "fail\n")
        // A failure's code and report come whole, ahead of the store's closing.
        const failed = yield* w.kiln(["run", "--progress", "plain"])
        assert.strictEqual(failed.code, 1, failed.stderr)
        assert.include(failed.stderr, "kiln: standby: taken on")
        assert.match(failed.stderr, /^✗ gen/m)
        assert.match(failed.stderr, /^kiln: 1 process: 1 ran, 0 cached, 1 failed in /m)
        // The client gone, the engine finishes closing by itself: every environment it wrote synced and its marker
        // removed, no sandbox left, and a next standby that takes the next run.
        yield* eventually("the engine that ran it has ended", () => !isAlive(standby), "30 seconds")
        const store = w.env.KILN_STORE_DIR!
        assert.deepStrictEqual(fs.readdirSync(path.join(store, "unsynced")), [], "every environment it wrote synced")
        const sandboxes = w.env.KILN_SANDBOX_ROOT!
        assert.deepStrictEqual(
          fs.existsSync(sandboxes) ? fs.readdirSync(sandboxes).filter((n) => n.startsWith("kiln-sandbox-")) : [],
          []
        )
        yield* w.standbyWaits
        fs.writeFileSync(path.join(w.ws, "src/a.txt"), "two\n")
        tookOnAndRan(yield* w.kiln(["run", "--summary", "-"]), w.ws, "two\n")
      }))

    it.scopedLive("over its cap, the store's collection is still said to the client, and started", () =>
      Effect.gen(function*() {
        const w = yield* workspace({ gen }, { "src/a.txt": "one\n" }, client)
        yield* w.runThenStandby()
        const store = w.env.KILN_STORE_DIR!
        assert.strictEqual((yield* w.kiln(["store", "cap", "1"])).code, 0)
        fs.writeFileSync(path.join(w.ws, "src/a.txt"), "two\n")
        const over = yield* w.kiln(["run", "--summary", "-"], { KILN_STORE_GC: "background" })
        tookOnAndRan(over, w.ws, "two\n")
        assert.match(over.stderr, /kiln: the store holds about .*, over its cap of .*: collecting in the background/)
        // The collection measures the store, and starts its record again from that measure.
        yield* eventually(
          "the collection has measured the store",
          () => !fs.readFileSync(path.join(store, "usage"), "utf8").includes("added "),
          "30 seconds"
        )
      }))

    it.scopedLive("a no-op no standby took on leaves one too, which answers the next", () =>
      Effect.gen(function*() {
        const w = yield* workspace({ gen }, { "src/a.txt": "one\n" }, client)
        const first = yield* w.runThenStandby()
        process.kill(first, "SIGTERM")
        yield* eventually("it has ended", () => !isAlive(first))
        const here = yield* w.kiln(["run", "--summary", "-"])
        assert.strictEqual(here.code, 0, here.stderr)
        assert.include(here.stderr, "kiln: standby: none waiting")
        assert.deepStrictEqual([summaryOf(here).ran, summaryOf(here).cacheHits], [0, 1])
        yield* w.standbyWaits
        const next = yield* w.kiln(["run", "--summary", "-"])
        assert.strictEqual(next.code, 0, next.stderr)
        assert.include(next.stderr, "kiln: standby: taken on")
        assert.deepStrictEqual([summaryOf(next).ran, summaryOf(next).cacheHits], [0, 1])
      }))

    it.scopedLive("the run has the client's environment and working directory, not the standby's", () =>
      Effect.gen(function*() {
        const greet = {
          argv: ["/bin/sh", "-c", "mkdir -p out && printf '%s' \"$GREETING\" > out/greeting.txt"],
          inputs: ["src/**"],
          outputs: ["out/greeting.txt"],
          passEnv: ["GREETING"],
          env: { PATH }
        }
        const w = yield* workspace({ greet }, { "src/a.txt": "a\n" }, client)
        assert.strictEqual((yield* w.kiln(["run"], { GREETING: "one" })).code, 0)
        yield* w.standbyWaits
        // The standby was started by that run, with its environment: the next run's own must win.
        const second = yield* w.kiln(["run", "--summary", "s.json"], { GREETING: "two" }, path.join(w.ws, "src"))
        assert.strictEqual(second.code, 0, second.stderr)
        assert.include(second.stderr, "kiln: standby: taken on")
        assert.strictEqual(fs.readFileSync(path.join(w.ws, "out/greeting.txt"), "utf8"), "two")
        assert.isTrue(fs.existsSync(path.join(w.ws, "src/s.json")), "the summary is written where the client runs")
      }))

    it.scopedLive("a run under other resource limits is not handed to a standby started under others", () =>
      Effect.gen(function*() {
        const limit = {
          argv: ["/bin/sh", "-c", "mkdir -p out && cat src/* > out/gen.txt && ulimit -S -c > out/core.txt"],
          inputs: ["src/**"],
          outputs: ["out/gen.txt", "out/core.txt"],
          env: { PATH }
        }
        const w = yield* workspace({ gen: limit }, { "src/a.txt": "one\n" }, client)
        // A shell with another soft limit of core files: the standby its run leaves has that limit too, and a process
        // it ran would see it. The same holds of namespaces, groups, capabilities, cgroup, CPUs and nice
        // (`protocol.ts`, `contextOf`).
        const limited = path.join(w.root, "limited.sh")
        const program = client === "node" ? `"${process.execPath}" "${cli}"` : `"${nativeCli}"`
        fs.writeFileSync(limited, `#!/bin/sh\nulimit -S -c 7\nexec ${program} "$@"\n`, { mode: 0o755 })
        const first = yield* w.kiln(["run"], {}, w.ws, limited)
        assert.strictEqual(first.code, 0, first.stderr)
        assert.strictEqual(fs.readFileSync(path.join(w.ws, "out/core.txt"), "utf8"), "7\n")
        yield* w.standbyWaits
        fs.writeFileSync(path.join(w.ws, "src/a.txt"), "two\n")
        const second = yield* w.kiln(["run"])
        assert.strictEqual(second.code, 0, second.stderr)
        assert.include(second.stderr, "kiln: standby: none waiting")
        const own = spawnSync("/bin/sh", ["-c", "ulimit -S -c"], { encoding: "utf8" }).stdout
        assert.notStrictEqual(own, "7\n")
        assert.strictEqual(fs.readFileSync(path.join(w.ws, "out/core.txt"), "utf8"), own)
      }))

    it.scopedLive("a waiting standby has its run's spawner up; a run under another umask gets a spawner of its own", () =>
      Effect.gen(function*() {
        const mask = {
          argv: ["/bin/sh", "-c", "mkdir -p out && umask > out/umask.txt"],
          inputs: ["src/**"],
          outputs: ["out/umask.txt"],
          env: { PATH }
        }
        const w = yield* workspace({ mask }, { "src/a.txt": "a\n" }, client)
        const umaskRun = (umask: string) => {
          const [file, argv] = started(client, ["run"])
          return w.kiln(["-c", `umask ${umask} && exec "$@"`, "sh", file, ...argv], {}, w.ws, "/bin/sh")
        }
        assert.strictEqual((yield* umaskRun("022")).code, 0)
        yield* w.standbyWaits
        const standby = w.standbys()[0]!
        // Started while it waits, before any run asks for one.
        yield* eventually(
          "the waiting standby's spawner runs",
          () =>
            (Proc.pids() ?? []).some((pid) =>
              Proc.statOf(pid)?.ppid === standby && Proc.argvOf(pid)?.includes("kiln-spawner") === true
            )
        )
        fs.writeFileSync(path.join(w.ws, "src/a.txt"), "b\n")
        const other = yield* umaskRun("027")
        assert.strictEqual(other.code, 0, other.stderr)
        assert.include(other.stderr, "kiln: standby: taken on")
        assert.strictEqual(fs.readFileSync(path.join(w.ws, "out/umask.txt"), "utf8"), "0027\n")
      }))

    it.scopedLive("with the Node spawner, a waiting standby starts none: it would hold a Node process while it waits", () =>
      Effect.gen(function*() {
        const w = yield* workspace({ gen }, { "src/a.txt": "one\n" }, client)
        const node = { KILN_SPAWNER: path.resolve(".kiln-test/spawner.cjs") }
        assert.strictEqual((yield* w.kiln(["run"], node)).code, 0)
        yield* w.standbyWaits
        // Started before the standby listens, had it started one: none is there once it does.
        const standby = w.standbys()[0]!
        assert.isFalse((Proc.pids() ?? []).some((pid) => Proc.statOf(pid)?.ppid === standby))
        fs.writeFileSync(path.join(w.ws, "src/a.txt"), "two\n")
        tookOnAndRan(yield* w.kiln(["run", "--summary", "-"], node), w.ws, "two\n")
      }))

    // Each also to a client started with it ignored (a script's `&`, `nohup`): Node sets every signal back to its
    // default as it starts, so a kiln without a standby ends on it, and the native client passes it on too.
    for (
      const [signal, ignored] of [["SIGINT", false], ["SIGINT", true], ["SIGHUP", true], ["SIGKILL", false]] as const
    ) {
      const title = `${signal} to the client${ignored ? " started with it ignored" : ""} while a process runs`
      it.scopedLive(`${title}: the process ends, and the standby that ran it`, () =>
        Effect.gen(function*() {
          const marks = yield* tempDir("kiln-standby-marks-")
          const long = {
            argv: ["/bin/sh", "-c", `if grep -q long src/a.txt; then echo $$ > ${marks}/pid; sleep 300; fi`],
            inputs: ["src/**"],
            cache: "never"
          }
          const w = yield* workspace({ long }, { "src/a.txt": "short\n" }, client)
          // The process notes its pid in a file of the host, which the strict view hides.
          const env = { ...w.env, KILN_STRICT_VIEW: "0" }
          const standby = yield* w.runThenStandby({ KILN_STRICT_VIEW: "0" })
          fs.writeFileSync(path.join(w.ws, "src/a.txt"), "long\n")
          const [program, args] = started(w.client, ["run", "--progress", "none"])
          const trap = signal === "SIGINT" ? "INT" : "HUP"
          const [file, argv] = ignored
            ? ["/bin/sh", ["-c", `trap '' ${trap}; exec "$0" "$@"`, program, ...args]]
            : [program, args]
          const child = spawn(file, argv, { cwd: w.ws, env, stdio: "ignore" })
          yield* Effect.addFinalizer(() => Effect.sync(() => child.exitCode === null && child.kill("SIGKILL")))
          const pidFile = path.join(marks, "pid")
          yield* eventually(
            "the process started",
            () => fs.existsSync(pidFile) && /^\d+\n$/.test(fs.readFileSync(pidFile, "utf8")),
            "30 seconds"
          )
          const pid = Number(fs.readFileSync(pidFile, "utf8"))
          child.kill(signal)
          const exit = yield* exitOf(child)
          // As a run without a standby ends: Ctrl-C's code, and a hang-up's death (which the client says as 128 + 1).
          if (signal === "SIGINT") assert.strictEqual(exit.code, 130)
          if (signal === "SIGHUP") assert.strictEqual(exit.code, 129)
          yield* eventually("the process has ended", () => !isAlive(pid), "30 seconds")
          yield* eventually("the standby that ran it has ended", () => !isAlive(standby), "30 seconds")
        }))
    }

    it.scopedLive("a socket left by a standby that died is passed over, and replaced", () =>
      Effect.gen(function*() {
        const w = yield* workspace({ gen }, { "src/a.txt": "one\n" }, client)
        const dead = yield* w.runThenStandby()
        process.kill(dead, "SIGKILL")
        yield* eventually("it is gone", () => !isAlive(dead))
        fs.writeFileSync(path.join(w.ws, "src/a.txt"), "two\n")
        const r = yield* w.kiln(["run", "--progress", "plain"])
        assert.strictEqual(r.code, 0, r.stderr)
        assert.match(r.stderr, /kiln: standby: cannot reach it: connect ECONNREFUSED/)
        assert.strictEqual(fs.readFileSync(path.join(w.ws, "out/gen.txt"), "utf8"), "two\n")
        yield* w.standbyWaits
      }))

    it.scopedLive("a socket that answers as no standby does is not waited on: a frame too large, a reason without end", () =>
      Effect.gen(function*() {
        const w = yield* workspace({ gen }, { "src/a.txt": "one\n" }, client)
        const dead = yield* w.runThenStandby()
        const dir = path.join(w.run, "kiln")
        const socket = path.join(dir, fs.readdirSync(dir).find((f) => f.endsWith(".sock"))!)
        process.kill(dead, "SIGKILL")
        yield* eventually("it is gone", () => !isAlive(dead))
        fs.rmSync(socket)
        // In its place, a server that takes the run on and then announces 4 GiB of output, or declines without end;
        // either way it keeps the connection open.
        const answers = [
          Buffer.from([0x41, 0x4f, 0xff, 0xff, 0xff, 0xff, 0x78]),
          Buffer.concat([Buffer.from([0x44]), Buffer.alloc(8192, 0x78)])
        ]
        let served = 0
        const server = net.createServer((conn) => {
          conn.on("error", () => undefined)
          // The native client, having fallen back, is Node's, which asks again: it gets the same answer.
          conn.once("data", () => conn.write(answers[Math.min(served++, answers.length - 1)]!))
        })
        yield* Effect.acquireRelease(
          Effect.async<void>((resume) => void server.listen(socket, () => resume(Effect.void))),
          () => Effect.sync(() => server.close())
        )
        const taken = yield* w.kiln(["run"])
        assert.strictEqual(taken.code, 1, taken.stderr)
        assert.include(taken.stderr, "kiln: the standby engine that took this run on sent a frame of 4294967295 bytes")
        // A reason past any a standby gives: the run is its own, done here.
        fs.writeFileSync(path.join(w.ws, "src/a.txt"), "two\n")
        const declined = yield* w.kiln(["run"])
        assert.strictEqual(declined.code, 0, declined.stderr)
        assert.include(declined.stderr, "kiln: standby: an answer it does not know")
        assert.strictEqual(fs.readFileSync(path.join(w.ws, "out/gen.txt"), "utf8"), "two\n")
        yield* w.standbyWaits
      }))

    it.scopedLive("none is started with KILN_STANDBY=off, on CI, or outside a session (no XDG_RUNTIME_DIR)", () =>
      Effect.gen(function*() {
        const w = yield* workspace({ gen }, { "src/a.txt": "0\n" }, client)
        const cases: ReadonlyArray<NodeJS.ProcessEnv> = [
          { KILN_STANDBY: "off" },
          { CI: "true" },
          { XDG_RUNTIME_DIR: undefined }
        ]
        for (const [i, extra] of cases.entries()) {
          fs.writeFileSync(path.join(w.ws, "src/a.txt"), `${i + 1}\n`)
          const r = yield* w.kiln(["run"], extra)
          assert.strictEqual(r.code, 0, r.stderr)
          assert.notInclude(r.stderr, "kiln: standby:", JSON.stringify(extra))
          // A standby is started as the run exits: it would be there by now.
          assert.deepStrictEqual(w.standbys(), [], JSON.stringify(extra))
        }
      }))
  })
}

/**
 * What the runtime directory holds but the machine's sandbox probe answers, which runs keep there on purpose
 * (`sandboxNotice.strictProbe`): a standby's socket and lock must not be left.
 */
const socketsAndLocksIn = (run: string) => fs.readdirSync(path.join(run, "kiln")).filter((f) => f !== "probes.json")
describe("a standby", () => {
  it.scopedLive.skipIf(process.geteuid?.() !== 0)(
    "where no runtime directory every run finds is usable, runs start none and leave no directory (as root)",
    () =>
      Effect.gen(function*() {
        const w = yield* workspace({ gen }, { "src/a.txt": "one\n" }, "node")
        // $XDG_RUNTIME_DIR that others can write, a cache directory another user owns, and /tmp/kiln-<uid> taken by
        // another user: seen so only in a mount namespace of the runs' own, nothing outside the test's root changed.
        const uid = process.geteuid!()
        const open = path.join(w.root, "open-run")
        const theirs = path.join(w.root, "theirs")
        for (const dir of [open, theirs, path.join(w.root, "their-cache")]) fs.mkdirSync(dir)
        fs.chmodSync(open, 0o777)
        fs.chownSync(theirs, 65534, 65534)
        fs.chmodSync(theirs, 0o700)
        fs.chownSync(path.join(w.root, "their-cache"), 65534, 65534)
        fs.mkdirSync(`/tmp/kiln-${uid}`, { recursive: true, mode: 0o700 })
        const fresh = () => fs.readdirSync("/tmp").filter((n) => n.startsWith(`kiln-${uid}-`))
        const before = new Set(fresh())
        const script = path.join(w.root, "unusable.sh")
        fs.writeFileSync(
          script,
          `#!/bin/sh\nmount --bind ${theirs} /tmp/kiln-${uid} || exit 99\nexec "${process.execPath}" "${cli}" "$@"\n`,
          { mode: 0o755 }
        )
        for (const text of ["one\n", "two\n"]) {
          fs.writeFileSync(path.join(w.ws, "src/a.txt"), text)
          const r = yield* w.kiln(
            ["unshare", "-m", "--propagation", "private", script, "run"],
            {
              XDG_RUNTIME_DIR: open,
              XDG_CACHE_HOME: path.join(w.root, "their-cache"),
              KILN_RUNTIME_DIR: undefined
            },
            w.ws,
            "/usr/bin/env"
          )
          assert.strictEqual(r.code, 0, r.stderr)
          assert.strictEqual(fs.readFileSync(path.join(w.ws, "out/gen.txt"), "utf8"), text)
        }
        const left = fresh().filter((n) => !before.has(n))
        // Nothing of this test's is left in /tmp, whatever the outcome.
        for (const n of left) fs.rmSync(path.join("/tmp", n), { recursive: true, force: true })
        assert.deepStrictEqual(left, [], "directories of runs' own left in /tmp")
        assert.deepStrictEqual(w.standbys(), [], "standbys that no run will ever find")
      })
  )

  it.scopedLive("a standby rehearses the run that started it and keeps nothing of it, nor of its warm-up", () =>
    Effect.gen(function*() {
      const w = yield* workspace({ gen }, { "src/a.txt": "one\n" })
      // What is made in kiln's runtime directory (made first, as kiln makes it) from now on: the standby's warm-up.
      const runtime = path.join(w.run, "kiln")
      fs.mkdirSync(runtime, { mode: 0o700 })
      const made = new Set<string>()
      const watch = yield* Effect.acquireRelease(
        Effect.sync(() => fs.watch(runtime, (_, name) => name !== null && made.add(name))),
        (watcher) => Effect.sync(() => watcher.close())
      )
      const first = yield* w.kiln(["run", "--summary", "s.json"])
      assert.strictEqual(first.code, 0, first.stderr)
      fs.rmSync(path.join(w.ws, "s.json"))
      yield* w.standbyWaits
      yield* eventually("the standby's warm-up is seen", () => [...made].some((n) => n.startsWith("warm-up-")))
      watch.close()
      const [standby] = w.standbys()
      // Its rehearsal checked that run (`--summary s.json` included) and wrote nothing.
      assert.isFalse(fs.existsSync(path.join(w.ws, "s.json")), "the rehearsal wrote the summary")
      assert.strictEqual(fs.readlinkSync(`/proc/${standby}/cwd`), "/")
      const held = fs.readdirSync(`/proc/${standby}/fd`).flatMap((fd) => {
        try {
          return [fs.readlinkSync(`/proc/${standby}/fd/${fd}`)]
        } catch {
          return []
        }
      })
      assert.deepStrictEqual(held.filter((target) => target.startsWith(w.ws)), [])
      // Its warm-up (a restore on a throwaway store in its runtime directory) is gone, and nothing of it is held.
      assert.deepStrictEqual(fs.readdirSync(runtime).filter((name) => name.startsWith("warm-up-")), [])
      assert.deepStrictEqual(held.filter((target) => target.startsWith(`${runtime}/warm-up-`)), [])
      // The rehearsal's check found the config as the run left it, and dropped it: a config changed since is the one
      // that runs.
      const changed = { ...gen, argv: ["/bin/sh", "-c", "mkdir -p out && echo changed > out/gen.txt"] }
      fs.writeFileSync(path.join(w.ws, "kiln.json"), JSON.stringify({ processes: { gen: changed } }))
      tookOnAndRan(yield* w.kiln(["run", "--summary", "-"]), w.ws, "changed\n")
    }))

  it.scopedLive("a waiting standby's environment holds none of its starting run's secrets, only kiln's settings", () =>
    Effect.gen(function*() {
      const w = yield* workspace({ gen }, { "src/a.txt": "one\n" })
      const secrets = { CLOUD_TOKEN: "t0ken", KILN_REMOTE_CACHE_HEADERS: "authorization: x" }
      const holdsNoSecret = (pid: number) => {
        const environ = (Proc.environOf(pid) ?? []).join("\n")
        assert.notInclude(environ, "t0ken")
        assert.notInclude(environ, "KILN_REMOTE_CACHE_HEADERS")
        assert.include(environ, `KILN_STORE_DIR=${path.join(w.root, "store")}`)
        assert.include(environ, `XDG_RUNTIME_DIR=${w.run}`)
      }
      const first = yield* w.runThenStandby(secrets)
      holdsNoSecret(first)
      // Started by a standby that took a run on (whose environment is then the request's).
      fs.writeFileSync(path.join(w.ws, "src/a.txt"), "two\n")
      tookOnAndRan(yield* w.kiln(["run", "--summary", "-"], secrets), w.ws, "two\n")
      yield* eventually("the next standby waits", () => w.standbys().length === 1 && w.standbys()[0] !== first)
      yield* w.standbyWaits
      holdsNoSecret(w.standbys()[0]!)
      // What it serves has the run's own: the secret reaches a process that passes it.
      const passes = { ...gen, argv: ["/bin/sh", "-c", "mkdir -p out && printf %s \"$CLOUD_TOKEN\" > out/gen.txt"] }
      fs.writeFileSync(
        path.join(w.ws, "kiln.json"),
        JSON.stringify({ processes: { gen: { ...passes, passEnv: ["CLOUD_TOKEN"] } } })
      )
      tookOnAndRan(yield* w.kiln(["run", "--summary", "-"], secrets), w.ws, "t0ken")
    }))

  it.scopedLive("a run with an option only the full CLI reads leaves a standby too, which takes the next", () =>
    Effect.gen(function*() {
      const w = yield* workspace({ gen }, { "src/a.txt": "one\n" })
      const args = ["run", "--remote-timeout", "30s", "--summary", "-"]
      const first = yield* w.kiln(args, { KILN_NOOP_DEBUG: "1" })
      assert.strictEqual(first.code, 0, first.stderr)
      assert.include(first.stderr, "kiln: no-op check: option --remote-timeout")
      yield* w.standbyWaits
      fs.writeFileSync(path.join(w.ws, "src/a.txt"), "two\n")
      tookOnAndRan(yield* w.kiln(args), w.ws, "two\n")
    }))

  it.scopedLive("a request that is not one (not JSON, bad fields, too long) is declined, and the standby serves on", () =>
    Effect.gen(function*() {
      const w = yield* workspace({ gen }, { "src/a.txt": "one\n" })
      const standby = yield* w.runThenStandby()
      const socket = path.join(
        w.run,
        "kiln",
        fs.readdirSync(path.join(w.run, "kiln")).find((f) => f.endsWith(".sock"))!
      )
      const ask = (bytes: Buffer) =>
        Effect.async<string>((resume) => {
          const conn = net.createConnection(socket)
          let answer = ""
          conn.on("connect", () => conn.write(bytes))
          conn.on("data", (d) => (answer += d.toString("latin1")))
          conn.on("close", () => resume(Effect.succeed(answer)))
          conn.on("error", () => undefined)
        })
      const valid = {
        v: 1,
        argv: ["run"],
        cwd: w.ws,
        env: {},
        umask: 0o22,
        stdout: { tty: false },
        stderr: { tty: false }
      }
      const refusals: ReadonlyArray<[string, Buffer]> = [
        ["the request is not JSON", Buffer.from("{nope\n")],
        ["the request is of another version", Buffer.from(`${JSON.stringify({ ...valid, v: 2 })}\n`)],
        ["the request's cwd is invalid", Buffer.from(`${JSON.stringify({ ...valid, cwd: "ws" })}\n`)],
        ["the request's env is invalid", Buffer.from(`${JSON.stringify({ ...valid, env: { "A=B": "c" } })}\n`)],
        ["the request's outputs are invalid", Buffer.from(`${JSON.stringify({ ...valid, stdout: { tty: "yes" } })}\n`)],
        ["the request is too long", Buffer.alloc(5 * 1024 * 1024, 0x20)]
      ]
      for (const [why, bytes] of refusals) assert.strictEqual(yield* ask(bytes), `D${why}\n`)
      assert.deepStrictEqual(w.standbys(), [standby], "it still waits")
      fs.writeFileSync(path.join(w.ws, "src/a.txt"), "two\n")
      const r = yield* w.kiln(["run", "--progress", "plain"])
      assert.strictEqual(r.code, 0, r.stderr)
      assert.include(r.stderr, "kiln: standby: taken on")
      assert.strictEqual(fs.readFileSync(path.join(w.ws, "out/gen.txt"), "utf8"), "two\n")
    }))

  it.scopedLive("a standby stopped while it waits (SIGTERM, a logout's SIGHUP) leaves neither socket nor lock", () =>
    Effect.gen(function*() {
      const w = yield* workspace({ gen }, { "src/a.txt": "one\n" })
      for (const [i, signal] of (["SIGTERM", "SIGHUP"] as const).entries()) {
        fs.writeFileSync(path.join(w.ws, "src/a.txt"), `${i}\n`)
        const standby = yield* w.runThenStandby()
        process.kill(standby, signal)
        yield* eventually("it has ended", () => !isAlive(standby))
        assert.deepStrictEqual(socketsAndLocksIn(w.run), [], signal)
      }
    }))

  it.scopedLive("a standby idle for its time ends by itself, leaving neither socket nor lock", () =>
    Effect.gen(function*() {
      const w = yield* workspace({ gen }, { "src/a.txt": "one\n" })
      const standby = yield* w.runThenStandby({ KILN_STANDBY_IDLE_MS: "3000" })
      yield* eventually("it has ended", () => !isAlive(standby), "30 seconds")
      assert.deepStrictEqual(socketsAndLocksIn(w.run), [])
      // The next run finds none, loads the engine itself and leaves a new standby.
      fs.writeFileSync(path.join(w.ws, "src/a.txt"), "two\n")
      const r = yield* w.kiln(["run"])
      assert.strictEqual(r.code, 0, r.stderr)
      assert.include(r.stderr, "kiln: standby: none waiting")
      yield* w.standbyWaits
    }))
})

describe("the native kiln command (dist/kiln)", () => {
  it.scopedLive("is the build's native program; what is not a run it leaves to Node, as it does without one", () =>
    Effect.gen(function*() {
      assert.strictEqual(fs.readFileSync(nativeCli).subarray(0, 4).toString("latin1"), "\x7fELF", "built without cc")
      const w = yield* workspace({ gen }, { "src/a.txt": "one\n" }, "native")
      const [viaNative, viaNode] = [yield* w.kiln(["--version"]), yield* w.kiln(["--version"], {}, w.ws, "node")]
      assert.strictEqual(viaNative.code, 0, viaNative.stderr)
      assert.strictEqual(viaNative.stdout, viaNode.stdout)
      const noNode = yield* w.kiln(["run"], { PATH: "/nonexistent" })
      assert.strictEqual(noNode.code, 127)
      assert.strictEqual(noNode.stderr, "kiln: node is not on PATH (kiln runs on Node 20 or later)\n")
      // A copy out of dist/ has no kiln beside it to run: it says so, rather than Node's "Cannot find module".
      const copy = path.join(w.root, "kiln")
      fs.copyFileSync(nativeCli, copy)
      fs.chmodSync(copy, 0o755)
      const copied = yield* w.kiln(["--version"], {}, w.ws, copy)
      assert.strictEqual(copied.code, 127)
      assert.strictEqual(
        copied.stderr,
        `kiln: ${path.join(w.root, "cli.cjs")} is missing: run kiln from its dist/ (or a symlink to it), not a copy\n`
      )
    }))

  it.scopedLive("a run taken on from it has what Node's loader would have set: its sandboxer starts", () =>
    Effect.gen(function*() {
      // A 17 MiB input: past what the engine writes itself, so the sandboxer (`kiln sandboxer`, run by KILN_CLI) does.
      const big = {
        argv: ["/bin/sh", "-c", "mkdir -p out && wc -c < big.bin > out/size.txt && cat src/* >> out/size.txt"],
        inputs: ["big.bin", "src/**"],
        outputs: ["out/size.txt"],
        env: { PATH }
      }
      const w = yield* workspace({ big }, { "src/a.txt": "one\n" }, "native")
      fs.writeFileSync(path.join(w.ws, "big.bin"), Buffer.alloc(17 * 1024 * 1024, 1))
      yield* w.runThenStandby()
      fs.writeFileSync(path.join(w.ws, "src/a.txt"), "two\n")
      // Another kiln's, inherited (a kiln run inside a process of another kiln): the standby runs its own.
      const r = yield* w.kiln(["run"], { KILN_CLI: "/elsewhere/cli.cjs" })
      assert.strictEqual(r.code, 0, r.stderr)
      assert.include(r.stderr, "kiln: standby: taken on")
      assert.strictEqual(fs.readFileSync(path.join(w.ws, "out/size.txt"), "utf8"), `${17 * 1024 * 1024}\ntwo\n`)
    }))

  it.scopedLive("started with stdout and stderr closed, it holds /dev/null there, never its socket", () =>
    Effect.gen(function*() {
      const marks = yield* tempDir("kiln-standby-marks-")
      // The process says it started, then waits until the test has looked at the client's descriptors.
      const wait = {
        argv: [
          "/bin/sh",
          "-c",
          `if grep -q wait src/a.txt; then touch ${marks}/started; until [ -e ${marks}/go ]; do sleep 0.05; done; fi`
        ],
        inputs: ["src/**"],
        cache: "never"
      }
      const w = yield* workspace({ wait }, { "src/a.txt": "now\n" }, "native")
      yield* w.runThenStandby({ KILN_STRICT_VIEW: "0" })
      fs.writeFileSync(path.join(w.ws, "src/a.txt"), "wait\n")
      const child = spawn("/bin/sh", ["-c", `exec ${nativeCli} run --progress plain >&- 2>&-`], {
        cwd: w.ws,
        env: { ...w.env, KILN_STRICT_VIEW: "0" },
        stdio: "ignore"
      })
      yield* Effect.addFinalizer(() => Effect.sync(() => child.exitCode === null && child.kill("SIGKILL")))
      yield* eventually("the process started", () => fs.existsSync(path.join(marks, "started")), "30 seconds")
      // Were the socket there, the run's output frames would come back to the standby, their bytes read as signals.
      for (const fd of [1, 2]) assert.strictEqual(fs.readlinkSync(`/proc/${child.pid}/fd/${fd}`), "/dev/null")
      fs.writeFileSync(path.join(marks, "go"), "")
      assert.strictEqual((yield* exitOf(child)).code, 0)
    }))

  it.scopedLive("an environment that is not UTF-8 is not sent: Node's client, which decodes it, asks instead", () =>
    Effect.gen(function*() {
      const w = yield* workspace({ gen }, { "src/a.txt": "one\n" }, "native")
      yield* w.runThenStandby()
      fs.writeFileSync(path.join(w.ws, "src/a.txt"), "two\n")
      // A byte no UTF-8 text holds, put in the environment by a shell: Node's spawn can only pass UTF-8.
      const r = yield* w.kiln(["-c", `KILN_TEST_BYTES=$(printf '\\377') exec ${nativeCli} run`], {}, w.ws, "/bin/sh")
      assert.strictEqual(r.code, 0, r.stderr)
      assert.include(r.stderr, "kiln: standby: text that is not UTF-8")
      assert.include(r.stderr, "kiln: standby: taken on")
      assert.strictEqual(fs.readFileSync(path.join(w.ws, "out/gen.txt"), "utf8"), "two\n")
    }))
})
