/**
 * kiln's runtime directory, where its sockets and their logs go (the sandboxer's, the standby engine's): private to
 * this user, where no other user can have made it first. Plain code without Effect: the CLI's loader finds a standby
 * engine here before anything else is loaded.
 *
 * @internal
 */
import * as fs from "node:fs"
import * as path from "node:path"
import { cacheDir } from "./CacheDir.js"
import * as PrivateDir from "./PrivateDir.js"

/** `sockaddr_un.sun_path` is 108 bytes on Linux, NUL included. @internal */
export const MAX_SOCKET_PATH = 107

/**
 * The directory, made if missing: the first of `$XDG_RUNTIME_DIR/kiln` (the user's own by its definition, and
 * checked), `$KILN_RUNTIME_DIR`, `$XDG_CACHE_HOME/kiln/run` (`~/.cache/kiln/run`, beside the store and sandbox roots),
 * `/tmp/kiln-<uid>` that is or can be made so and whose socket paths fit in 107 bytes; else a fresh
 * `/tmp/kiln-<uid>-XXXXXX` of this process's own. A directory another user made first is passed over, never a reason
 * a socket cannot be made. Never under the workspace, whose path can be arbitrarily long.
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
    // Whatever makes a socket there says why it cannot.
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
