/**
 * The spawner program on its own, native and Node alike: it starts what it is asked to, its output going to the files named; once its parent
 * is not the engine it was started for (that engine died, even before the spawner got going), it starts nothing: a
 * request the engine wrote just before dying must leave no output files beside a removed sandbox. When its engine
 * goes away, the processes it started that still run die with it, even one that left its sandbox directory (out
 * of the sandboxer's sight).
 */
import { assert, describe, it } from "@effect/vitest"
import { Deferred, Effect, Exit, Fiber, Scope } from "effect"
import { spawnSync } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"
import { SpawnError } from "../../src/domain/Process.js"
import * as Protocol from "../../src/layers/spawner/Protocol.js"
import * as Spawner from "../../src/layers/spawner/Spawner.js"
import { nativeName, PROGRAM_ENV } from "../../src/layers/spawner/Warm.js"
import * as MountNamespace from "../../src/os/mounts/MountNamespace.js"
import { eventually, groupAlive, helpersOf } from "../utils/child.js"
import { type Program, programs, withProgram } from "../utils/spawners.js"
import { cli } from "../utils/stack.js"
import { tempDir } from "../utils/temp.js"

/** The two spawner programs the tests' global setup built: kiln's build makes both, and runs the first it has. */

/** Pipes requests into a spawner started by `sh`, whose engine is `engine` (`$$`: the shell). */
const pipeInto = (p: Program, engine: string, requests: ReadonlyArray<Protocol.Request>) =>
  spawnSync(
    "/bin/sh",
    ["-c", `printf '%s' "$REQUEST" | ${p.node ? `"$NODE" ` : ""}"$SPAWNER" kiln-spawner ${engine}`],
    {
      env: { REQUEST: requests.map(Protocol.encode).join(""), NODE: process.execPath, SPAWNER: p.program },
      encoding: "utf8",
      timeout: 30_000
    }
  )

/** The spawner's replies, in order; a line that is not one fails the test. */
const repliesOf = (stdout: string): Array<Protocol.Reply> =>
  stdout.split("\n").filter((line) => line !== "").map((line) => {
    const reply = Protocol.decodeReply(line)
    if (reply.kind === "malformed") throw new Error(reply.reason)
    return reply
  })

/** One spawn request. */
const runSpawner = (p: Program, dir: string, engine: string, argv: ReadonlyArray<string> = ["/bin/true"]) =>
  pipeInto(p, engine, [{
    kind: "spawn",
    id: 7,
    argv,
    cwd: dir,
    env: {},
    stdout: path.join(dir, "out.log"),
    stderr: path.join(dir, "err.log")
  }])

