/**
 * Where a sandboxer's socket and log go.
 *
 * @internal
 */
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
 * its parent; the rest follow.
 */
export const leadingArgs = (socket: string): Array<string> => [
  "sandboxer",
  "--socket",
  socket,
  "--parent-pipe",
  "--parent-pid",
  String(process.pid)
]
