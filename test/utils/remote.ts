/**
 * The real remote-cache servers the tests run against, started by `scripts/remote/servers.sh` (by `.ci/run`, by hand,
 * or else by the global setup `test/remoteServers.ts`, which loads their `KILN_TEST_*` variables into every test
 * worker's environment), and the faults the tests inject into them. Plain functions (the global setup uses them too),
 * but for `killVictim`, an Effect that waits for the worker's death as the tests' other waits do.
 */
import { Effect, type Scope } from "effect"
import { execFile, execFileSync } from "node:child_process"
import * as fs from "node:fs"
import * as net from "node:net"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { promisify } from "node:util"
import { eventually } from "./child.js"

export const serversScript = path.resolve(
  path.dirname(fileURLToPath(import.meta.url)),
  "..",
  "..",
  "scripts",
  "remote",
  "servers.sh"
)

/** The servers' state directory (`KILN_REMOTE_DIR`, as `servers.sh` has it). */
export const remoteDir = (): string => process.env.KILN_REMOTE_DIR || "/tmp/kiln-remote-servers"

/** The `KEY=VALUE` lines `servers.sh start` wrote, or undefined when it is not running (`stop` removes them). */
export const readRemoteEnv = (file = path.join(remoteDir(), "env")): Record<string, string> | undefined => {
  let text: string
  try {
    text = fs.readFileSync(file, "utf8")
  } catch {
    return undefined
  }
  const env: Record<string, string> = {}
  for (const line of text.split("\n")) {
    const eq = line.indexOf("=")
    if (eq > 0) env[line.slice(0, eq)] = line.slice(eq + 1)
  }
  return env
}

/**
 * Whether a process is not yet dead. This machine's init reaps orphans late, and a JVM's main thread is a zombie
 * while its other threads still hold its sockets: a zombie whose threads are all gone is dead.
 */
const running = (pid: number): boolean => {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, "utf8")
    return !stat.slice(stat.lastIndexOf(")") + 2).startsWith("Z") || fs.readdirSync(`/proc/${pid}/task`).length > 1
  } catch {
    return false
  }
}

/** Whether `pid` is a live server of the instance in `dir` (its command line names `dir`). */
export const serverAlive = (pid: number, dir = remoteDir()): boolean => {
  try {
    return running(pid) && fs.readFileSync(`/proc/${pid}/cmdline`, "utf8").includes(dir)
  } catch {
    return false
  }
}

/** Every server's pid in the env file: one written by an older `servers.sh` lacks some (`start` then adds them). */
const SERVER_PIDS = [
  "KILN_TEST_REAPI_PID",
  "KILN_TEST_REAPI_TLS_PID",
  "KILN_TEST_REAPI_SANDBOX_PID",
  "KILN_TEST_REAPI_VICTIM_PID",
  "KILN_TEST_HTTP_PID",
  "KILN_TEST_BST_PID"
]

/**
 * The env file names every server, and they are all alive, the victim worker too: while a test has it killed, a run
 * that starts meanwhile has `servers.sh start` restart it.
 */
export const remoteEnvAlive = (env: Record<string, string>): boolean => {
  const pids = Object.entries(env).filter(([k]) => k.endsWith("_PID")).map(([, v]) => Number(v))
  return SERVER_PIDS.every((k) => k in env) && pids.every((pid) => serverAlive(pid, env.KILN_REMOTE_DIR))
}

/** Sets the env file's variables in this process's environment. */
export const loadRemoteEnv = (env: Record<string, string>): void => {
  for (const [k, v] of Object.entries(env)) process.env[k] = v
}

export interface RemoteServers {
  /**
   * Bazel 4.2.3's REAPI worker (CAS, ByteStream, ActionCache, Execution), plaintext: `grpc://127.0.0.1:PORT`. It
   * rejects a call without the `build.bazel.remote.execution.v2.requestmetadata-bin` header.
   */
  readonly reapiUrl: string
  readonly reapiPid: number
  /** The worker's on-disk store: `cas/<2 hex>/<sha256>`, `ac/<2 hex>/<sha256>` (see `blobPath`). */
  readonly reapiStoreDir: string
  /** A second worker, over TLS, that requires a client certificate: `grpcs://localhost:PORT`. */
  readonly reapiTlsUrl: string
  readonly reapiTlsPid: number
  /**
   * A worker that runs every action under Bazel's linux-sandbox, without network (`--sandboxing
   * --sandboxing_block_network`): `grpc://127.0.0.1:PORT`. An action sees the host file system read-only (`/tmp`
   * too) except its exec root, only a loopback interface, uid 0, and `BAZEL_REMOTE_PLATFORM` in its environment.
   */
  readonly reapiSandboxUrl: string
  readonly reapiSandboxPid: number
  /**
   * A plain worker of its own for tests that kill it (`killVictim`, `restartVictim`), so they never disturb the plain
   * worker every test file shares: `grpc://127.0.0.1:PORT`.
   */
  readonly victimUrl: string
  readonly victimPid: number
  /** The victim's on-disk store, laid out as `reapiStoreDir` (see `blobPath(hash, "victim")`). */
  readonly victimStoreDir: string
  /** PEM files: the CA that signed the servers' certificate (for localhost and 127.0.0.1) and the client's. */
  readonly tlsCa: string
  readonly tlsClientCert: string
  readonly tlsClientKey: string
  /** nginx as Bazel's HTTP cache: GET, HEAD and PUT of `[/prefix…]/ac/<sha256>` and `/cas/<sha256>`. */
  readonly httpUrl: string
  readonly httpPid: number
  /** nginx's data root: `[prefix…/]ac/<sha256>`, `cas/<sha256>`. */
  readonly httpDir: string
  /** The same cache over HTTPS, client certificate required (without one nginx answers HTTP 400). */
  readonly httpsUrl: string
  /**
   * BuildStream 1.6's bst-artifact-server, a strict CAS-only REAPI server: `grpc://127.0.0.1:PORT`. CAS and
   * ByteStream only: no ActionCache service (UNIMPLEMENTED), Capabilities with action cache updates disabled, batches
   * up to 1 MiB, ByteStream upload names with a UUID v4, and instance names refused in ByteStream resource names.
   */
  readonly bstUrl: string
  readonly bstPid: number
}

