/**
 * The strict view (`MountNamespace.View`, issue #37): a process sees the system's directories, its sandbox, a private
 * /tmp, a minimal /dev, its own /proc and its declared host paths, and nothing else; it is its init's child in PID,
 * IPC and network namespaces of its own. Asserted with real processes through both spawners (the native one makes
 * the view with the system calls, the Node one with util-linux), and through the engine, whose default is the view
 * wherever this machine can make it. Everything the processes look for lives in temp directories.
 */
import { assert, describe, it } from "@effect/vitest"
import { Deferred, Effect, Either, Layer } from "effect"
import * as childProcess from "node:child_process"
import * as fs from "node:fs"
import * as net from "node:net"
import * as os from "node:os"
import * as path from "node:path"
import { parse } from "../../src/domain/config/Config.js"
import * as Engine from "../../src/layers/engine/Engine.js"
import * as ProcessGroup from "../../src/layers/runner/internal/processGroup.js"
import * as Spawner from "../../src/layers/spawner/Spawner.js"
import { PROGRAM_ENV } from "../../src/layers/spawner/Warm.js"
import * as MountNamespace from "../../src/os/mounts/MountNamespace.js"
import { eventually } from "../utils/child.js"
import { programs, withProgram } from "../utils/spawners.js"
import { stack } from "../utils/stack.js"
import { tempDir, writeTree } from "../utils/temp.js"

const probed = MountNamespace.strictProbe()
const mode = MountNamespace.probe().mode

/**
 * Whether this test run can start a process as nobody in namespaces of its own (as root, with setpriv, and where
 * the kernel lets nobody make a user namespace), and with which setpriv arguments; `why` says why not.
 */
const asNobody = ((): { works: boolean; why: string; uid: number; ids: ReadonlyArray<string> } => {
  const uid = 65534
  const ids = [`--reuid=${uid}`, `--regid=${uid}`, "--clear-groups"]
  const no = (why: string) => ({ works: false, why, uid, ids })
  if (process.getuid?.() !== 0) return no("not root: cannot become nobody")
  try {
    childProcess.execFileSync("setpriv", [
      ...ids,
      "unshare",
      "--user",
      "--map-root-user",
      "--mount",
      "--pid",
      "--fork",
      "--net",
      "true"
    ], {
      stdio: "ignore"
    })
    return { works: true, why: "nobody, through setpriv", uid, ids }
  } catch (e) {
    return no(`nobody cannot make namespaces here: ${(e as Error).message.split("\n")[0]}`)
  }
})()

/** A sandbox with an input, a workspace beside it with a secret, a store-like directory, and a host tool dir. */
const layout = Effect.gen(function*() {
  const root = yield* tempDir("kiln-view-")
  writeTree(root, {
    "sandbox/wd/in.txt": "input\n",
    "ws/secret.txt": "secret\n",
    "store/blob": "blob\n",
    "tool/readme.txt": "tool\n"
  })
  return {
    root,
    sandbox: path.join(root, "sandbox"),
    secret: path.join(root, "ws", "secret.txt"),
    store: path.join(root, "store"),
    tool: path.join(root, "tool")
  }
})

type Layout = Effect.Effect.Success<typeof layout>

/**
 * Runs `script` with sh in the view, the sandbox at the exec root, through `spawner` (a spawner of its own without
 * one); its exit, stdout and stderr.
 */
const runInView = (
  l: Layout,
  script: string,
  view: MountNamespace.View = { hostPaths: [], network: false },
  args: ReadonlyArray<string> = [],
  spawner?: Spawner.Spawner
) =>
  Effect.gen(function*() {
    if (spawner === undefined) spawner = yield* Spawner.make()
    // Each run its own files: runs through one spawner may be at once.
    const out = fs.mkdtempSync(path.join(l.root, "out-"))
    const err = path.join(out, "err")
    const group = yield* ProcessGroup.spawnGroup(spawner, {
      argv: ["/bin/sh", "-c", script, "view", ...args],
      cwd: path.join(l.sandbox, "wd"),
      env: { PATH: "/usr/bin:/bin", HOME: os.homedir() },
      stdout: path.join(out, "out"),
      stderr: err,
      namespace: MountNamespace.toWire({
        mode: mode!,
        mounts: [],
        pinned: { sandbox: l.sandbox, cwd: `${MountNamespace.EXEC_ROOT}/wd` },
        view
      })
    }, "1 second")
    const exit = yield* Deferred.await(group.exited)
    return { exit, stdout: fs.readFileSync(path.join(out, "out"), "utf8"), stderr: fs.readFileSync(err, "utf8") }
  })

