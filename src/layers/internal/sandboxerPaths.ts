/**
 * Where a sandboxer's socket and log go, and the hand-over of a sandboxer started early. Plain code: the CLI's loader
 * uses it before the engine is loaded.
 *
 * A run that will start processes needs the sandboxer, and a sandboxer's start-up is a whole Node start plus the
 * bundle (~150 ms) that the first process waited for. So when the loader sees that a `kiln run` will not be answered
 * from the run memo, it starts a "warm" sandboxer at once: the same command the engine would run, except that it
 * loads the bundle and then waits for the rest of its arguments (the store settings, the parent's identity), which
 * only the engine knows, on its stdin. The engine's Sandboxer takes it over on first use instead of spawning one; a
 * warm sandboxer nobody takes sees its stdin end when the engine exits, and exits too.
 *
 * @internal
 */
import type { ChildProcess, spawn as Spawn } from "node:child_process"
import { randomBytes } from "node:crypto"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"

/** `sockaddr_un.sun_path` is 108 bytes on Linux, NUL included. @internal */
export const MAX_SOCKET_PATH = 107

/**
 * A directory for sandboxer sockets: `$XDG_RUNTIME_DIR/kiln`, or a short per-user temp dir when that is unset or
 * too long. Never under the store or the workspace, whose paths can be arbitrarily long.
 *
 * @internal
 */
export const socketDirectory = (env: NodeJS.ProcessEnv = process.env): string => {
  const uid = typeof process.getuid === "function" ? process.getuid() : 0
  const candidates = [
    ...(env.XDG_RUNTIME_DIR !== undefined && path.isAbsolute(env.XDG_RUNTIME_DIR)
      ? [path.join(env.XDG_RUNTIME_DIR, "kiln")]
      : []),
    path.join(os.tmpdir(), `kiln-${uid}`),
    `/tmp/kiln-${uid}`
  ]
  return candidates.find((d) => d.length + 40 <= MAX_SOCKET_PATH) ?? `/tmp/kiln-${uid}`
}

/** A fresh socket path for this engine process: its pid plus a random suffix. @internal */
export const socketPath = (dir: string): string =>
  path.join(dir, `sb-${process.pid}-${randomBytes(4).toString("hex")}.sock`)

/** @internal */
export const logPathOf = (socket: string): string => socket.replace(/\.sock$/, ".log")

/** A private directory of this user's (sockets must not be reachable by others). @internal */
export const ensurePrivateDir = (dir: string): void => {
  // One level at a time: Node 20's recursive mkdir spins forever under paths that refuse new entries (/proc).
  const missing: Array<string> = []
  for (let d = path.resolve(dir); !fs.existsSync(d); d = path.dirname(d)) {
    missing.push(d)
    if (path.dirname(d) === d) break
  }
  for (const d of missing.reverse()) {
    try {
      fs.mkdirSync(d, { mode: 0o700 })
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== "EEXIST") throw e
    }
  }
  const st = fs.statSync(dir)
  const uid = typeof process.getuid === "function" ? process.getuid() : st.uid
  if (st.uid !== uid) throw new Error(`${dir} belongs to another user`)
}

/**
 * The arguments every sandboxer gets first, on its command line, where tools (and people) look for its socket and
 * its parent; the rest follow there too, or on stdin for a warm one.
 */
export const leadingArgs = (socket: string): Array<string> => [
  "sandboxer",
  "--socket",
  socket,
  "--parent-pipe",
  "--parent-pid",
  String(process.pid)
]

/** Set in a warm sandboxer's environment: read the rest of the arguments from stdin. @internal */
export const AWAIT_ARGS = "KILN_AWAIT_ARGS"

/** @internal */
export interface Warm {
  readonly child: ChildProcess
  readonly socket: string
  readonly log: string
  readonly dir: string
  /** `node` and the CLI script it runs. */
  readonly command: ReadonlyArray<string>
}

const KEY = Symbol.for("kiln.warmSandboxer")

/**
 * Starts a warm sandboxer for this process (see above). Never throws: without one, the engine spawns its own.
 * `spawn` is passed in, so that a run answered from the memo never loads `node:child_process`.
 *
 * @internal
 */
export const startWarm = (
  spawn: typeof Spawn,
  command: ReadonlyArray<string>,
  env: NodeJS.ProcessEnv = process.env
): void => {
  try {
    const dir = socketDirectory(env)
    const socket = socketPath(dir)
    if (socket.length > MAX_SOCKET_PATH) return
    ensurePrivateDir(dir)
    const log = logPathOf(socket)
    const logFd = fs.openSync(log, "a", 0o600)
    let child: ChildProcess
    try {
      child = spawn(command[0]!, [...command.slice(1), ...leadingArgs(socket)], {
        stdio: ["pipe", "pipe", logFd],
        detached: true,
        env: { ...env, [AWAIT_ARGS]: log }
      })
    } finally {
      fs.closeSync(logFd)
    }
    // Its failures are the engine's to see when it takes it over (an exit, a write that fails): none may throw here.
    child.on("error", () => undefined)
    child.stdin?.on("error", () => undefined)
    // Until the engine takes it over, it must not keep this process alive.
    child.unref()
    for (const s of [child.stdin, child.stdout]) (s as unknown as { unref?: () => void } | null)?.unref?.()
    ;(globalThis as Record<symbol, unknown>)[KEY] = { child, socket, log, dir, command } satisfies Warm
  } catch {
    // No warm sandboxer: the engine starts one when it needs it.
  }
}

/** The warm sandboxer, once: to the first caller whose socket directory and command are its own. @internal */
export const takeWarm = (dir: string, command: ReadonlyArray<string>): Warm | undefined => {
  const g = globalThis as Record<symbol, unknown>
  const warm = g[KEY] as Warm | undefined
  if (warm === undefined) return undefined
  delete g[KEY]
  const usable = warm.dir === dir && warm.command.length === command.length &&
    warm.command.every((c, i) => c === command[i]) && warm.child.exitCode === null && warm.child.signalCode === null
  if (usable) return warm
  // Not for this engine: close its stdin, and it exits.
  warm.child.stdin?.destroy()
  return undefined
}

/**
 * In a warm sandboxer, before the CLI runs: waits for one line on stdin, a JSON array of the remaining arguments,
 * and appends them to `process.argv`. When stdin ends first (the engine never needed it, or died), removes its log
 * and exits.
 *
 * @internal
 */
export const awaitArgs = (then: () => void): void => {
  const log = process.env[AWAIT_ARGS]
  delete process.env[AWAIT_ARGS]
  let buffered = ""
  const onData = (chunk: Buffer) => {
    buffered += chunk.toString("utf8")
    const nl = buffered.indexOf("\n")
    if (nl === -1) return
    process.stdin.off("data", onData)
    process.stdin.off("end", onEnd)
    process.stdin.pause()
    process.argv.push(...(JSON.parse(buffered.slice(0, nl)) as Array<string>))
    then()
  }
  const onEnd = () => {
    if (log !== undefined && log !== "") fs.rmSync(log, { force: true })
    process.exit(0)
  }
  process.stdin.on("data", onData)
  process.stdin.on("end", onEnd)
}