/** The servers, from the environment the global setup gave this worker; throws when they are not running. */
export const remoteServers = (): RemoteServers => {
  const env = process.env
  if (!env.KILN_TEST_REAPI_URL) {
    throw new Error(
      env.KILN_SKIP_REMOTE_SERVERS === "1"
        ? "this test needs the remote-cache servers, and KILN_SKIP_REMOTE_SERVERS=1 skipped them"
        : `the remote-cache servers are not running (no KILN_TEST_* variables): ` +
          `run \`bash scripts/remote/servers.sh start\``
    )
  }
  // A key the global setup did not load (servers.sh gained a server since this run began): from the env file.
  let file: Record<string, string> | undefined
  const get = (key: string): string => {
    const value = env[key] || (file ??= readRemoteEnv() ?? {})[key]
    if (!value) throw new Error(`${key} is not set: the remote-cache servers' env file is incomplete`)
    return value
  }
  return {
    reapiUrl: get("KILN_TEST_REAPI_URL"),
    reapiPid: Number(get("KILN_TEST_REAPI_PID")),
    reapiStoreDir: get("KILN_TEST_REAPI_CAS"),
    reapiTlsUrl: get("KILN_TEST_REAPI_TLS_URL"),
    reapiTlsPid: Number(get("KILN_TEST_REAPI_TLS_PID")),
    reapiSandboxUrl: get("KILN_TEST_REAPI_SANDBOX_URL"),
    reapiSandboxPid: Number(get("KILN_TEST_REAPI_SANDBOX_PID")),
    victimUrl: get("KILN_TEST_REAPI_VICTIM_URL"),
    victimPid: Number(get("KILN_TEST_REAPI_VICTIM_PID")),
    victimStoreDir: get("KILN_TEST_REAPI_VICTIM_CAS"),
    tlsCa: get("KILN_TEST_TLS_CA"),
    tlsClientCert: get("KILN_TEST_TLS_CLIENT_CERT"),
    tlsClientKey: get("KILN_TEST_TLS_CLIENT_KEY"),
    httpUrl: get("KILN_TEST_HTTP_URL"),
    httpPid: Number(get("KILN_TEST_HTTP_PID")),
    httpDir: get("KILN_TEST_HTTP_DIR"),
    httpsUrl: get("KILN_TEST_HTTPS_URL"),
    bstUrl: get("KILN_TEST_BST_URL"),
    bstPid: Number(get("KILN_TEST_BST_PID"))
  }
}

/** Where a blob is: the plain worker's on-disk CAS (`reapi`), the victim worker's, or nginx's `/cas/` (no prefix). */
export type BlobStore = "reapi" | "victim" | "http"

/** The file that holds a blob in one of the stores. */
export const blobPath = (hash: string, server: BlobStore = "reapi"): string => {
  const servers = remoteServers()
  return server === "http"
    ? path.join(servers.httpDir, "cas", hash)
    : path.join(server === "victim" ? servers.victimStoreDir : servers.reapiStoreDir, "cas", hash.slice(0, 2), hash)
}

const script = (args: ReadonlyArray<string>): void => {
  remoteServers()
  execFileSync("bash", [serversScript, ...args], { stdio: ["ignore", "ignore", "pipe"] })
}

/** Deletes a blob from the plain worker's CAS (or the victim's, or nginx's): an eviction. Its AC entries still hit. */
export const evictBlob = (hash: string, server: BlobStore = "reapi"): void => script(["evict", hash, server])

/**
 * Overwrites a blob with other bytes of the same size. The worker then fails a ByteStream Read of it with INTERNAL
 * (it checks on read); nginx serves the wrong bytes.
 */
export const corruptBlob = (hash: string, server: BlobStore = "reapi"): void => script(["corrupt", hash, server])

