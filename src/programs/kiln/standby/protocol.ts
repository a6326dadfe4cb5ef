/**
 * The standby engine's socket and what its client and it say.
 *
 * A `kiln run` that will run processes spends about as long loading the engine (the bundle, Effect, LMDB's module)
 * as a one-file edit's processes take. A standby is a kiln that has loaded it already and waits, on a socket in this
 * user's runtime directory. The client (the loader of the `kiln` the user started) sends its arguments, working
 * directory, environment, umask and what its stdout and stderr are; the standby takes all of them on and runs the
 * no-op check. A no-op it answers, and goes on waiting; a run that will run processes it becomes, and it is replaced by
 * a fresh standby at that run's end: a run never meets the module state another run left. What the run writes comes
 * back to the client, which writes it, and at the end its exit code.
 *
 * Plain code without Effect: the loader uses it before anything else is loaded.
 *
 * @internal
 */
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import * as OpenedEnvs from "../../../layers/store/OpenedEnvs.js"
import { nameHash } from "../../../os/LazyCrypto.js"
import { fixedSocketDirectory } from "../../../os/PrivateDir.js"
import * as Proc from "../../../os/Proc.js"

/** Set (to the socket's key) in a standby's environment, with `standby` as its command: what makes it one. */
export const SERVE_ENV = "KILN_STANDBY_SERVE"

/**
 * Set in a standby's environment by the run that starts it: that run's arguments and working directory (see
 * {@link Rehearsal}).
 */
export const REHEARSAL_ENV = "KILN_STANDBY_REHEARSAL"

/** Bytes of a rehearsal the standby takes at most: a run's arguments, never more. */
const MAX_REHEARSAL_BYTES = 64 * 1024

/**
 * The run a standby checks once, with its result dropped, before it listens: the run that started it, whose next run
 * is most likely the same command in the same workspace. The check's code is then compiled and its caches shaped for
 * that workspace when the next run comes, which a fresh standby's first check otherwise pays for (about as long again
 * as a warm one).
 */
export interface Rehearsal {
  readonly argv: ReadonlyArray<string>
  readonly cwd: string
  /** The store's environments that run opened: the standby opens them ahead of the next run (see `OpenedEnvs.ts`). */
  readonly stores: ReadonlyArray<OpenedEnvs.OpenedEnv>
}

/** A rehearsal as a standby's environment carries it, or undefined when it is absent, too long or malformed. */
export const parseRehearsal = (text: string | undefined): Rehearsal | undefined => {
  if (text === undefined || text.length > MAX_REHEARSAL_BYTES) return undefined
  try {
    const r = JSON.parse(text) as Record<string, unknown>
    // A list that is not one opens nothing ahead; the rehearsal is still made.
    const stores = OpenedEnvs.parse(r.stores) ?? []
    return Array.isArray(r.argv) && r.argv.every((a) => typeof a === "string") && typeof r.cwd === "string" &&
        path.isAbsolute(r.cwd)
      ? { argv: r.argv as Array<string>, cwd: r.cwd, stores }
      : undefined
  } catch {
    return undefined
  }
}

/**
 * Where the bundle's `main.ts` leaves its start instead of running, in a standby (`serve.ts` sets it before it loads
 * the bundle; the two meet through this global, as the loader and the bundle are apart).
 */
export const DEFERRED_MAIN = Symbol.for("kiln.standby.main")

/** What the bundle leaves at {@link DEFERRED_MAIN}: its start, and the standby's idle wait, an Effect of the bundle's. */
export interface DeferredMain {
  start?: () => void
  /** Calls `then` after `ms` unless the returned function cancels it first. */
  idle?: (ms: number, then: () => void) => () => void
  /** Opens the store's environments ahead of the next run (`store/OpenAhead.ts`). */
  openAhead?: (envs: ReadonlyArray<OpenedEnvs.OpenedEnv>) => void
  /** Closes those no run took. */
  closeAhead?: () => void
  /**
   * Does a restore on a throwaway store in a directory of its own under `parent` (`workspace/RestoreWarmUp.ts`), then
   * calls `then`, whether it succeeded or not.
   */
  warmUp?: (parent: string, then: () => void) => void
}

/**
 * Where a standby that took a run on leaves the run's early release (`serve.ts`), which the bundle calls once the run's
 * outcome is decided and said (`run/earlyRelease.ts`): the next standby is started and the client gets the exit code
 * and ends, while this process goes on closing what only makes the run's results durable (the store's syncs).
 */
