/**
 * The spawner (`node dist/spawner.cjs kiln-spawner <engine-pid>`; `native/` is the same program in C, which engines
 * run instead when the build compiled it): a small Node process, one per engine, that forks
 * every process the engine runs, and is the engine's watchdog. `fork()` copies the page tables of the process that
 * calls it and write-protects its heap, so the engine (a large heap, dozens of LMDB maps) would block its main
 * thread on every spawn and take copy-on-write faults afterwards, where this small process pays less, on another
 * core. It
 * never writes a file that a process could exec (it only opens the output files), so forking here cannot make a
 * sandbox's binary busy (ETXTBSY). It also removes sandboxes whose group is gone, beside the engine's one thread,
 * which is what bounds a cold run.
 *
 * It starts on a hot path (the first process of a cold run waits for it), so it loads nothing but Node's built-ins,
 * its protocol (`layers/spawner/Protocol.ts`) and kiln's small os modules (RemoveTree, Mounts), and never Effect:
 * `scripts/bundle.mjs` fails a build whose `dist/spawner.cjs` took in a package.
 *
 * Its last argument is the engine's pid. It ignores SIGINT, SIGTERM and SIGHUP (the engine ends the groups it
 * started), runs in a session of its own (a signal to the engine's process group does not take it too), and exits
 * when its stdin closes, or when its parent is not that pid: when the engine is gone. Then it first SIGKILLs the
 * group of every process it started that is still running (the engine would have ended each), drops the requests
 * still buffered (starting one would leave its output files behind), and starts the engine's post-mortem, if one
 * is armed (a sandboxer told that its parent is the dead engine: it removes the engine's sandboxes and clears the
 * reader slots the engine left in the store). The engine disarms it once it has closed its store.
 *
 * Unlike the native spawner, it cannot start a process under a reaper of its own (`native/reaper.c`): Node has no
 * `prctl(PR_SET_CHILD_SUBREAPER)`. A descendant that leaves its process's group (`setsid`, a double fork, a shell's
 * job under `set -m`) is not ended with it here: it survives the process, its timeout and the engine.
 *
 * @internal
 */
import { spawn } from "node:child_process"
import * as fs from "node:fs"
import * as Protocol from "../../layers/spawner/Protocol.js"
import { errnoOf } from "../../os/Errno.js"
import * as MountNamespace from "../../os/mounts/MountNamespace.js"
import { mountUnder } from "../../os/mounts/Mounts.js"
import { removeTree } from "../../os/RemoveTree.js"

const send = (reply: Protocol.Reply) => void process.stdout.write(Protocol.encode(reply))

const failed = (id: number, e: unknown, fallback: string): Protocol.Failed => ({
  kind: "failed",
  id,
  code: errnoOf(e) ?? fallback,
  message: e instanceof Error ? e.message : String(e)
})

/** The engine's pid, the last argument: a spawner that finds another parent (the engine died) starts nothing more. */
const engineOf = (argv: ReadonlyArray<string>): number => {
  const pid = Number(argv[argv.length - 1])
  if (argv[argv.length - 2] === "kiln-spawner" && Number.isSafeInteger(pid) && pid > 0) return pid
  process.stderr.write(`kiln-spawner: expected the arguments "kiln-spawner <engine-pid>", got ${argv.join(" ")}\n`)
  return process.exit(2)
}

const engine = engineOf(process.argv.slice(2))
/** The processes started whose exit has not been seen: each leads its own group, whose id cannot be reused meanwhile. */
const running = new Set<number>()
/** What to start if the engine dies, from its last `arm`, until it says `disarm`. */
let postMortem: Protocol.Arm | undefined

const startPostMortem = (armed: Protocol.Arm) => {
  let log: number | undefined
  try {
    log = fs.openSync(armed.log, "a", 0o600)
  } catch {
    // Without its log it still runs: cleaning up after the engine matters more than its messages.
  }
  try {
    spawn(armed.argv[0]!, armed.argv.slice(1), {
      detached: true,
      stdio: ["ignore", "ignore", log === undefined ? "ignore" : log]
    }).unref()
  } catch {
    // Nothing is left to tell: the engine is gone, and this process's stderr with it.
  }
}