describe.each(programs)("the spawner ($name)", (p) => {
  it.scoped("started by its engine, it opens the output files and starts the process", () =>
    Effect.gen(function*() {
      const dir = yield* tempDir()
      const r = runSpawner(p, dir, "$$")
      assert.strictEqual(r.status, 0, r.stderr)
      // Its stdin ends right after the request, which is its engine going away: it exits without waiting for the
      // child, whose exit it then never reports.
      const [reply] = repliesOf(r.stdout)
      assert.deepInclude(reply, { kind: "started", id: 7 })
      assert.includeMembers(fs.readdirSync(dir), ["err.log", "out.log"])
    }))

  it.scoped("a malformed request is answered, by its line, and nothing else: the requests after it are answered too", () =>
    Effect.gen(function*() {
      const dir = yield* tempDir()
      const valid = Protocol.encode({
        kind: "spawn",
        id: 5,
        argv: ["/bin/true"],
        cwd: dir,
        env: { A: "\u00e9\ud83d\ude00" },
        stdout: path.join(dir, "out"),
        stderr: path.join(dir, "err")
      }).trimEnd()
      const bad = [
        "not json",
        "[]",
        "{}",
        `{"kind":"spawn"}`,
        `{"kind":"launch","id":1}`,
        `{"kind":"spawn","id":-1,"argv":["/bin/true"],"cwd":"/","env":{},"stdout":"/x","stderr":"/y"}`,
        `{"kind":"spawn","id":2,"argv":[],"cwd":"/","env":{},"stdout":"/x","stderr":"/y"}`,
        `{"kind":"spawn","id":3,"argv":[1],"cwd":"/","env":{},"stdout":"/x","stderr":"/y"}`,
        `{"kind":"spawn","id":4,"argv":["/bin/true"],"cwd":"/","env":{"A":1},"stdout":"/x","stderr":"/y"}`,
        `{"kind":"remove","id":6,"paths":["\\q"]}`,
        valid.slice(0, valid.length - 5),
        `{"kind":"remove","id":7,"paths":["/nonexistent"],"extra":{"a":[1,{"b":null}],"c":"d"}`
      ]
      const lines = [...bad, valid]
      const r = spawnSync("/bin/sh", [
        "-c",
        `printf '%s\n' "$@" | ${p.node ? `"$NODE" ` : ""}"$SPAWNER" kiln-spawner $$`,
        "sh",
        ...lines
      ], {
        env: { NODE: process.execPath, SPAWNER: p.program },
        encoding: "utf8",
        timeout: 30_000
      })
      assert.strictEqual(r.status, 0, r.stderr)
      // The spawner leaves at end of input; /bin/true may exit, and be reported, before it reads that end.
      const replies = repliesOf(r.stdout).map((reply) =>
        reply.kind === "rejected" ? [reply.kind, reply.line] : [reply.kind, reply.id]
      )
      // Each bad line is answered by its number (its id may be what is wrong), in order, and says why.
      assert.deepStrictEqual(replies.slice(0, bad.length), bad.map((_, line) => ["rejected", line]))
      for (const reply of repliesOf(r.stdout)) {
        if (reply.kind === "rejected") assert.match(reply.reason, / in the request /)
      }
      assert.deepStrictEqual(replies.slice(bad.length, bad.length + 1), [["started", 5]])
      assert.deepStrictEqual(replies.slice(bad.length + 1), replies.length > bad.length + 1 ? [["exited", 5]] : [])
      assert.strictEqual(r.stderr, "")
    }))

  it.scoped("started for an engine that is not its parent, it starts nothing and leaves no files", () =>
    Effect.gen(function*() {
      const dir = yield* tempDir()
      // Its parent is the shell, but it was told the engine is pid 1: the engine it was made for is gone.
      const r = runSpawner(p, dir, "1")
      assert.strictEqual(r.status, 0, r.stderr)
      assert.strictEqual(r.stdout, "")
      assert.deepStrictEqual(fs.readdirSync(dir), [])
    }))

  it.scopedLive("when its engine goes away, the groups it started that still run are SIGKILLed", () =>
    Effect.gen(function*() {
      const dir = yield* tempDir()
      // Its stdin ends right after the request: the engine is gone while the process runs.
      const r = runSpawner(p, dir, "$$", ["/bin/sh", "-c", "cd / && trap '' TERM && sleep 1000"])
      assert.strictEqual(r.status, 0, r.stderr)
      const [reply] = repliesOf(r.stdout)
      assert(reply?.kind === "started", r.stdout)
      yield* Effect.addFinalizer(() => Effect.sync(() => groupAlive(reply.pid) && process.kill(-reply.pid, "SIGKILL")))
      yield* eventually("its process group is gone", () => !groupAlive(reply.pid), "20 seconds")
    }))

  it.scoped("it removes trees it is asked to, read-only ones included, and says so", () =>
    Effect.gen(function*() {
      const dir = yield* tempDir()
      const sandbox = path.join(dir, "sandbox")
      fs.mkdirSync(path.join(sandbox, "pkg", "mod"), { recursive: true })
      fs.writeFileSync(path.join(sandbox, "pkg", "mod", "f"), "x", { mode: 0o444 })
      fs.chmodSync(path.join(sandbox, "pkg", "mod"), 0o555)
      fs.chmodSync(path.join(sandbox, "pkg"), 0o555)
      fs.writeFileSync(`${sandbox}.stdout`, "out")
      const r = pipeInto(p, "$$", [{
        kind: "remove",
        id: 3,
        paths: [sandbox, `${sandbox}.stdout`, `${sandbox}.stderr`]
      }])
      assert.strictEqual(r.status, 0, r.stderr)
      assert.deepStrictEqual(repliesOf(r.stdout), [{ kind: "removed", id: 3 }])
      assert.deepStrictEqual(fs.readdirSync(dir), [])
    }))

  // Only root can mount (and a process running as root may leave a bind mount behind): CI runs as root.
  it.scoped.skipIf(process.getuid?.() !== 0)(
    "it never deletes through a file system mounted in a tree: it refuses, naming the mount",
    () =>
      Effect.gen(function*() {
        const dir = yield* tempDir()
        const outside = yield* tempDir()
        fs.writeFileSync(path.join(outside, "precious"), "keep me")
        const sandbox = path.join(dir, "sandbox")
        const at = path.join(sandbox, "mnt")
        fs.mkdirSync(at, { recursive: true })
        const mount = spawnSync("mount", ["--bind", outside, at], { encoding: "utf8" })
        assert.strictEqual(mount.status, 0, `mount --bind failed: ${mount.stderr}`)
        yield* Effect.addFinalizer(() => Effect.sync(() => spawnSync("umount", [at])))
        const r = pipeInto(p, "$$", [{ kind: "remove", id: 4, paths: [sandbox] }])
        const [reply] = repliesOf(r.stdout)
        assert(reply?.kind === "failed", r.stdout)
        assert.strictEqual(reply.code, "EBUSY")
        assert.include(reply.message, at)
        assert.strictEqual(fs.readFileSync(path.join(outside, "precious"), "utf8"), "keep me")
      })
  )

  it.scopedLive("armed, it starts the post-mortem when its engine goes away, its stderr going to the log", () =>
    Effect.gen(function*() {
      const dir = yield* tempDir()
      const marker = path.join(dir, "post-mortem")
      const log = path.join(dir, "post-mortem.log")
      const argv = ["/bin/sh", "-c", `echo "$0" > ${marker}.tmp && mv ${marker}.tmp ${marker}; echo logged >&2`, "ran"]
      const r = pipeInto(p, "$$", [{ kind: "arm", argv: ["/bin/false"], log }, { kind: "arm", argv, log }])
      assert.strictEqual(r.status, 0, r.stderr)
      yield* eventually("the last post-mortem armed ran", () => fs.existsSync(marker), "20 seconds")
      assert.strictEqual(fs.readFileSync(marker, "utf8"), "ran\n")
      yield* eventually("its stderr is in the log", () => fs.readFileSync(log, "utf8") === "logged\n", "20 seconds")
    }))

  it.scoped("disarmed (the engine's clean end), it starts nothing", () =>
    Effect.gen(function*() {
      const dir = yield* tempDir()
      const log = path.join(dir, "log")
      const arm: Protocol.Arm = { kind: "arm", argv: ["/bin/true"], log }
      // The spawner opens the post-mortem's log before it exits, as it starts one: the log tells, once it is gone.
      const armed = pipeInto(p, "$$", [arm])
      assert.strictEqual(armed.status, 0, armed.stderr)
      assert.isTrue(fs.existsSync(log), "armed, its end started the post-mortem")
      fs.rmSync(log)
      const disarmed = pipeInto(p, "$$", [arm, { kind: "disarm" }])
      assert.strictEqual(disarmed.status, 0, disarmed.stderr)
      assert.isFalse(fs.existsSync(log), "disarmed, it started the post-mortem anyway")
    }))

  it.scopedLive("the engine's end does not wait for a spawner that stopped reading: its disarm is given up after 2 s", () =>
    withProgram(
      p.program,
      Effect.gen(function*() {
        const scope = yield* Scope.make()
        const spawner = yield* Spawner.make().pipe(Scope.extend(scope))
        yield* spawner.warmUp
        const pids = () => helpersOf("kiln-spawner", process.pid)
        yield* eventually("the spawner runs", () => pids().length === 1)
        const [pid] = pids()
        yield* Effect.addFinalizer(() => Effect.sync(() => void process.kill(pid!, "SIGKILL")))
        process.kill(pid!, "SIGSTOP")
        // A request larger than the pipe holds stays queued in the engine while the spawner does not read.
        const dir = yield* tempDir()
        yield* Effect.fork(spawner.spawn({
          argv: ["/bin/true", "x".repeat(256 * 1024)],
          cwd: dir,
          env: {},
          stdout: path.join(dir, "out"),
          stderr: path.join(dir, "err")
        }))
        const closing = yield* Effect.fork(Scope.close(scope, Exit.void))
        const closed = yield* Fiber.join(closing).pipe(Effect.timeoutOption("20 seconds"))
        assert.isTrue(closed._tag === "Some", "the scope's end waited on the stopped spawner")
      })
    ))

  it.scoped("a process gets exactly its env (PATH looked up in it), /dev/null, its two files, and signals unblocked", () =>
    withProgram(
      p.program,
      Effect.gen(function*() {
        const dir = yield* tempDir()
        const bin = path.join(dir, "bin")
        fs.mkdirSync(bin)
        // A program that only waits, so that its own state is read from /proc as the spawner left it (a shell would
        // change its descriptors and signal mask around its own forks); found through the env's PATH, not the
        // spawner's, which has none.
        fs.copyFileSync("/bin/sleep", path.join(bin, "probe"))
        fs.chmodSync(path.join(bin, "probe"), 0o755)
        const out = path.join(dir, "out")
        const err = path.join(dir, "err")
        const env = { PATH: `${bin}:/usr/bin:/bin`, QUOTED: "a \"b\" é 😀\nc" }
        const spawner = yield* Spawner.make()
        const started = yield* spawner.spawn({ argv: ["probe", "30"], cwd: dir, env, stdout: out, stderr: err })
        yield* Effect.addFinalizer(() =>
          Effect.sync(() => groupAlive(started.pid) && process.kill(-started.pid, "SIGKILL"))
        )
        const proc = `/proc/${started.pid}`
        assert.strictEqual(fs.readlinkSync(`${proc}/exe`), path.join(bin, "probe"))
        assert.strictEqual(fs.readlinkSync(`${proc}/cwd`), dir)
        const environ = fs.readFileSync(`${proc}/environ`, "utf8").split("\0").filter((e) => e !== "")
        assert.deepStrictEqual(environ.sort(), Object.entries(env).map(([k, v]) => `${k}=${v}`).sort())
        const fds = fs.readdirSync(`${proc}/fd`).map(Number).sort((a, b) => a - b)
        assert.deepStrictEqual(fds.slice(0, 3).map((fd) => fs.readlinkSync(`${proc}/fd/${fd}`)), [
          "/dev/null",
          out,
          err
        ])
        // None of the spawner's or its parent's. (Node cannot tell the descriptors its own parent leaked from its
        // own, so the Node spawner passes those on.)
        if (!p.node) assert.deepStrictEqual(fds, [0, 1, 2])
        const status = fs.readFileSync(`${proc}/status`, "utf8")
        assert.match(status, /^SigBlk:\t0+$/m)
        assert.match(status, /^SigIgn:\t0+$/m)
        process.kill(-started.pid, "SIGKILL")
        assert.deepStrictEqual(yield* Deferred.await(started.exited), { code: null, signal: "SIGKILL", alone: true })
      })
    ))

  it.scoped("it reports an exit code, a signal, a group left behind, and why a program could not start", () =>
    withProgram(
      p.program,
      Effect.gen(function*() {
        const dir = yield* tempDir()
        const spawner = yield* Spawner.make()
        const run = (argv: ReadonlyArray<string>, cwd = dir) =>
          spawner.spawn({ argv, cwd, env: {}, stdout: path.join(dir, "out"), stderr: path.join(dir, "err") }).pipe(
            Effect.flatMap((s) => Deferred.await(s.exited))
          )
        assert.deepStrictEqual(yield* run(["/bin/sh", "-c", "exit 3"]), { code: 3, signal: null, alone: true })
        assert.deepStrictEqual(yield* run(["/bin/sh", "-c", "kill -TERM $$"]), {
          code: null,
          signal: "SIGTERM",
          alone: true
        })
        const left = yield* run(["/bin/sh", "-c", "sleep 30 & echo $! > bg.pid"])
        if (p.node) {
          process.kill(Number(fs.readFileSync(path.join(dir, "bg.pid"), "utf8")), "SIGKILL")
          assert.deepStrictEqual(left, { code: 0, signal: null, alone: false })
        } else {
          // The native spawner's reaper ends what a process leaves behind before it reports the exit (Descendants.test.ts).
          assert.deepStrictEqual(left, { code: 0, signal: null, alone: true })
        }
        const missing = yield* Effect.flip(run([path.join(dir, "no-such-program")]))
        assert(!(missing instanceof SpawnError), String(missing))
        assert.strictEqual(missing.code, "ENOENT")
        const notExecutable = path.join(dir, "plain")
        fs.writeFileSync(notExecutable, "data")
        assert.strictEqual(((yield* Effect.flip(run([notExecutable]))) as Spawner.StartFailure).code, "EACCES")
        const gone = yield* Effect.flip(run(["/bin/true"], path.join(dir, "no-such-dir")))
        assert.strictEqual((gone as Spawner.StartFailure).code, "ENOENT")
      })
    ))

  it.scoped.skipIf(MountNamespace.execRoot().root === undefined)(
    "with a namespace, the process sees its sandbox at the exec root, a read-only mount inside it, and starts there",
    () =>
      withProgram(
        p.program,
        Effect.gen(function*() {
          const dir = yield* tempDir()
          const sandbox = path.join(dir, "sandbox")
          const shared = path.join(dir, "shared")
          fs.mkdirSync(path.join(sandbox, "wd"), { recursive: true })
          fs.mkdirSync(path.join(sandbox, "tools"))
          fs.mkdirSync(shared)
          fs.writeFileSync(path.join(shared, "tool.txt"), "a tool\n")
          const spawner = yield* Spawner.make()
          const run = (mounts: ReadonlyArray<MountNamespace.Mount>) =>
            spawner.spawn({
              argv: [
                "/bin/sh",
                "-c",
                "{ pwd; cat ../tools/tool.txt; ( : > ../tools/new ) 2>/dev/null || echo read-only; } > out.txt"
              ],
              cwd: path.join(sandbox, "wd"),
              env: {},
              stdout: path.join(dir, "out"),
              stderr: path.join(dir, "err"),
              namespace: MountNamespace.toWire({
                mode: MountNamespace.probe().mode!,
                mounts,
                pinned: { sandbox, cwd: `${MountNamespace.EXEC_ROOT}/wd` }
              })
            }).pipe(Effect.flatMap((s) => Deferred.await(s.exited)))
          const exited = yield* run([{ source: shared, target: path.join(sandbox, "tools") }])
          assert.deepStrictEqual(
            exited,
            { code: 0, signal: null, alone: true },
            fs.readFileSync(path.join(dir, "err"), "utf8")
          )
          assert.strictEqual(
            fs.readFileSync(path.join(sandbox, "wd", "out.txt"), "utf8"),
            `${MountNamespace.EXEC_ROOT}/wd\na tool\nread-only\n`
          )
          // A mount that cannot be made: the native spawner fails the start, naming the namespace; the Node one's
          // wrapper exits 125 before the command.
          const gone = [{ source: path.join(dir, "no-such-dir"), target: path.join(sandbox, "tools") }]
          if (p.node) {
            assert.strictEqual((yield* run(gone)).code, 125)
          } else {
            const failed = yield* Effect.flip(run(gone))
            assert(!(failed instanceof SpawnError), String(failed))
            assert.strictEqual(failed.code, "ENOENT")
            assert.include(failed.message, "enter the mount namespace of '/bin/sh'")
          }
        })
      )
  )

  it.scoped.skipIf(MountNamespace.execRoot().root === undefined)(
    "a tree laid over with writable paths: written there (to the layer under the mount), read-only elsewhere",
    () =>
      withProgram(
        p.program,
        Effect.gen(function*() {
          const dir = yield* tempDir()
          const sandbox = path.join(dir, "sandbox")
          const tree = path.join(dir, "tree")
          const target = path.join(sandbox, "tools")
          fs.mkdirSync(target, { recursive: true })
          fs.mkdirSync(path.join(tree, "cache"), { recursive: true })
          fs.writeFileSync(path.join(tree, "cache", "old.txt"), "old\n")
          fs.writeFileSync(path.join(tree, "tool.txt"), "a tool\n")
          const upper = path.join(target, ".layer", "upper")
          const work = path.join(target, ".layer", "work")
          fs.mkdirSync(path.join(upper, "made"), { recursive: true })
          fs.mkdirSync(work)
          const spawner = yield* Spawner.make()
          const exited = yield* spawner.spawn({
            argv: [
              "/bin/sh",
              "-c",
              "{ cat tools/tool.txt; echo new > tools/made/new.txt && echo new > tools/cache/old.txt && " +
              "cat tools/made/new.txt tools/cache/old.txt; ( : > tools/other ) 2>/dev/null || echo read-only; " +
              "( mkdir tools/cache/../dir ) 2>/dev/null || echo read-only; } > out.txt"
            ],
            cwd: sandbox,
            env: {},
            stdout: path.join(dir, "out"),
            stderr: path.join(dir, "err"),
            namespace: MountNamespace.toWire({
              mode: MountNamespace.probe().mode!,
              mounts: [
                { kind: "overlay", source: MountNamespace.overlayOptions(tree, upper, work), target },
                { kind: "rw", source: path.join(target, "made"), target: path.join(target, "made") },
                { kind: "rw", source: path.join(target, "cache"), target: path.join(target, "cache") },
                { kind: "seal", source: "", target }
              ],
              pinned: { sandbox, cwd: MountNamespace.EXEC_ROOT }
            })
          }).pipe(Effect.flatMap((s) => Deferred.await(s.exited)))
          assert.deepStrictEqual(
            exited,
            { code: 0, signal: null, alone: true },
            fs.readFileSync(path.join(dir, "err"), "utf8")
          )
          assert.strictEqual(
            fs.readFileSync(path.join(sandbox, "out.txt"), "utf8"),
            "a tool\nnew\nnew\nread-only\nread-only\n"
          )
          // The tree is untouched; the writes are in the layer, beside nothing the process saw.
          assert.strictEqual(fs.readFileSync(path.join(tree, "cache", "old.txt"), "utf8"), "old\n")
          assert.deepStrictEqual(fs.readdirSync(tree).sort(), ["cache", "tool.txt"])
          assert.strictEqual(fs.readFileSync(path.join(upper, "made", "new.txt"), "utf8"), "new\n")
          assert.strictEqual(fs.readFileSync(path.join(upper, "cache", "old.txt"), "utf8"), "new\n")
        })
      )
  )
})

