/**
 * Where a sandboxer's socket and log go.
 *
 * @internal
 */
import { randomBytes } from "node:crypto"
import * as fs from "node:fs"
import * as path from "node:path"
import { cacheDir } from "../../../os/CacheDir.js"
import * as PrivateDir from "../../../os/PrivateDir.js"

/** `sockaddr_un.sun_path` is 108 bytes on Linux, NUL included. @internal */
export const MAX_SOCKET_PATH = 107

/**
 * A directory for sandboxer sockets, made if missing, private to this user, where no other user can have made it
 * first: the first of `$XDG_RUNTIME_DIR/kiln` (the user's own by its definition, and checked), `$KILN_RUNTIME_DIR`,
 * `$XDG_CACHE_HOME/kiln/run` (`~/.cache/kiln/run`, beside the store and sandbox roots), `/tmp/kiln-<uid>` that is
 * or can be made so and whose socket paths fit in 107 bytes; else a fresh `/tmp/kiln-<uid>-XXXXXX` of this process's
 * own. A directory another user made first is passed over, never a reason the sandboxer cannot start. Never under
 * the workspace, whose path can be arbitrarily long.
 *
 * @internal
 */
export const socketDirectory = (env: NodeJS.ProcessEnv = process.env): string => {
  const uid = typeof process.getuid === "function" ? process.getuid() : 0
  const fits = (d: string) => d.length + 40 <= MAX_SOCKET_PATH
  const xdg = env.XDG_RUNTIME_DIR
  const candidates = [
    ...(xdg !== undefined && path.isAbsolute(xdg) && isPrivate(xdg) ? [path.join(xdg, "kiln")] : []),
    cacheDir("run", "KILN_RUNTIME_DIR", env),
    `/tmp/kiln-${uid}`
  ].filter(fits)
  const usable = candidates.find((d) => {
    try {
      return PrivateDir.ensure(d, "own") === undefined
    } catch {
      return false
    }
  })
  if (usable !== undefined) return usable
  try {
    return fs.mkdtempSync(`/tmp/kiln-${uid}-`)
  } catch {
    // Launching the sandboxer there says why it cannot be used.
    return candidates[0] ?? `/tmp/kiln-${uid}`
  }
}

const isPrivate = (dir: string): boolean => {
  try {
    return fs.statSync(dir).isDirectory() && PrivateDir.inspect(dir, "own") === undefined
  } catch {
    return false
  }
}

/** A fresh socket path for this engine process: its pid plus a random suffix. @internal */
export const socketPath = (dir: string): string =>
  path.join(dir, `sb-${process.pid}-${randomBytes(4).toString("hex")}.sock`)

/** @internal */
export const logPathOf = (socket: string): string => socket.replace(/\.sock$/, ".log")

/** A private directory of this user's (sockets must not be reachable by others), made if missing. @internal */
export const ensurePrivateDir = (dir: string): void => PrivateDir.ensureOrThrow("runtime directory", dir, "own")

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
