/**
 * The client's side of a standby engine (see `protocol.ts`): the loader of a `kiln run` asks the standby of its build
 * to take the run on (no-op check included), writes what the run writes to its own stdout and stderr, passes its
 * signals on, and exits with the run's code. Anything short of the standby taking the run on (none there, one of
 * another build, a declined request, a standby that ended first) falls back to the loader's own path, exactly as
 * without standbys; a run that loaded the engine itself starts a standby for the next run at its end.
 *
 * @internal
 */
import type { spawn as Spawn } from "node:child_process"
import * as fs from "node:fs"
import type * as Net from "node:net"
import * as OpenedEnvs from "../../../layers/store/OpenedEnvs.js"
import * as Protocol from "./protocol.js"

/** Bytes of a declining standby's reason the client reads at most. */
const MAX_REASON_BYTES = 4096

const debug = (line: string) => {
  if (process.env.KILN_STANDBY_DEBUG === "1") {
    process.stderr.write(`kiln: standby: ${line} (${Math.round(performance.now())} ms)\n`)
  }
}

/** What a descriptor is, as the standby's stream of it says: a terminal (and its width) or not. */
const outputOf = (stream: NodeJS.WriteStream): Protocol.Output =>
  stream.isTTY === true && typeof stream.columns === "number" ? { tty: true, columns: stream.columns } : {
    tty: false
  }

/** The key of the standby this run may use, or undefined when standbys are off for it. */
export const usableKey = (bundle: string): string | undefined => {
  if (!Protocol.enabled(process.env)) return undefined
  const key = Protocol.keyOf(bundle)
  return key !== undefined && Protocol.socketOf(key) !== undefined ? key : undefined
}

/**
 * Starts a standby for `key` (detached, its own session, at the file system's root so that it holds no directory of
 * the user's), which rehearses `rehearsal` (the run that starts it) before it listens, and opens the store's
 * environments this process opened ahead of the next run. One that finds another already serving exits at once.
 */
export const startStandby = (
  spawn: typeof Spawn,
  cli: string,
  key: string,
  rehearsal: Pick<Protocol.Rehearsal, "argv" | "cwd">
): void => {
  try {
    const child = spawn(process.execPath, [...process.execArgv, cli, "standby"], {
      detached: true,
      stdio: "ignore",
      cwd: "/",
      env: {
        ...Protocol.standbyEnvOf(process.env),
        [Protocol.SERVE_ENV]: key,
        [Protocol.REHEARSAL_ENV]: JSON.stringify(
          {
            argv: rehearsal.argv,
            cwd: rehearsal.cwd,
            stores: OpenedEnvs.openedHere()
          } satisfies Protocol.Rehearsal
        )
      }
    })
    child.on("error", () => undefined)
    child.unref()
  } catch {
    // The next run loads the engine itself.
  }
}

/**
 * Hands this run (`argv`, after `node cli.js`) to the standby of `key`, or calls `fallback` (once) when none takes it:
 * right away when there is no socket, else when the standby refuses or is gone.
 */
export const delegate = (
  net: typeof Net,
  key: string,
  argv: ReadonlyArray<string>,
  fallback: () => void
): void => {
  const socket = Protocol.socketOf(key)
  if (socket === undefined || !fs.existsSync(socket)) {
    debug("none waiting")
    return fallback()
  }
  let state: "asking" | "taken" | "ended" | "fellBack" = "asking"
  const fall = (why: string) => {
    if (state !== "asking") return
    state = "fellBack"
    debug(why)
    conn.destroy()
    fallback()
  }
  const conn = net.createConnection(socket)
  conn.on("error", (e) => fall(`cannot reach it: ${e.message}`))
  conn.on("connect", () => {
    const request: Protocol.Request = {
      v: 1,
      argv,
      cwd: process.cwd(),
      env: Object.fromEntries(Object.entries(process.env).filter((e): e is [string, string] => e[1] !== undefined)),
      umask: process.umask(),
      stdout: outputOf(process.stdout),
      stderr: outputOf(process.stderr)
    }
    conn.write(`${JSON.stringify(request)}\n`)
  })
  let pending: Buffer = Buffer.alloc(0)
  // The frames after `A`: output to write here, then the exit code.
  const frames = () => {
    while (pending.length >= 5) {
      const kind = pending[0]
      if (kind === Protocol.EXITED) {
        debug("the run ended")
        process.exitCode = pending.readInt32BE(1)
        state = "ended"
        for (const signal of Protocol.SIGNALS) process.removeAllListeners(signal)
        conn.destroy()
        return
      }
      const length = pending.readUInt32BE(1)
      if (kind !== Protocol.STDOUT && kind !== Protocol.STDERR) return lost("sent a frame it does not know")
      // Held until it is whole: never more than a frame a standby sends.
      if (length > Protocol.MAX_FRAME_BYTES) return lost(`sent a frame of ${length} bytes, more than any it sends`)
      if (pending.length < 5 + length) return
      ;(kind === Protocol.STDOUT ? process.stdout : process.stderr).write(pending.subarray(5, 5 + length))
      pending = pending.subarray(5 + length)
    }
  }
  const lost = (why: string) => {
    state = "ended"
    process.stderr.write(`kiln: the standby engine that took this run on ${why}\n`)
    process.exitCode = 1
    conn.destroy()
  }
  conn.on("data", (chunk: Buffer) => {
    pending = pending.length === 0 ? chunk : Buffer.concat([pending, chunk])
    if (state === "asking") {
      if (pending[0] === Protocol.DECLINED) {
        const end = pending.indexOf(10)
        if (end !== -1) fall(`declined: ${pending.subarray(1, end).toString("utf8")}`)
        // A reason is a line: one without its end in sight is not a standby's.
        else if (pending.length > MAX_REASON_BYTES) fall("an answer it does not know")
        return
      }
      if (pending[0] !== Protocol.ACCEPTED) return fall("an answer it does not know")
      state = "taken"
      debug("taken on")
      pending = pending.subarray(1)
      Protocol.SIGNALS.forEach((signal, i) => process.on(signal, () => conn.write(Buffer.from([i + 1]))))
    }
    if (state === "taken") frames()
  })
  conn.on("close", () => {
    if (state === "asking") return fall("it closed the connection")
    // A standby that took the run on and ended without its exit code crashed: the run's outcome is unknown.
    if (state === "taken") lost("ended before the run did")
  })
}