export const RELEASE = Symbol.for("kiln.standby.release")

/** The release a standby leaves at {@link RELEASE}: sends `code` after all that was written, and ends the connection. */
export type Release = (code: number) => void

/** `off` turns standbys off: every run loads the engine itself, and none is started. */
export const SWITCH_ENV = "KILN_STANDBY"

/** How long an unused standby waits before it exits, in ms (default 30 minutes). */
export const IDLE_ENV = "KILN_STANDBY_IDLE_MS"

export const DEFAULT_IDLE_MS = 30 * 60_000

/**
 * How long a standby waits, with no run coming, before it rehearses again to watch a changed tree anew (see
 * `serve.ts`); the tests set it to 0, so that the run after an answer meets the tree watched.
 */
export const REWATCH_ENV = "KILN_STANDBY_REWATCH_MS"
export const DEFAULT_REWATCH_MS = 100

/**
 * How long a standby keeps the store's environments it opened ahead of a run, in ms, after it started or last
 * answered a run (default 10 minutes): then it closes them and holds no store while it waits on.
 */
export const STORE_HOLD_ENV = "KILN_STANDBY_STORE_MS"
export const DEFAULT_STORE_HOLD_MS = 10 * 60_000

/** Bytes of a request the standby reads at most: arguments and environment, never more. */
export const MAX_REQUEST_BYTES = 4 * 1024 * 1024

/** What the client's stdout or stderr is: the standby's streams say the same (a terminal's progress line, its width). */
export interface Output {
  readonly tty: boolean
  readonly columns?: number
}

/** What a run sends a standby: one line of JSON. */
export interface Request {
  readonly v: 1
  readonly argv: ReadonlyArray<string>
  readonly cwd: string
  readonly env: Record<string, string>
  readonly umask: number
  readonly stdout: Output
  readonly stderr: Output
}

/**
 * The standby's answers: it took the run over (`A`), or declined it (`D`, then a line saying why); then what the run
 * writes to stdout (`O`) and stderr (`E`), each a length (4 bytes) and the bytes, which the client writes to its own;
 * last the exit code (`X`, 4 bytes). The client writes the output itself, so that it goes exactly where the client's
 * would (a file's offset, a terminal, a socket), whatever the client's descriptors are.
 */
export const ACCEPTED = 0x41 // "A"
export const DECLINED = 0x44 // "D"
export const STDOUT = 0x4f // "O"
export const STDERR = 0x45 // "E"
export const EXITED = 0x58 // "X"

/** Bytes of output one frame carries at most: a larger write goes in several, and a client refuses a larger frame. */
export const MAX_FRAME_BYTES = 16 * 1024 * 1024

/** Output frames of `bytes`: each its kind, length and at most {@link MAX_FRAME_BYTES} of them. */
export const outputFrame = (kind: typeof STDOUT | typeof STDERR, bytes: Uint8Array): Buffer => {
  const frames: Array<Uint8Array> = []
  for (let at = 0; at === 0 || at < bytes.length; at += MAX_FRAME_BYTES) {
    const part = bytes.subarray(at, at + MAX_FRAME_BYTES)
    const head = Buffer.alloc(5)
    head[0] = kind
    head.writeUInt32BE(part.length, 1)
    frames.push(head, part)
  }
  return Buffer.concat(frames)
}

/** The exit frame. */
export const exitFrame = (code: number): Buffer => {
  const bytes = Buffer.alloc(5)
  bytes[0] = EXITED
  bytes.writeInt32BE(code, 1)
  return bytes
}

/** Signals the client passes on, one byte each, after the standby took its run over. */
export const SIGNALS: ReadonlyArray<NodeJS.Signals> = ["SIGINT", "SIGTERM", "SIGHUP"]

/**
 * Whether standbys are on for this environment: only in a user's session, which has a runtime directory
 * (`$XDG_RUNTIME_DIR`, made at login and removed at logout: a standby outlives no session); not on CI (a `CI`
 * variable: a machine that runs one build has nothing to keep a standby for); not when turned off.
 */
export const enabled = (env: NodeJS.ProcessEnv): boolean =>
  env[SWITCH_ENV] !== "off" && (env.CI === undefined || env.CI === "" || env.CI === "false") &&
  env.XDG_RUNTIME_DIR !== undefined && path.isAbsolute(env.XDG_RUNTIME_DIR)