/** Node in the view: at its own path, declared where it is not among the system's directories. */
const nodeDir = path.dirname(process.execPath)
const nodeView: MountNamespace.View = {
  hostPaths: /^\/(usr|bin)\//.test(process.execPath) ? [] : [nodeDir],
  network: false
}

/**
 * Scripts the loopback tests run with Node in the view. `bind.cjs <port> a|b`: two processes meet over two fifos
 * while each holds its port (or has failed to bind it), and each prints what binding it said. `serve.cjs <port>`:
 * a server that says it listens on the fifo `up`, and runs until it is killed. `closer.cjs <port>`: a connection
 * to itself that its server closes first, leaving it in TIME_WAIT. `probe.cjs <port>`: whether the port answers, then
 * whether it can be bound.
 */
const loopbackScripts = {
  "bind.cjs": `const fs = require("fs"), net = require("net")
const [port, role] = process.argv.slice(2)
const met = (said) => {
  if (role === "a") { fs.writeFileSync("a-to-b", said); fs.readFileSync("b-to-a") }
  else { fs.readFileSync("a-to-b"); fs.writeFileSync("b-to-a", said) }
  console.log(said)
  process.exit(0)
}
const server = net.createServer()
server.on("error", (e) => met(e.code))
server.listen(Number(port), "127.0.0.1", () => met("bound"))
`,
  "serve.cjs": `const fs = require("fs"), net = require("net")
net.createServer((s) => s.end("hello\\n")).listen(Number(process.argv[2]), "127.0.0.1", () => fs.writeFileSync("up", "listening\\n"))
`,
  "closer.cjs": `const net = require("net")
const server = net.createServer((s) => s.end()).listen(Number(process.argv[2]), "127.0.0.1", () => {
  const client = net.connect(Number(process.argv[2]), "127.0.0.1")
  client.on("end", () => client.end()).on("close", () => process.exit(0))
})
`,
  "probe.cjs": `const net = require("net")
const port = Number(process.argv[2])
const bind = () => {
  const server = net.createServer()
  server.on("error", (e) => { console.log(e.code); process.exit(0) })
  server.listen(port, "127.0.0.1", () => { console.log("bound"); process.exit(0) })
}
net.connect(port, "127.0.0.1").on("connect", () => { console.log("answered"); bind() }).on("error", (e) => { console.log(e.code); bind() })
`
}

/** The loopback scripts in the sandbox's `wd`, with these fifos beside them, and a spawner of its own. */
const loopbackWorkspace = (fifos: ReadonlyArray<string>) =>
  Effect.gen(function*() {
    const l = yield* layout
    const wd = path.join(l.sandbox, "wd")
    writeTree(wd, loopbackScripts)
    childProcess.execFileSync("mkfifo", fifos.map((name) => path.join(wd, name)))
    return { l, wd, spawner: yield* Spawner.make() }
  })

/** A TCP server on 127.0.0.1 of this (the host's) network, closed with the scope. */
const loopbackServer = Effect.acquireRelease(
  Effect.async<net.Server>((resume) => {
    const server = net.createServer((socket) => socket.end("hello\n"))
    server.listen(0, "127.0.0.1", () => resume(Effect.succeed(server)))
  }),
  (server) => Effect.async<void>((resume) => void server.close(() => resume(Effect.void)))
)

