/**
 * Where a sandboxer's socket and log go.
 *
 * @internal
 */
import { randomBytes } from "node:crypto"
import * as path from "node:path"
import * as PrivateDir from "../../../os/PrivateDir.js"

export { fixedSocketDirectory, freshSocketDirectory, MAX_SOCKET_PATH, socketDirectory } from "../../../os/PrivateDir.js"

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
