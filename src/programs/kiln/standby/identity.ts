/**
 * A standby taking on the identity of the run it is asked for: its working directory, environment, umask and
 * arguments, and stdout and stderr that send what is written to the client (see `protocol.ts`), looking like the
 * client's own (a terminal and its width, or not); and giving them back after a no-op it answered, to wait for the
 * next run as it was.
 *
 * @internal
 */
import type * as NodeConsole from "node:console"
import type * as Net from "node:net"
import type * as Stream from "node:stream"
import * as Protocol from "./protocol.js"

/** The modules only a standby needs, required when it first takes a run on (the loader's start has no use for them). */
export interface Modules {
  readonly Console: typeof NodeConsole.Console
  readonly Writable: typeof Stream.Writable
}

export const modulesOf = (require: NodeJS.Require): Modules => ({
  Console: (require("node:console") as typeof NodeConsole).Console,
  Writable: (require("node:stream") as typeof Stream).Writable
})

/** A stream whose writes go to the client in frames of `kind`; what is still queued is the connection's. */
const relayed = (
  { Writable }: Modules,
  conn: Net.Socket,
  kind: typeof Protocol.STDOUT | typeof Protocol.STDERR,
  output: Protocol.Output
): NodeJS.WriteStream => {
  const stream = new Writable({
    write(chunk: Buffer, _encoding, done) {
      // Once the run has released its client (see `Protocol.RELEASE`), there is no one to say it to.
      if (!conn.writableEnded) conn.write(Protocol.outputFrame(kind, chunk))
      done()
    }
  }) as unknown as NodeJS.WriteStream
  Object.defineProperty(stream, "writableLength", { get: () => conn.writableLength })
  stream.isTTY = output.tty as true
  if (output.columns !== undefined) stream.columns = output.columns
  return stream
}

const setEnv = (env: Record<string, string>) => {
  for (const name of Object.keys(process.env)) if (!(name in env)) delete process.env[name]
  Object.assign(process.env, env)
}

const envNow = (): Record<string, string> =>
  Object.fromEntries(Object.entries(process.env).filter((e): e is [string, string] => e[1] !== undefined))

/** The variables the loader sets in its own environment, unless they are set, before anything runs (`loader.ts`). */
const LOADER_ENV = ["LIBC", "MSGPACKR_NATIVE_ACCELERATION_DISABLED"] as const

/** Gives the standby back what it had before {@link assume}. */
export type Restore = () => void

/** Becomes the run `request` asks for; throws, having changed nothing, when it cannot (its directory is gone). */
export const assume = (modules: Modules, conn: Net.Socket, request: Protocol.Request, cli: string): Restore => {
  const cwd = process.cwd()
  process.chdir(request.cwd)
  const before = {
    stdout: Object.getOwnPropertyDescriptor(process, "stdout"),
    stderr: Object.getOwnPropertyDescriptor(process, "stderr"),
    console: globalThis.console,
    env: envNow(),
    umask: process.umask(),
    argv: process.argv
  }
  const stdout = relayed(modules, conn, Protocol.STDOUT, request.stdout)
  const stderr = relayed(modules, conn, Protocol.STDERR, request.stderr)
  Object.defineProperty(process, "stdout", { configurable: true, enumerable: true, get: () => stdout })
  Object.defineProperty(process, "stderr", { configurable: true, enumerable: true, get: () => stderr })
  globalThis.console = new modules.Console({ stdout, stderr })
  setEnv(request.env)
  // What the loader sets before it runs is the same for the standby, the same build on the same Node: where kiln is
  // always (a client's inherited value may be another kiln's), the C library and lmdb's decoder where the client did
  // not set them (the native one starts no loader).
  process.env.KILN_CLI = cli
  for (const name of LOADER_ENV) {
    if (request.env[name] === undefined && before.env[name] !== undefined) {
      process.env[name] = before.env[name]
    }
  }
  process.umask(request.umask)
  process.argv = [process.execPath, cli, ...request.argv]
  return () => {
    if (before.stdout !== undefined) Object.defineProperty(process, "stdout", before.stdout)
    if (before.stderr !== undefined) Object.defineProperty(process, "stderr", before.stderr)
    globalThis.console = before.console
    setEnv(before.env)
    process.umask(before.umask)
    process.argv = before.argv
    process.chdir(cwd)
    process.exitCode = undefined
  }
}