describe.runIf(probed.works)("the strict view", () => {
  for (const program of programs) {
    describe(`${program.name} spawner`, () => {
      const inView = (
        l: Layout,
        script: string,
        view?: MountNamespace.View,
        args?: ReadonlyArray<string>
      ) => withProgram(program.program, runInView(l, script, view, args))

      it.scopedLive("sees its sandbox, the system's directories, and nothing else of the host", () =>
        Effect.gen(function*() {
          const l = yield* layout
          const r = yield* inView(
            l,
            [
              `cat in.txt`,
              `ls /`,
              `[ ! -e "$1" ] && [ ! -e ../../ws/secret.txt ] && echo no-workspace`,
              `[ ! -e "$2" ] && echo no-store`,
              `[ ! -e "$HOME" ] && echo no-home`,
              `[ ! -e /proc/$3/environ ] && echo no-engine`,
              `! ( : > /usr/kiln-view-test ) 2>/dev/null && echo usr-read-only`,
              `echo ok > /mnt/wd/written && echo sandbox-writable`
            ].join("\n"),
            undefined,
            [l.secret, l.store, String(process.pid)]
          )
          assert.strictEqual(r.exit.code, 0, r.stderr)
          const lines = r.stdout.trim().split("\n")
          assert.strictEqual(lines[0], "input")
          const top = lines.slice(1, -6)
          for (const d of top) {
            assert.include([
              "bin",
              "dev",
              "etc",
              "lib",
              "lib32",
              "lib64",
              "libx32",
              "mnt",
              "proc",
              "sbin",
              "tmp",
              "usr"
            ], d)
          }
          assert.deepStrictEqual(lines.slice(-6), [
            "no-workspace",
            "no-store",
            "no-home",
            "no-engine",
            "usr-read-only",
            "sandbox-writable"
          ])
          assert.strictEqual(fs.readFileSync(path.join(l.sandbox, "wd", "written"), "utf8"), "ok\n")
        }))

      it.scopedLive("has an empty, writable /tmp, a working /dev/null, and only its own processes in /proc", () =>
        Effect.gen(function*() {
          const l = yield* layout
          const r = yield* inView(
            l,
            [
              `[ -z "$(ls -A /tmp)" ] && echo tmp-empty`,
              `echo t > /tmp/t && cat /tmp/t`,
              `echo gone > /dev/null && [ ! -s /dev/null ] && echo dev-null`,
              `head -c 4 /dev/zero | wc -c`,
              // This shell and the processes of its pipelines: a handful, never the host's hundreds.
              `ls /proc | grep -c '^[0-9]'`
            ].join("\n")
          )
          assert.strictEqual(r.exit.code, 0, r.stderr)
          const lines = r.stdout.trim().split("\n")
          assert.deepStrictEqual(lines.slice(0, 4), ["tmp-empty", "t", "dev-null", "4"])
          assert.isAtMost(Number(lines[4]), 6)
        }))

      it.scopedLive("reads a declared host path, read-only, at its own path", () =>
        Effect.gen(function*() {
          const l = yield* layout
          const r = yield* inView(
            l,
            `cat "$1/readme.txt" && ! ( : > "$1/new" ) 2>/dev/null && echo read-only`,
            { hostPaths: [l.tool], network: false },
            [l.tool]
          )
          assert.strictEqual(r.exit.code, 0, r.stderr)
          assert.strictEqual(r.stdout, "tool\nread-only\n")
          assert.isFalse(fs.existsSync(path.join(l.tool, "new")))
        }))

      it.scopedLive("cannot reach a server on the host's loopback, unless `network` is true", () =>
        Effect.gen(function*() {
          const l = yield* layout
          const server = yield* loopbackServer
          const port = (server.address() as net.AddressInfo).port
          // bash's /dev/tcp: a connection without a client program.
          const connect = `exec 3<>/dev/tcp/127.0.0.1/$1 && head -n 1 <&3`
          const off = yield* inView(l, `bash -c '${connect}' bash "$1"`, undefined, [String(port)])
          assert.notStrictEqual(off.exit.code, 0)
          assert.strictEqual(off.stdout, "")
          const on = yield* inView(l, `bash -c '${connect}' bash "$1"`, { hostPaths: [], network: true }, [
            String(port)
          ])
          assert.strictEqual(on.exit.code, 0, on.stderr)
          assert.strictEqual(on.stdout, "hello\n")
        }))

      it.scopedLive("two processes at once each bind the same port, each on its own loopback", () =>
        withProgram(
          program.program,
          Effect.gen(function*() {
            const { l, spawner } = yield* loopbackWorkspace(["a-to-b", "b-to-a"])
            // Two processes first, at once: the native spawner keeps their namespaces, and the two after start in them.
            yield* Effect.all([
              runInView(l, "true", nodeView, [], spawner),
              runInView(l, "true", nodeView, [], spawner)
            ], {
              concurrency: 2
            })
            const bind = (role: string) =>
              runInView(l, `exec "$1" bind.cjs 3000 ${role}`, nodeView, [process.execPath], spawner)
            const [a, b] = yield* Effect.all([bind("a"), bind("b")], { concurrency: 2 })
            assert.strictEqual(a.exit.code, 0, a.stderr)
            assert.strictEqual(b.exit.code, 0, b.stderr)
            assert.deepStrictEqual([a.stdout, b.stdout], ["bound\n", "bound\n"])
          })
        ))

      it.scopedLive("a server a process left running dies with it: the next process finds its port free", () =>
        withProgram(
          program.program,
          Effect.gen(function*() {
            // One spawner for both: the native one gives the second process the first one's network namespace.
            const { l, spawner } = yield* loopbackWorkspace(["up"])
            const ns = `readlink /proc/self/ns/net`
            const first = yield* runInView(
              l,
              `${ns}; "$1" serve.cjs 3000 & cat up`,
              nodeView,
              [process.execPath],
              spawner
            )
            assert.strictEqual(first.exit.code, 0, first.stderr)
            const second = yield* runInView(l, `${ns}; exec "$1" probe.cjs 3000`, nodeView, [process.execPath], spawner)
            assert.strictEqual(second.exit.code, 0, second.stderr)
            const [firstNs, listening] = first.stdout.trim().split("\n")
            const [secondNs, ...probed] = second.stdout.trim().split("\n")
            assert.strictEqual(listening, "listening")
            assert.deepStrictEqual(probed, ["ECONNREFUSED", "bound"])
            // The native spawner keeps the namespace for the next process (netpool.c): the port was freed in it.
            if (!program.node) assert.strictEqual(secondNs, firstNs)
          })
        ))

      it.scopedLive("a connection an earlier process left in TIME_WAIT is not in the next one's network", () =>
        withProgram(
          program.program,
          Effect.gen(function*() {
            const l = yield* layout
            writeTree(path.join(l.sandbox, "wd"), loopbackScripts)
            const spawner = yield* Spawner.make()
            const tcp = `grep '^TCP:' /proc/net/sockstat`
            const first = yield* runInView(l, `"$1" closer.cjs 3000 && ${tcp}`, nodeView, [process.execPath], spawner)
            assert.strictEqual(first.exit.code, 0, first.stderr)
            assert.match(first.stdout, / tw 1 /)
            const second = yield* runInView(l, tcp, nodeView, [], spawner)
            assert.strictEqual(second.exit.code, 0, second.stderr)
            assert.match(second.stdout, /^TCP: inuse 0 orphan \d+ tw 0 /)
          })
        ))

      it.scopedLive.runIf(process.getuid?.() === 0)(
        "an address an earlier process (as root) added to its loopback is not in the next one's",
        () =>
          withProgram(
            program.program,
            Effect.gen(function*() {
              const l = yield* layout
              const spawner = yield* Spawner.make()
              const first = yield* runInView(
                l,
                `ip addr add 10.1.0.1/32 dev lo 2>/dev/null && ip -o addr show lo || echo refused`,
                undefined,
                [],
                spawner
              )
              assert.strictEqual(first.exit.code, 0, first.stderr)
              // The native spawner's processes have no CAP_NET_ADMIN to add one; the pool checks all the same.
              if (program.node) assert.include(first.stdout, "10.1.0.1")
              else assert.strictEqual(first.stdout, "refused\n")
              const second = yield* runInView(l, `ip -o addr show lo`, undefined, [], spawner)
              assert.strictEqual(second.exit.code, 0, second.stderr)
              assert.include(second.stdout, "127.0.0.1")
              assert.notInclude(second.stdout, "10.1.0.1")
            })
          )
      )

      it.scopedLive("its own loopback is up: it can serve and reach itself", () =>
        Effect.gen(function*() {
          const l = yield* layout
          const r = yield* inView(l, `ip -o link show lo | grep -q 'UP' && echo lo-up`)
          assert.strictEqual(r.exit.code, 0, r.stderr)
          assert.strictEqual(r.stdout, "lo-up\n")
        }))

      it.scopedLive("a child that calls setsid ends with it", () =>
        Effect.gen(function*() {
          const l = yield* layout
          // A copy of sleep in the sandbox: its host path marks it among the host's processes.
          const sleep = path.join(l.sandbox, "wd", "marker-sleep")
          fs.copyFileSync("/bin/sleep", sleep)
          fs.chmodSync(sleep, 0o755)
          const r = yield* inView(l, `setsid ./marker-sleep 1000 >/dev/null 2>&1 </dev/null & echo $! > pid`)
          assert.strictEqual(r.exit.code, 0, r.stderr)
          assert.match(fs.readFileSync(path.join(l.sandbox, "wd", "pid"), "utf8"), /^\d+\n$/)
          const survivors = () =>
            fs.readdirSync("/proc").filter((name) => {
              try {
                return /^\d+$/.test(name) && fs.readFileSync(`/proc/${name}/cmdline`, "utf8").includes("marker-sleep")
              } catch {
                return false
              }
            })
          yield* eventually("the setsid child is gone", () => survivors().length === 0)
        }))

      // The Node spawner's view keeps its capabilities (see ViewScript.ts): the native spawner is the one kiln uses.
      it.scopedLive.runIf(!program.node)(
        "keeps only a build's capabilities: it cannot remount its view writable, mount, or make a device",
        () =>
          Effect.gen(function*() {
            const l = yield* layout
            const r = yield* inView(
              l,
              [
                `mount -o remount,rw,bind "$1" 2>/dev/null || echo no-remount`,
                `mount -t tmpfs none /tmp 2>/dev/null || echo no-mount`,
                `mknod /tmp/disk b 8 0 2>/dev/null || echo no-mknod`,
                `: > own.txt && chown 1 own.txt && chmod 600 own.txt && echo owns-its-files`,
                `grep '^CapBnd:' /proc/self/status`
              ].join("\n"),
              { hostPaths: [l.tool], network: false },
              [l.tool]
            )
            assert.strictEqual(r.exit.code, 0, r.stderr)
            const lines = r.stdout.trim().split("\n")
            assert.deepStrictEqual(lines.slice(0, 4), ["no-remount", "no-mount", "no-mknod", "owns-its-files"])
            // No CAP_SYS_ADMIN (bit 21) in the bounding set: no setuid program wins it back.
            const bounding = BigInt(`0x${lines[4]!.split(/\s+/)[1]}`)
            assert.strictEqual((bounding >> 21n) & 1n, 0n, lines[4])
            assert.isFalse(fs.existsSync(path.join(l.tool, "new")))
          })
      )

      it.scopedLive("exits as its process did: a code, or a signal", () =>
        Effect.gen(function*() {
          const l = yield* layout
          assert.strictEqual((yield* inView(l, "exit 7")).exit.code, 7)
          const killed = yield* inView(l, "kill -TERM $$")
          // The Node spawner's view reports a signal as its shell does (see ViewScript.ts).
          if (program.node) assert.strictEqual(killed.exit.code, 143)
          else assert.strictEqual(killed.exit.signal, "SIGTERM")
        }))
    })
  }

  describe.runIf(asNobody.works)(`the native spawner as another user (${asNobody.why})`, () => {
    /**
     * The layout made reachable by nobody, and a spawner run as nobody (through a wrapper of a copy of the program)
     * that runs scripts in the view as `runInView` does.
     */
    const asNobodyIn = (l: Layout) =>
      Effect.gen(function*() {
        fs.chmodSync(l.root, 0o755)
        const program = path.join(l.root, "kiln-spawner")
        fs.copyFileSync(programs[0].program, program)
        fs.chmodSync(program, 0o755)
        const wrapper = path.join(l.root, "as-nobody")
        fs.writeFileSync(wrapper, `#!/bin/sh\nexec setpriv ${asNobody.ids.join(" ")} "${program}" "$@"\n`, {
          mode: 0o755
        })
        const chown = (p: string) => fs.chownSync(p, asNobody.uid, asNobody.uid)
        for (const p of [l.sandbox, path.join(l.sandbox, "wd")]) chown(p)
        // For the test's scope: the program is looked for as the spawner starts, at its first request.
        yield* Effect.acquireRelease(
          Effect.sync(() => {
            const saved = process.env[PROGRAM_ENV]
            process.env[PROGRAM_ENV] = wrapper
            return saved
          }),
          (saved) => Effect.sync(() => void (process.env[PROGRAM_ENV] = saved))
        )
        const spawner = yield* Spawner.make()
        const run = (script: string, args: ReadonlyArray<string> = []) =>
          Effect.gen(function*() {
            const out = fs.mkdtempSync(path.join(l.root, "out-"))
            chown(out)
            const group = yield* ProcessGroup.spawnGroup(spawner, {
              argv: ["/bin/sh", "-c", script, "view", ...args],
              cwd: path.join(l.sandbox, "wd"),
              env: { PATH: "/usr/bin:/bin" },
              stdout: path.join(out, "out"),
              stderr: path.join(out, "err"),
              namespace: MountNamespace.toWire({
                mode: "user",
                mounts: [],
                pinned: { sandbox: l.sandbox, cwd: `${MountNamespace.EXEC_ROOT}/wd` },
                view: nodeView
              })
            }, "1 second")
            const exit = yield* Deferred.await(group.exited)
            const read = (name: string) => fs.readFileSync(path.join(out, name), "utf8")
            return { exit, stdout: read("out"), stderr: read("err") }
          })
        return { run, chown }
      })

    it.scopedLive("shows the view: no host /root, its sandbox at /mnt, no network", () =>
      Effect.gen(function*() {
        const l = yield* layout
        const server = yield* loopbackServer
        const port = (server.address() as net.AddressInfo).port
        const { run } = yield* asNobodyIn(l)
        const r = yield* run(
          [
            `id -u`,
            `[ ! -e /root ] && echo no-root`,
            `pwd`,
            `cat in.txt`,
            `! bash -c 'exec 3<>/dev/tcp/127.0.0.1/$1' bash "$1" 2>/dev/null && echo no-host-loopback`,
            `ip -o link show | wc -l`
          ].join("\n"),
          [String(port)]
        )
        assert.strictEqual(r.exit.code, 0, r.stderr)
        assert.deepStrictEqual(r.stdout.trim().split("\n"), [
          String(asNobody.uid),
          "no-root",
          `${MountNamespace.EXEC_ROOT}/wd`,
          "input",
          "no-host-loopback",
          "1"
        ])
      }))

    it.scopedLive("cannot remount a declared host path writable in its own namespaces: it has no CAP_SYS_ADMIN", () =>
      Effect.gen(function*() {
        const l = yield* layout
        const { run } = yield* asNobodyIn(l)
        const r = yield* run(`mount -o remount,rw,bind "$1" 2>/dev/null || echo no-remount`, [l.sandbox])
        assert.strictEqual(r.exit.code, 0, r.stderr)
        assert.strictEqual(r.stdout, "no-remount\n")
      }))

    it.scopedLive("keeps network namespaces too: each of two at once binds the port, the next finds it free", () =>
      Effect.gen(function*() {
        const l = yield* layout
        const wd = path.join(l.sandbox, "wd")
        writeTree(wd, loopbackScripts)
        const { chown, run } = yield* asNobodyIn(l)
        const fifos = ["a-to-b", "b-to-a", "up"].map((name) => path.join(wd, name))
        childProcess.execFileSync("mkfifo", fifos)
        fifos.forEach(chown)
        const ns = `readlink /proc/self/ns/net`
        // Two at once first, so that the two after start in namespaces the pool kept.
        yield* Effect.all([run(ns), run(ns)], { concurrency: 2 })
        const bind = (role: string) => run(`exec "$1" bind.cjs 3000 ${role}`, [process.execPath])
        const [a, b] = yield* Effect.all([bind("a"), bind("b")], { concurrency: 2 })
        assert.deepStrictEqual([a.stdout, b.stdout], ["bound\n", "bound\n"], a.stderr + b.stderr)
        const first = yield* run(`${ns}; "$1" serve.cjs 3000 & cat up`, [process.execPath])
        assert.strictEqual(first.exit.code, 0, first.stderr)
        const second = yield* run(`${ns}; exec "$1" probe.cjs 3000`, [process.execPath])
        assert.strictEqual(second.exit.code, 0, second.stderr)
        const [firstNs, listening] = first.stdout.trim().split("\n")
        const [secondNs, ...probed] = second.stdout.trim().split("\n")
        assert.strictEqual(listening, "listening")
        assert.deepStrictEqual(probed, ["ECONNREFUSED", "bound"])
        assert.strictEqual(secondNs, firstNs)
      }))
  })

  describe("through the engine (the view is the default)", () => {
    const config = (processes: Record<string, unknown>) =>
      Either.getOrThrow(parse("kiln.json", JSON.stringify({ processes })))

    it.scopedLive("a process cannot read an undeclared workspace file, by absolute path or by ../", () =>
      Effect.gen(function*() {
        const root = yield* tempDir("kiln-view-engine-")
        const workspace = path.join(root, "ws")
        writeTree(workspace, { "src/in.txt": "in\n", "src/undeclared.txt": "secret\n" })
        fs.mkdirSync(path.join(root, "sandboxes"))
        const undeclared = path.join(workspace, "src", "undeclared.txt")
        const report = yield* Effect.flatMap(Engine.Engine, (engine) =>
          engine.run({
            workspace,
            config: config({
              look: {
                argv: [
                  "/bin/sh",
                  "-c",
                  `{ ${
                    [
                      `cat src/in.txt`,
                      `[ ! -e ${undeclared} ] && echo no-absolute`,
                      `[ ! -e ../src/undeclared.txt ] && [ ! -e src/undeclared.txt ] && echo no-relative`,
                      `[ "$TMPDIR" = /tmp ] && echo tmpdir`,
                      `ls /proc | grep -c '^[0-9]'`
                    ].join("; ")
                  }; } > out.txt`
                ],
                env: { PATH: "/usr/bin:/bin" },
                inputs: ["src/in.txt"],
                outputs: ["out.txt"]
              }
            })
          })).pipe(Effect.provide(Engine.layer.pipe(Layer.provideMerge(stack({ root, inProcess: true })))))
        assert.strictEqual(report.failed, 0, JSON.stringify(report.processes))
        const lines = fs.readFileSync(path.join(workspace, "out.txt"), "utf8").trim().split("\n")
        assert.deepStrictEqual(lines.slice(0, 4), ["in", "no-absolute", "no-relative", "tmpdir"])
        assert.isAtMost(Number(lines[4]), 6)
      }))
  })
})

describe("strictProbe", () => {
  it.effect("says whether the view works here, and why not where it does not", () =>
    Effect.sync(() => {
      assert.strictEqual(MountNamespace.strictProbe(), probed)
      if (!probed.works) assert.notStrictEqual(probed.why, "")
    }))
})