/**
 * Variables a standby starts with, besides kiln's own: where its files are (home, runtime, cache, temp), and what
 * Node and OpenSSL read once at a process's start (a run cannot give those to a standby later).
 */
const STANDBY_KEEPS = new Set([
  "HOME",
  "PATH",
  "TMPDIR",
  "XDG_RUNTIME_DIR",
  "XDG_CACHE_HOME",
  "NODE_OPTIONS",
  "NODE_EXTRA_CA_CERTS",
  "NODE_ICU_DATA",
  "UV_THREADPOOL_SIZE",
  "UV_USE_IO_URING",
  "SSL_CERT_FILE",
  "SSL_CERT_DIR",
  "OPENSSL_CONF",
  "TZ",
  "LANG",
  "LC_ALL"
])

/**
 * The environment a standby is started with, from the run that starts it. Each run it serves brings its own (the
 * request's), so it needs none of the starting run's variables: and `/proc/<pid>/environ` shows the environment a
 * process was started with for as long as it lives (a waiting standby: up to its idle time), so a token the starting
 * run had (a CI secret, a cloud key, a remote's URL with its credentials) would stay readable there. Only kiln's own
 * settings (a remote's, which may carry credentials, left out) and the start-up variables above are kept.
 */
export const standbyEnvOf = (env: NodeJS.ProcessEnv): Record<string, string> => {
  const kept: Record<string, string> = {}
  for (const [name, value] of Object.entries(env)) {
    if (value === undefined) continue
    const kilns = name.startsWith("KILN_") && !name.startsWith("KILN_REMOTE_")
    if (kilns || STANDBY_KEEPS.has(name)) kept[name] = value
  }
  return kept
}

/** The file beside the bundle that names the build: a SHA-256 of the bundle and the loader, written by the build. */
export const BUILD_ID_FILE = "build-id"

/** The build's id (`dist/build-id`), or undefined when there is none that reads as one. */
const buildIdOf = (bundle: string): string | undefined => {
  try {
    const text = fs.readFileSync(path.join(path.dirname(bundle), BUILD_ID_FILE), "latin1")
    return /^[0-9a-f]{64}\n?$/.test(text) ? text.slice(0, 64) : undefined
  } catch {
    return undefined
  }
}

const NAMESPACES = ["cgroup", "ipc", "mnt", "net", "pid", "user", "uts"] as const

/** The lines of `/proc/self/status` that say what a process may do and see: its ids, groups, capabilities, CPUs. */
const STATUS_FIELDS = [
  "Uid:",
  "Gid:",
  "Groups:",
  "NoNewPrivs:",
  "Seccomp:",
  "CapInh:",
  "CapPrm:",
  "CapEff:",
  "CapBnd:",
  "CapAmb:",
  "Cpus_allowed_list:"
] as const

/** Where `/proc/self/limits` has a limit's soft value (after the name's 25 characters and a space; 20 wide). */
const SOFT_COLUMN = [26, 46] as const

/**
 * What a run inherits from the process that starts it, beyond what a request carries (arguments, directory,
 * environment, umask): its namespaces and root (what paths mean: a container's or a toolbox's view of the same
 * runtime directory), its resource limits, ids, groups, capabilities, seccomp and `no_new_privs`, allowed CPUs, cgroup
 * and nice value. A standby is the process that runs the run, so it must have been started with all of these alike;
 * they go into its key. The soft limit of open files is left out: Node raises it to the hard limit as it starts, in the
 * loader and the standby alike. `undefined` when any cannot be read. Read from `/proc/self` as text, as the native
 * client reads it (`native/client.c`, `context`).
 */
export const contextOf = (): string | undefined => {
  try {
    const namespaces = NAMESPACES.map((ns) => fs.readlinkSync(`/proc/self/ns/${ns}`))
    const root = fs.statSync("/proc/self/root", { bigint: true })
    const limits = fs.readFileSync("/proc/self/limits", "utf8").split("\n").map((line) =>
      line.startsWith("Max open files ") && line.length >= SOFT_COLUMN[1]
        ? line.slice(0, SOFT_COLUMN[0]) + " ".repeat(SOFT_COLUMN[1] - SOFT_COLUMN[0]) + line.slice(SOFT_COLUMN[1])
        : line
    ).join("\n")
    const status = fs.readFileSync("/proc/self/status", "utf8").split("\n").filter((line) =>
      STATUS_FIELDS.some((field) => line.startsWith(field))
    )
    const cgroup = fs.readFileSync("/proc/self/cgroup", "utf8")
    return [...namespaces, `${root.dev}:${root.ino}`, limits, ...status, cgroup, String(os.getPriority())].join("\n")
  } catch {
    return undefined
  }
}