/** The victim worker's current pid, from the env file (`restartVictim` in another test worker may have changed it). */
const currentVictimPid = (): number => {
  const pid = Number(readRemoteEnv()?.KILN_TEST_REAPI_VICTIM_PID)
  if (!pid) {
    throw new Error(
      `the remote-cache servers are not running, or an older servers.sh started them ` +
        `(no KILN_TEST_REAPI_VICTIM_PID in ${
          path.join(remoteDir(), "env")
        }): run \`bash scripts/remote/servers.sh start\``
    )
  }
  return pid
}

/**
 * SIGKILLs the victim worker (`victimUrl`, never the shared plain worker) and resolves once it is dead. Other test
 * files may run meanwhile: use the victim only in tests that kill it, and `restartVictim()` after (in a finalizer).
 */
export const killVictim: Effect.Effect<void, Error> = Effect.suspend(() => {
  remoteServers()
  const pid = currentVictimPid()
  if (!serverAlive(pid)) return Effect.void
  process.kill(pid, "SIGKILL")
  return eventually(`the victim worker (pid ${pid}) dead after SIGKILL`, () => !running(pid))
})

/**
 * Starts the victim worker again, on the same port with the same on-disk CAS (a no-op when it runs), and resolves
 * once it serves; its new pid is in this process's `KILN_TEST_REAPI_VICTIM_PID`.
 */
export const restartVictim = async (): Promise<void> => {
  remoteServers()
  await promisify(execFile)("bash", [serversScript, "restart-worker", "victim"])
  process.env.KILN_TEST_REAPI_VICTIM_PID = String(currentVictimPid())
}

export interface Tarpit {
  readonly port: number
  /** `grpc://127.0.0.1:PORT` */
  readonly url: string
  /** `http://127.0.0.1:PORT` */
  readonly httpUrl: string
  /** How many connections it has accepted. */
  readonly accepted: () => number
  /** Drops every connection and stops listening. */
  readonly close: () => Promise<void>
}

/** A listener on 127.0.0.1 that accepts every connection and never answers: a hung server. */
export const tarpit = (): Promise<Tarpit> =>
  new Promise((resolve, reject) => {
    const sockets = new Set<net.Socket>()
    let accepted = 0
    const server = net.createServer((socket) => {
      accepted++
      sockets.add(socket)
      socket.on("error", () => {})
      socket.on("close", () => sockets.delete(socket))
    })
    server.on("error", reject)
    server.listen(0, "127.0.0.1", () => {
      const port = (server.address() as net.AddressInfo).port
      resolve({
        port,
        url: `grpc://127.0.0.1:${port}`,
        httpUrl: `http://127.0.0.1:${port}`,
        accepted: () => accepted,
        close: () =>
          new Promise<void>((done) => {
            for (const socket of sockets) socket.destroy()
            server.close(() => done())
          })
      })
    })
  })

/** A port on 127.0.0.1 that nothing listens on (it was free a moment ago): connections to it are refused. */
export const deadPort = (): Promise<number> =>
  new Promise((resolve, reject) => {
    const server = net.createServer()
    server.on("error", reject)
    server.listen(0, "127.0.0.1", () => {
      const port = (server.address() as net.AddressInfo).port
      server.close(() => resolve(port))
    })
  })

export interface Proxy {
  /** `grpc://127.0.0.1:PORT`, forwarding to the target. */
  readonly url: string
  /** How many connections it has accepted. */
  readonly accepted: () => number
  /** Breaks every connection open now (both ends); new ones are forwarded as before. */
  readonly cut: Effect.Effect<void>
}

/**
 * A TCP forwarder on 127.0.0.1 to `port`, whose connections a test can break: a network that drops a client's
 * streams while the server carries on. Closed with the scope.
 */
export const tcpProxy = (port: number): Effect.Effect<Proxy, Error, Scope.Scope> =>
  Effect.acquireRelease(
    Effect.async<{ server: net.Server; pairs: Set<[net.Socket, net.Socket]>; count: { n: number } }, Error>(
      (resume) => {
        const pairs = new Set<[net.Socket, net.Socket]>()
        const count = { n: 0 }
        const server = net.createServer((client) => {
          count.n++
          const upstream = net.connect(port, "127.0.0.1")
          const pair: [net.Socket, net.Socket] = [client, upstream]
          pairs.add(pair)
          const drop = () => {
            pairs.delete(pair)
            client.destroy()
            upstream.destroy()
          }
          client.on("error", drop).on("close", drop)
          upstream.on("error", drop).on("close", drop)
          client.pipe(upstream)
          upstream.pipe(client)
        })
        server.on("error", (e) => resume(Effect.fail(e)))
        server.listen(0, "127.0.0.1", () => resume(Effect.succeed({ server, pairs, count })))
      }
    ),
    ({ pairs, server }) =>
      Effect.async<void>((resume) => {
        for (const [a, b] of pairs) {
          a.destroy()
          b.destroy()
        }
        server.close(() => resume(Effect.void))
      })
  ).pipe(Effect.map(({ count, pairs, server }) => ({
    url: `grpc://127.0.0.1:${(server.address() as net.AddressInfo).port}`,
    accepted: () => count.n,
    cut: Effect.sync(() => {
      for (const [a, b] of [...pairs]) {
        a.destroy()
        b.destroy()
      }
    })
  })))
