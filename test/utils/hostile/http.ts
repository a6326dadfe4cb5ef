/**
 * A hostile (or merely broken) Bazel HTTP cache for tests: `GET`/`HEAD`/`PUT` of `/ac/<hash>` and `/cas/<hash>` on
 * 127.0.0.1 (port 0, the address read back), alive for the test's scope. By default it is an honest cache in memory
 * (a `PUT` is kept, a `GET` returns it, anything else is 404); a test sets what one path answers instead, crafted
 * bytes or a behaviour (an endless body, a drip, a status, a hang), and reads back what it was asked, headers
 * included.
 */
import { Effect } from "effect"
import * as http from "node:http"
import type { AddressInfo } from "node:net"

/** What the server answers to a `GET` (and, for its status, a `HEAD`) of one path. */
export type Answer =
  /** These bytes, with this status (200 by default). */
  | { readonly _tag: "Bytes"; readonly bytes: Uint8Array; readonly status?: number }
  /** This status and no body. */
  | { readonly _tag: "Status"; readonly status: number }
  /** 200, then 1 MiB chunks for as long as the client reads them. */
  | { readonly _tag: "Endless" }
  /** 200, then one byte every `everyMs`, forever. */
  | { readonly _tag: "Drip"; readonly everyMs: number }
  /** Reads the request and never answers. */
  | { readonly _tag: "Hang" }

export const Answer = {
  bytes: (bytes: Uint8Array, status?: number): Answer => ({ _tag: "Bytes", bytes, ...(status ? { status } : {}) }),
  status: (status: number): Answer => ({ _tag: "Status", status }),
  endless: { _tag: "Endless" } as Answer,
  drip: (everyMs: number): Answer => ({ _tag: "Drip", everyMs }),
  hang: { _tag: "Hang" } as Answer
}

/** One request the server received. */
export interface Received {
  readonly method: string
  /** Without the leading `/` and any prefix: `ac/<hash>`, `cas/<hash>`. */
  readonly path: string
  readonly headers: http.IncomingHttpHeaders
}

export interface HostileHttp {
  /** `http://127.0.0.1:PORT`, for `--remote-cache`. */
  readonly url: string
  /**
   * Sets what `path` answers (`ac/<hash>`, `cas/<hash>`), or every path under `ac/` or `cas/` that has no answer of
   * its own (`ac/*`, `cas/*`).
   */
  readonly answer: (path: string, answer: Answer) => void
  /** The bytes an honest cache holds at `path` (what kiln PUT, or what a test put there). */
  readonly stored: Map<string, Uint8Array>
  /** Every request, in order of arrival. */
  readonly received: ReadonlyArray<Received>
  /** Body bytes the server has written for `path` so far (across requests). */
  readonly sent: (path: string) => number
}

const CHUNK = Buffer.alloc(1024 * 1024, 0x41)

/** The server, closed (every connection and timer with it) when the scope closes. */
export const hostileHttp = Effect.acquireRelease(
  Effect.async<{ server: http.Server; handle: HostileHttp; timers: Set<NodeJS.Timeout> }>((resume) => {
    const answers = new Map<string, Answer>()
    const stored = new Map<string, Uint8Array>()
    const received: Array<Received> = []
    const sentBytes = new Map<string, number>()
    const timers = new Set<NodeJS.Timeout>()
    const count = (p: string, n: number) => sentBytes.set(p, (sentBytes.get(p) ?? 0) + n)

    const answerOf = (p: string): Answer | undefined => {
      const set = answers.get(p) ?? answers.get(`${p.split("/")[0]}/*`)
      if (set !== undefined) return set
      const bytes = stored.get(p)
      return bytes !== undefined ? Answer.bytes(bytes) : undefined
    }

    const serve = (p: string, head: boolean, answer: Answer | undefined, res: http.ServerResponse) => {
      if (answer === undefined) return void res.writeHead(404).end()
      switch (answer._tag) {
        case "Status":
          return void res.writeHead(answer.status).end()
        case "Bytes":
          res.writeHead(answer.status ?? 200, { "content-length": String(answer.bytes.length) })
          if (head) return void res.end()
          count(p, answer.bytes.length)
          return void res.end(answer.bytes)
        case "Hang":
          return
        case "Endless": {
          res.writeHead(200)
          if (head) return void res.end()
          const pump = () => {
            while (!res.destroyed) {
              count(p, CHUNK.length)
              if (!res.write(CHUNK)) return
            }
          }
          res.on("drain", pump)
          return pump()
        }
        case "Drip": {
          res.writeHead(200)
          if (head) return void res.end()
          res.flushHeaders()
          const timer = setInterval(() => {
            count(p, 1)
            res.write("x")
          }, answer.everyMs)
          timers.add(timer)
          res.on("close", () => {
            clearInterval(timer)
            timers.delete(timer)
          })
        }
      }
    }

    const server = http.createServer((req, res) => {
      const p = (req.url ?? "/").replace(/^\/+/, "")
      received.push({ method: req.method ?? "", path: p, headers: req.headers })
      if (req.method === "PUT") {
        const chunks: Array<Buffer> = []
        req.on("data", (c: Buffer) => chunks.push(c))
        req.on("end", () => {
          const set = answers.get(p) ?? answers.get(`${p.split("/")[0]}/*`)
          if (set?._tag === "Status") return void res.writeHead(set.status).end()
          if (set?._tag === "Hang") return
          stored.set(p, Buffer.concat(chunks))
          res.writeHead(200).end()
        })
        return
      }
      // Bodies of other methods are drained, so that the connection's state is the answer's alone.
      req.resume()
      if (req.method !== "GET" && req.method !== "HEAD") return void res.writeHead(405).end()
      serve(p, req.method === "HEAD", answerOf(p), res)
    })
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address() as AddressInfo
      resume(Effect.succeed({
        server,
        timers,
        handle: {
          url: `http://127.0.0.1:${port}`,
          answer: (p, a) => void answers.set(p, a),
          stored,
          received,
          sent: (p) => sentBytes.get(p) ?? 0
        }
      }))
    })
  }),
  ({ server, timers }) =>
    Effect.async<void>((resume) => {
      for (const t of timers) clearInterval(t)
      server.close(() => resume(Effect.void))
      server.closeAllConnections()
    })
).pipe(Effect.map(({ handle }) => handle))