describe("the spawner's program", () => {
  /** The environment without the tests' spawner program: kiln's build must find its own. */
  const { [PROGRAM_ENV]: _, ...ownEnv } = process.env

  it.scoped("a real engine's spawner shows in ps as one short line: the native program, its marker and engine", () =>
    Effect.gen(function*() {
      const root = yield* tempDir()
      const ws = path.join(root, "ws")
      fs.mkdirSync(ws)
      // Its process's parent is its reaper (native/reaper.c), whose parent is the spawner that forked it.
      const script = "cat /proc/$PPID/cmdline > reaper.cmdline; " +
        "cat /proc/$(cut -d ' ' -f 4 /proc/$PPID/stat)/cmdline > spawner.cmdline"
      const config = {
        processes: { ps: { argv: ["/bin/sh", "-c", script], outputs: ["spawner.cmdline", "reaper.cmdline"] } }
      }
      fs.writeFileSync(path.join(ws, "kiln.json"), JSON.stringify(config))
      const r = spawnSync(process.execPath, [cli, "run", "--progress", "none"], {
        cwd: ws,
        encoding: "utf8",
        env: {
          ...ownEnv,
          KILN_STORE_DIR: path.join(root, "store"),
          KILN_SANDBOX_ROOT: path.join(root, "sandboxes"),
          KILN_NAMED_CACHES_DIR: path.join(root, "named"),
          // What the host's ps shows: the strict view would show the process only its own PID namespace.
          KILN_STRICT_VIEW: "0"
        }
      })
      assert.strictEqual(r.status, 0, r.stderr)
      const cmdline = fs.readFileSync(path.join(ws, "spawner.cmdline"), "utf8")
      const argv = cmdline.split("\0").slice(0, -1)
      assert.deepStrictEqual(argv, [path.resolve("dist", nativeName), "kiln-spawner", String(r.pid)])
      assert.isBelow(argv.join(" ").length, 200)
      // Its reapers are told apart: they are not the engine's spawner.
      const reaper = fs.readFileSync(path.join(ws, "reaper.cmdline"), "utf8").split("\0").filter((a) => a !== "")
      assert.deepStrictEqual(reaper, [path.resolve("dist", nativeName), "kiln-reaper", String(r.pid)])
    }))

  it("the library's build finds it too, beside its own modules", () => {
    const load = `import { programPath } from ${JSON.stringify(path.resolve("dist/layers/spawner/Warm.js"))}
      process.stdout.write(programPath())`
    const r = spawnSync(process.execPath, ["--input-type=module", "-e", load], { encoding: "utf8", env: ownEnv })
    assert.strictEqual(r.status, 0, r.stderr)
    assert.strictEqual(r.stdout, path.resolve("dist", nativeName))
    assert.isTrue(fs.existsSync(r.stdout))
  })

  it.scoped("a build without the native program (no C compiler) runs the Node one with node", () =>
    Effect.gen(function*() {
      const dist = path.join(yield* tempDir(), "dist")
      fs.mkdirSync(path.join(dist, "layers", "spawner"), { recursive: true })
      fs.copyFileSync("dist/layers/spawner/Warm.js", path.join(dist, "layers", "spawner", "Warm.js"))
      const load = `import { commandFor } from ${JSON.stringify(path.join(dist, "layers", "spawner", "Warm.js"))}
        process.stdout.write(JSON.stringify(commandFor(42)))`
      const r = spawnSync(process.execPath, ["--input-type=module", "-e", load], { encoding: "utf8", env: ownEnv })
      assert.strictEqual(r.status, 0, r.stderr)
      assert.deepStrictEqual(JSON.parse(r.stdout), {
        file: process.execPath,
        args: [path.join(dist, "spawner.cjs"), "kiln-spawner", "42"]
      })
    }))
})