/** The engine is gone: what it started dies with it, and its post-mortem cleans up after it. */
const endAll = (): never => {
  for (const pid of running) {
    try {
      process.kill(-pid, "SIGKILL")
    } catch {
      // Its group ended meanwhile.
    }
  }
  if (postMortem !== undefined) startPostMortem(postMortem)
  return process.exit(0)
}

/** Opens the child's output files, both or neither. */
const openOutputs = (r: Protocol.Spawn): [number, number] => {
  const out = fs.openSync(r.stdout, "w", 0o600)
  try {
    return [out, fs.openSync(r.stderr, "w", 0o600)]
  } catch (e) {
    fs.closeSync(out)
    throw e
  }
}

/** Whether nothing of the group is left: the common answer, yes, saves the engine a check of its own. */
const groupGone = (pgid: number) => {
  try {
    process.kill(-pgid, 0)
    return false
  } catch (e) {
    return errnoOf(e) === "ESRCH"
  }
}

const start = (r: Protocol.Spawn) => {
  // Requests the engine wrote just before it died are not started: its sandboxes are being removed.
  if (process.ppid !== engine) endAll()
  // Nor is one whose sandbox is gone: its output files would be left beside nothing.
  if (!fs.existsSync(r.cwd)) {
    return send({ kind: "failed", id: r.id, code: "ENOENT", message: `no such directory: ${r.cwd}` })
  }
  let outputs: [number, number]
  try {
    outputs = openOutputs(r)
  } catch (e) {
    return send(failed(r.id, e, "EIO"))
  }
  let child: ReturnType<typeof spawn>
  // Node cannot make a namespace between fork and exec: unshare(1), sh and mount(8) make it (see MountNamespace).
  const ns = r.namespace === undefined ? undefined : MountNamespace.fromWire(r.namespace)
  const argv = ns === undefined ? r.argv : MountNamespace.wrap(ns.mode, ns.mounts, r.argv, r.env, ns.pinned, ns.view)
  try {
    child = spawn(argv[0]!, argv.slice(1), {
      cwd: r.cwd,
      env: r.env,
      detached: true,
      stdio: ["ignore", ...outputs]
    })
  } catch (e) {
    return send(failed(r.id, e, "EINVAL"))
  } finally {
    fs.closeSync(outputs[0])
    fs.closeSync(outputs[1])
  }
  const pid = child.pid
  child.once("error", (e) => send(failed(r.id, e, "EIO")))
  if (pid === undefined) return
  running.add(pid)
  child.once("spawn", () => send({ kind: "started", id: r.id, pid }))
  child.once("exit", (code, signal) => {
    running.delete(pid)
    send({ kind: "exited", id: r.id, code, signal, alone: groupGone(pid) })
  })
}

/** What a process mounted in its sandbox (as root) is not the sandbox's to delete: see `Mounts.ts`. */
const removeUnmounted = (target: string) => {
  let directory: boolean
  try {
    directory = fs.lstatSync(target).isDirectory()
  } catch (e) {
    if (errnoOf(e) === "ENOENT") return
    throw e
  }
  const mounted = directory ? mountUnder(target) : undefined
  if (mounted !== undefined) {
    const message = `a file system is mounted at ${mounted}: left in place, with what is under it`
    throw Object.assign(new Error(message), { code: "EBUSY" })
  }
  removeTree(target)
}

const remove = (r: Protocol.Remove) => {
  try {
    for (const target of r.paths) removeUnmounted(target)
    send({ kind: "removed", id: r.id })
  } catch (e) {
    send(failed(r.id, e, "EIO"))
  }
}

/** Requests read so far: a request is named by its line's number where its id cannot be read. */
let linesRead = 0

const onRequest = (line: string) => {
  const lineNumber = linesRead++
  const request = Protocol.decodeRequest(line)
  switch (request.kind) {
    case "spawn":
      return start(request)
    case "remove":
      return remove(request)
    case "arm":
      postMortem = request
      return
    case "disarm":
      postMortem = undefined
      return
    case "malformed":
      // Answered all the same, by its line (its id may be what is wrong): the engine fails what it wrote there.
      return send({ kind: "rejected", line: lineNumber, reason: request.reason })
  }
}

for (const signal of ["SIGINT", "SIGTERM", "SIGHUP"] as const) process.on(signal, () => undefined)
process.stdin.setEncoding("utf8")
process.stdin.on("data", Protocol.lineSplitter(onRequest))
process.stdin.on("end", endAll)
process.stdout.on("error", endAll)