/**
 * The key of the standby that may serve a run of `bundle` under `node` (a real path, as `process.execPath` is) with
 * `execArgv` and `nodeOptions`, from a process in `context` ({@link contextOf}): the same build of kiln (its id, and the
 * bundle's path, size and time to the nanosecond) and the same Node binary (its path, size and time), the same
 * options, the same process context. A standby of another differs in what it would run, or how, and is not asked. The
 * build's id tells a new build of the same size from the old one, whatever time the package manager gave both files
 * (npm gives every file one). Integers, paths and `/proc` text only, so that the native client (`native/client.c`)
 * makes the same key without Node.
 */
export const keyOf = (
  bundle: string,
  node: string = process.execPath,
  execArgv: ReadonlyArray<string> = process.execArgv,
  nodeOptions: string = process.env.NODE_OPTIONS ?? "",
  context: string | undefined = contextOf()
): string | undefined => {
  const identity = (file: string) => {
    const st = fs.statSync(file, { bigint: true })
    return `${file}:${st.size}:${st.mtimeNs}`
  }
  let build: string
  let runtime: string
  try {
    build = identity(bundle)
    runtime = identity(node)
  } catch {
    return undefined
  }
  const buildId = buildIdOf(bundle)
  if (buildId === undefined || context === undefined) return undefined
  return nameHash([build, runtime, ...execArgv, nodeOptions, buildId, context].join("\0"))
}

/**
 * The standby's socket for `key`, in this user's runtime directory; undefined where this user has none that every
 * process of theirs finds (another user took the last candidate): a client and its standby would never meet, and
 * each run would leave a standby of its own.
 */
export const socketOf = (key: string, env: NodeJS.ProcessEnv = process.env): string | undefined => {
  const dir = fixedSocketDirectory(env)
  return dir === undefined ? undefined : path.join(dir, `standby-${key}.sock`)
}

/** Whether `pid` is a standby that runs: its command line ends with `standby` (`kiln standby`, as `client.ts` starts it). */
export const isStandby = (pid: number): boolean => Proc.argvOf(pid)?.at(-1) === "standby" && Proc.isAlive(pid)

/** The standbys that run now, those `where` keeps (by their environment, their command line). */
export const standbyPids = (where: (pid: number) => boolean = () => true): Array<number> =>
  (Proc.pids() ?? []).map(Number).filter((pid) => isStandby(pid) && where(pid))

/** A request as the standby reads it: every field checked, or a reason. */
export const parseRequest = (line: string): Request | string => {
  let value: unknown
  try {
    value = JSON.parse(line)
  } catch {
    return "the request is not JSON"
  }
  if (typeof value !== "object" || value === null) return "the request is not an object"
  const r = value as Record<string, unknown>
  if (r.v !== 1) return "the request is of another version"
  if (!Array.isArray(r.argv) || !r.argv.every((a) => typeof a === "string")) return "the request's argv is invalid"
  if (typeof r.cwd !== "string" || !path.isAbsolute(r.cwd)) return "the request's cwd is invalid"
  if (typeof r.umask !== "number" || !Number.isInteger(r.umask) || r.umask < 0 || r.umask > 0o777) {
    return "the request's umask is invalid"
  }
  const env = r.env
  if (
    typeof env !== "object" || env === null || Array.isArray(env) ||
    !Object.entries(env).every(([k, v]) => typeof v === "string" && k !== "" && !k.includes("=") && !k.includes("\0"))
  ) return "the request's env is invalid"
  const stdout = outputOf(r.stdout)
  const stderr = outputOf(r.stderr)
  if (stdout === undefined || stderr === undefined) return "the request's outputs are invalid"
  return {
    v: 1,
    stdout,
    stderr,
    argv: r.argv as Array<string>,
    cwd: r.cwd,
    env: env as Record<string, string>,
    umask: r.umask
  }
}

const outputOf = (value: unknown): Output | undefined => {
  if (typeof value !== "object" || value === null) return undefined
  const o = value as Record<string, unknown>
  if (typeof o.tty !== "boolean") return undefined
  if (o.columns === undefined) return { tty: o.tty }
  return typeof o.columns === "number" && Number.isInteger(o.columns) && o.columns > 0 && o.columns < 100_000
    ? { tty: o.tty, columns: o.columns }
    : undefined
}