describe("the engine's side of the spawner", () => {
  const request = (dir: string): Spawner.Request => ({
    argv: ["/bin/true"],
    cwd: dir,
    env: {},
    stdout: path.join(dir, "out"),
    stderr: path.join(dir, "err")
  })

  it.scoped("with its program missing, a spawn fails with one line naming the program", () =>
    Effect.gen(function*() {
      const dir = yield* tempDir()
      const missing = path.join(dir, "no-spawner.cjs")
      const error = yield* withProgram(
        missing,
        Effect.flip(Effect.flatMap(Spawner.make(), (s) => s.spawn(request(dir))))
      )
      assert.instanceOf(error, SpawnError)
      assert.include(error.message, missing)
    }))

  it.scoped("a spawner that sends a malformed reply fails what it was asked, quoting the reply", () =>
    Effect.gen(function*() {
      const dir = yield* tempDir()
      const liar = path.join(dir, "liar.cjs")
      fs.writeFileSync(liar, `process.stdin.once("data", () => process.stdout.write('{"kind":"started","id":0}\\n'))\n`)
      const error = yield* withProgram(liar, Effect.flip(Effect.flatMap(Spawner.make(), (s) => s.spawn(request(dir)))))
      assert(!(error instanceof SpawnError) && error.code === Spawner.LOST, String(error))
      assert.include(error.message, "malformed reply")
      assert.include(error.message, `"pid"`)
    }))
})
