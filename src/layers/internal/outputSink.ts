/**
 * Collects a child's stdout or stderr with bounded memory: chunks stay in memory up to a limit, and beyond it the
 * whole stream spills into a temp file that the store then ingests by streaming.
 *
 * @internal
 */
import { Deferred, Effect, FiberId } from "effect"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import type { Readable } from "node:stream"

/** @internal */
export const MEMORY_LIMIT = 4 * 1024 * 1024

/** @internal */
export interface Sink {
  readonly stream: Readable
  readonly done: Deferred.Deferred<void>
  chunks: Array<Buffer>
  size: number
  file: string | undefined
  fd: number | undefined
  error: unknown
}

/** @internal */
export const collect = (stream: Readable, name: string): Sink => {
  const sink: Sink = {
    stream,
    done: Deferred.unsafeMake<void>(FiberId.none),
    chunks: [],
    size: 0,
    file: undefined,
    fd: undefined,
    error: undefined
  }
  stream.on("data", (chunk: Buffer) => {
    try {
      sink.size += chunk.length
      if (sink.fd === undefined && sink.size > MEMORY_LIMIT) {
        sink.file = path.join(os.tmpdir(), `kiln-${name}-${process.pid}-${Math.random().toString(36).slice(2)}`)
        sink.fd = fs.openSync(sink.file, "w", 0o600)
        for (const c of sink.chunks) fs.writeSync(sink.fd, c)
        sink.chunks = []
      }
      if (sink.fd !== undefined) fs.writeSync(sink.fd, chunk)
      else sink.chunks.push(chunk)
    } catch (e) {
      sink.error ??= e
    }
  })
  const end = () => {
    closeFd(sink)
    Deferred.unsafeDone(sink.done, Effect.void)
  }
  if (stream.readableEnded || stream.destroyed) end()
  stream.once("end", end)
  stream.once("close", end)
  stream.once("error", (e) => {
    sink.error ??= e
    end()
  })
  return sink
}

/** The tail of what was collected, for error messages. @internal */
export const tail = (sink: Sink, bytes: number): string => {
  if (sink.file !== undefined) {
    const fd = fs.openSync(sink.file, "r")
    try {
      const size = fs.fstatSync(fd).size
      const buf = Buffer.alloc(Math.min(bytes, size))
      fs.readSync(fd, buf, 0, buf.length, size - buf.length)
      return buf.toString("utf8")
    } finally {
      fs.closeSync(fd)
    }
  }
  return Buffer.concat(sink.chunks).subarray(-bytes).toString("utf8")
}

const closeFd = (sink: Sink) => {
  const fd = sink.fd
  // Cleared before closing: a descriptor number is reused at once, and a late chunk must never reach another file.
  sink.fd = undefined
  if (fd !== undefined) {
    try {
      fs.closeSync(fd)
    } catch (e) {
      sink.error ??= e
    }
  }
}

/** Stops collecting (a late writer that escaped the group is cut off) and removes the spill file. @internal */
export const dispose = (sink: Sink): void => {
  sink.stream.removeAllListeners("data")
  sink.stream.destroy()
  closeFd(sink)
  if (sink.file !== undefined) fs.rmSync(sink.file, { force: true })
}
