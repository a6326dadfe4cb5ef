/**
 * What held against a hostile remote cache, kept so: an `ActionResult` whose output paths leave the workspace, a
 * `Tree` with a name that is no single path segment or with names out of order or twice, a file digest that claims
 * 10^12 bytes, and an entry whose process failed are none of them used: the process runs, its outputs are the ones
 * it makes, nothing is written outside the workspace, and its fresh result replaces the entry. A crafted entry is
 * what anyone who can PUT to the team's HTTP cache can write: here an honest result is uploaded to the suite's nginx
 * first, then overwritten over HTTP with the bytes an attacker would choose (kiln's own `ActionResult` schema, and a
 * hand encoder for `Tree`s, which kiln's canonical encoder refuses to make bad).
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { spawn } from "node:child_process"
import { createHash, randomUUID } from "node:crypto"
import * as fs from "node:fs"
import * as nodeHttp from "node:http"
import type { AddressInfo } from "node:net"
import * as path from "node:path"
import * as Proto from "../../src/layers/remote/internal/proto.js"
import { remoteServers } from "../utils/remote.js"
import { cli } from "../utils/stack.js"
import { tempDir, writeTree } from "../utils/temp.js"
import type { Summary } from "./workspace.js"

interface Ran {
  readonly code: number | null
  readonly stderr: string
  readonly summary: Summary
}

/**
 * `kiln run` in `ws` with a store and sandbox root of its own under `home`, to its end (SIGKILLed if the test is
 * interrupted first). Output goes through files: kiln's helpers may hold a pipe open after kiln has exited.
 */
const kilnRun = (
  home: string,
  ws: string,
  args: ReadonlyArray<string>,
  env: Record<string, string> = {}
): Effect.Effect<Ran> =>
  Effect.suspend(() => {
    const id = randomUUID()
    const summary = path.join(home, `summary-${id}.json`)
    const err = path.join(home, `err-${id}`)
    const fds = [fs.openSync(path.join(home, `out-${id}`), "w"), fs.openSync(err, "w")] as const
    const child = spawn(process.execPath, [cli, "run", "--progress", "plain", "--summary", summary, ...args], {
      cwd: ws,
      stdio: ["ignore", fds[0], fds[1]],
      env: {
        ...process.env,
        KILN_STORE_DIR: path.join(home, "store"),
        KILN_SANDBOX_ROOT: path.join(home, "sandboxes"),
        KILN_NAMED_CACHES_DIR: path.join(home, "named"),
        XDG_CACHE_HOME: path.join(home, "cache"),
        ...env
      }
    })
    for (const fd of fds) fs.closeSync(fd)
    return Effect.async<Ran>((resume) => {
      child.once("exit", (code) =>
        resume(Effect.sync(() => {
          const stderr = fs.readFileSync(err, "utf8")
          if (!fs.existsSync(summary)) throw new Error(`kiln exited ${code} without a summary:\n${stderr}`)
          return { code, stderr, summary: JSON.parse(fs.readFileSync(summary, "utf8")) as Summary }
        })))
      return Effect.sync(() => {
        if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL")
      })
    })
  })

const sha256 = (bytes: Uint8Array | string) => createHash("sha256").update(bytes).digest("hex")

/** A GET or PUT to the suite's nginx cache: what an attacker with the cache's URL can do. */
const http = (method: "GET" | "PUT", rel: string, body?: Uint8Array) =>
  Effect.promise(async () => {
    const response = await fetch(`${remoteServers().httpUrl}/${rel}`, { method, ...(body ? { body } : {}) })
    const bytes = new Uint8Array(await response.arrayBuffer())
    if (!response.ok) throw new Error(`${method} /${rel}: HTTP ${response.status}`)
    return bytes
  })

interface WireDigest {
  readonly hash: string
  readonly size_bytes?: number
}

interface WireResult {
  readonly exit_code?: number
  readonly output_files?: ReadonlyArray<{ path: string; digest: WireDigest; is_executable?: boolean }>
  readonly output_directories?: ReadonlyArray<{ path: string; tree_digest: WireDigest }>
  readonly stdout_digest?: WireDigest
  readonly stderr_digest?: WireDigest
}

/**
 * A process that makes a directory and a file, both from its input (which holds the test's namespace, so every
 * blob and action of a test is its own on the shared server).
 */
const workspaceFiles = (ns: string) => ({
  "a.txt": `alpha ${ns}\n`,
  "kiln.json": JSON.stringify({
    cacheNamespace: ns,
    processes: {
      gen: {
        argv: ["/bin/sh", "-c", "mkdir -p out/sub && cat a.txt > out/sub/h.txt && cat a.txt a.txt > f.txt"],
        inputs: ["a.txt"],
        outputs: ["out/", "f.txt"]
      }
    }
  })
})

/**
 * A first machine uploads gen's honest result to nginx; the test then overwrites the entry, and a second machine (a
 * fresh copy of the workspace at another path, a fresh store) runs against it. `root` holds both machines and
 * nothing else, so that anything written outside a workspace shows up under it.
 */
const honestUpload = Effect.gen(function*() {
  const root = yield* tempDir("kiln-held-remote-")
  const ns = `held-${randomUUID()}`
  const first = path.join(root, "first")
  writeTree(path.join(first, "ws"), workspaceFiles(ns))
  const flags = ["--remote-cache", remoteServers().httpUrl]
  const filled = yield* kilnRun(first, path.join(first, "ws"), flags)
  assert.strictEqual(filled.code, 0, filled.stderr)
  assert.strictEqual(filled.summary.pendingUploads, 0, filled.stderr)
  const action = filled.summary.processes[0]!.actionDigest.split("/")[0]!
  const honest = Proto.decode<WireResult>("ActionResult", yield* http("GET", `ac/${action}`))
  assert.deepStrictEqual(honest.output_files?.map((f) => f.path), ["f.txt"])
  assert.deepStrictEqual(honest.output_directories?.map((d) => d.path), ["out"])
  const expected = { "f.txt": `alpha ${ns}\nalpha ${ns}\n`, "out/sub/h.txt": `alpha ${ns}\n` }
  /** Runs the second machine against whatever the entry holds now. */
  const second = () =>
    Effect.gen(function*() {
      const home = path.join(root, "second")
      const ws = path.join(home, "ws")
      writeTree(ws, workspaceFiles(ns))
      const r = yield* kilnRun(home, ws, flags)
      return { ...r, ws }
    })
  /** The entry as the server holds it now. */
  const entry = Effect.map(http("GET", `ac/${action}`), (b) => Proto.decode<WireResult>("ActionResult", b))
  const putEntry = (result: WireResult) => http("PUT", `ac/${action}`, Proto.encode("ActionResult", { ...result }))
  return { root, ns, honest, expected, second, entry, putEntry }
})

/** Every path under `dir` (symlinks not followed), relative to it. */
const everything = (dir: string): Array<string> =>
  (fs.readdirSync(dir, { recursive: true }) as Array<string>).map(String).sort()

/**
 * The second machine ran gen itself and got its real outputs, and nothing named `pwned` exists anywhere under the
 * test's root: whatever the entry said, nothing was written outside the workspace.
 */
const ranHonestly = (
  r: Ran & { readonly ws: string },
  setup: Effect.Effect.Success<typeof honestUpload>
) => {
  assert.strictEqual(r.code, 0, r.stderr)
  assert.deepStrictEqual(r.summary.processes.map((p) => [p.name, p.source]), [["gen", "ran"]], r.stderr)
  assert.notMatch(r.stderr, /remote cache\)/)
  for (const [rel, content] of Object.entries(setup.expected)) {
    assert.strictEqual(fs.readFileSync(path.join(r.ws, rel), "utf8"), content, rel)
  }
  assert.deepStrictEqual(everything(path.join(r.ws, "out")), ["sub", "sub/h.txt"])
  assert.deepStrictEqual(everything(setup.root).filter((p) => p.includes("pwned")), [])
}

/** The server's entry is gen's honest result again: the bad one was replaced by what ran. */
const replaced = (setup: Effect.Effect.Success<typeof honestUpload>) =>
  Effect.gen(function*() {
    const now = yield* setup.entry
    assert.strictEqual(now.exit_code ?? 0, 0)
    assert.deepStrictEqual(now.output_files, setup.honest.output_files)
    assert.deepStrictEqual(now.output_directories, setup.honest.output_directories)
  })

describe("a hostile HTTP cache entry: output paths that leave the workspace are never used", () => {
  const escapes: ReadonlyArray<[string, (root: string) => { readonly file?: string; readonly directory?: string }]> = [
    ["output_files at ../../pwned", () => ({ file: "../../pwned" })],
    ["output_files at an absolute path", (root) => ({ file: path.join(root, "pwned") })],
    ["output_files at out/../../../pwned", () => ({ file: "out/../../../pwned" })],
    ["output_directories at ../../pwned", () => ({ directory: "../../pwned" })]
  ]
  for (const [what, escape] of escapes) {
    it.scoped(`${what}: gen runs, nothing is written outside, and the entry is replaced`, () =>
      Effect.gen(function*() {
        const setup = yield* honestUpload
        const { directory, file } = escape(setup.root)
        const [honestFile] = setup.honest.output_files!
        const [honestDirectory] = setup.honest.output_directories!
        yield* setup.putEntry({
          ...setup.honest,
          output_files: [{ ...honestFile!, path: file ?? honestFile!.path }],
          output_directories: [{ ...honestDirectory!, path: directory ?? honestDirectory!.path }]
        })
        const r = yield* setup.second()
        ranHonestly(r, setup)
        yield* replaced(setup)
      }))
  }
})

// A minimal protobuf encoder for `Tree`s and `Directory`s (REAPI v2: Tree{root=1, children=2}; Directory{files=1,
// directories=2}; FileNode and DirectoryNode{name=1, digest=2}; Digest{hash=1, size_bytes=2}), which writes the
// entries in the order given, bad names included.
const varint = (n: number): Array<number> => {
  const out: Array<number> = []
  for (; n > 127; n = Math.floor(n / 128)) out.push((n % 128) | 128)
  out.push(n)
  return out
}
const field = (number: number, bytes: Uint8Array): Buffer =>
  Buffer.concat([Buffer.from(varint((number << 3) | 2)), Buffer.from(varint(bytes.length)), bytes])
const digestBytes = (d: { readonly hash: string; readonly sizeBytes: number }) =>
  Buffer.concat([field(1, Buffer.from(d.hash)), Buffer.from([0x10, ...varint(d.sizeBytes)])])
interface Node {
  readonly name: string
  readonly digest: { readonly hash: string; readonly sizeBytes: number }
}
const directoryBytes = (dir: { readonly files?: ReadonlyArray<Node>; readonly directories?: ReadonlyArray<Node> }) =>
  Buffer.concat([
    ...(dir.files ?? []).map((f) =>
      field(1, Buffer.concat([field(1, Buffer.from(f.name)), field(2, digestBytes(f.digest))]))
    ),
    ...(dir.directories ?? []).map((d) =>
      field(2, Buffer.concat([field(1, Buffer.from(d.name)), field(2, digestBytes(d.digest))]))
    )
  ])
const treeBytes = (root: Buffer, children: ReadonlyArray<Buffer>) =>
  Buffer.concat([field(1, root), ...children.map((c) => field(2, c))])
const digestOf = (bytes: Uint8Array) => ({ hash: sha256(bytes), sizeBytes: bytes.length })

describe("a hostile HTTP cache entry: a Tree with bad names is refused with a warning, and replaced", () => {
  /** out/ as gen makes it: `sub/h.txt`. The bad trees are built from the same parts. */
  const parts = (ns: string) => {
    const h = digestOf(Buffer.from(`alpha ${ns}\n`))
    const sub = directoryBytes({ files: [{ name: "h.txt", digest: h }] })
    return { h, sub, subNode: { name: "sub", digest: digestOf(sub) } }
  }
  const bad: ReadonlyArray<[string, (p: ReturnType<typeof parts>) => Buffer]> = [
    [
      "a directory named ..",
      (p) => treeBytes(directoryBytes({ directories: [{ ...p.subNode, name: ".." }] }), [p.sub])
    ],
    [
      "a file named ..",
      (p) => treeBytes(directoryBytes({ files: [{ name: "..", digest: p.h }], directories: [p.subNode] }), [p.sub])
    ],
    [
      "a file named a/../../pwned",
      (p) =>
        treeBytes(directoryBytes({ files: [{ name: "a/../../pwned", digest: p.h }], directories: [p.subNode] }), [
          p.sub
        ])
    ],
    [
      "a name with a slash: pwned/h.txt",
      (p) =>
        treeBytes(directoryBytes({ files: [{ name: "pwned/h.txt", digest: p.h }], directories: [p.subNode] }), [p.sub])
    ],
    [
      "names out of order",
      (p) => {
        const unsorted = directoryBytes({ files: [{ name: "z-pwned", digest: p.h }, { name: "a-pwned", digest: p.h }] })
        return treeBytes(directoryBytes({ directories: [p.subNode, { name: "zz", digest: digestOf(unsorted) }] }), [
          p.sub,
          unsorted
        ])
      }
    ],
    [
      "a name twice",
      (p) => {
        const twice = directoryBytes({ files: [{ name: "h.txt", digest: p.h }, { name: "h.txt", digest: p.h }] })
        return treeBytes(directoryBytes({ directories: [{ name: "sub", digest: digestOf(twice) }] }), [twice])
      }
    ],
    [
      "a file and a directory of one name",
      (p) => treeBytes(directoryBytes({ files: [{ name: "sub", digest: p.h }], directories: [p.subNode] }), [p.sub])
    ]
  ]

  it.scoped("the hand encoder writes gen's honest Tree byte for byte (so the bad ones differ only where they say)", () =>
    Effect.gen(function*() {
      const setup = yield* honestUpload
      const p = parts(setup.ns)
      const mine = treeBytes(directoryBytes({ directories: [p.subNode] }), [p.sub])
      const tree = setup.honest.output_directories![0]!.tree_digest
      assert.strictEqual(sha256(mine), tree.hash)
      assert.deepStrictEqual(mine, Buffer.from(yield* http("GET", `cas/${tree.hash}`)))
    }))

  for (const [what, make] of bad) {
    it.scoped(`${what}: gen runs, nothing is written outside, and the entry is replaced`, () =>
      Effect.gen(function*() {
        const setup = yield* honestUpload
        const tree = make(parts(setup.ns))
        yield* http("PUT", `cas/${sha256(tree)}`, tree)
        yield* setup.putEntry({
          ...setup.honest,
          output_directories: [{ path: "out", tree_digest: { hash: sha256(tree), size_bytes: tree.length } }]
        })
        const r = yield* setup.second()
        ranHonestly(r, setup)
        assert.match(
          r.stderr,
          /^kiln: warning: remote cache entry for gen is unusable \(INVALID_ARGUMENT: [^\n]+\): running it, and replacing the entry$/m
        )
        yield* replaced(setup)
      }))
  }
})

describe("a hostile HTTP cache entry: blobs and exit codes", () => {
  // Past what kiln would ever ask for (10^12) or within it (10^9): either way the 5 bytes nginx serves are refused,
  // as a digest mismatch, or as a claim over kiln's bound before anything is read.
  for (const claimed of [10 ** 12, 10 ** 9]) {
    it.scoped(`a file digest claiming ${claimed} bytes is caught: one remote error, gen runs (one backtrack), build OK`, () =>
      Effect.gen(function*() {
        const setup = yield* honestUpload
        const file = setup.honest.output_files![0]!
        yield* setup.putEntry({
          ...setup.honest,
          output_files: [{ ...file, digest: { hash: file.digest.hash, size_bytes: claimed } }]
        })
        const r = yield* setup.second()
        assert.strictEqual(r.code, 0, r.stderr)
        for (const [rel, content] of Object.entries(setup.expected)) {
          assert.strictEqual(fs.readFileSync(path.join(r.ws, rel), "utf8"), content, rel)
        }
        assert.deepStrictEqual(r.summary.processes.map((p) => [p.name, p.source, p.backtracks]), [["gen", "ran", 1]])
        const errors = Object.entries(r.summary.remoteErrors)
        assert.strictEqual(errors.length, 1, r.stderr)
        assert.oneOf(errors[0]![0], ["DIGEST_MISMATCH", "TOO_LARGE"], r.stderr)
        assert.strictEqual(errors[0]![1], 1, r.stderr)
        assert.match(r.stderr, new RegExp(`: (DIGEST_MISMATCH|TOO_LARGE): ${file.digest.hash}/${claimed} `))
        yield* replaced(setup)
      }))
  }

  it.scoped("an entry with exit_code 1 is not a hit: gen runs, and its success replaces the entry", () =>
    Effect.gen(function*() {
      const setup = yield* honestUpload
      yield* setup.putEntry({ ...setup.honest, exit_code: 1 })
      const r = yield* setup.second()
      ranHonestly(r, setup)
      assert.strictEqual(r.summary.remoteCacheHits, 0)
      yield* replaced(setup)
    }))
})

/**
 * An HTTP cache that has nothing and refuses every upload (HTTP 500 to each PUT), on 127.0.0.1, closed with the
 * scope. It counts the requests that carried `token` in their authorization header.
 */
const refusingServer = (token: string) =>
  Effect.acquireRelease(
    Effect.async<{ readonly url: string; readonly server: nodeHttp.Server; readonly seen: Record<string, number> }>(
      (resume) => {
        const seen: Record<string, number> = { authorized: 0, PUT: 0, GET: 0, HEAD: 0 }
        const server = nodeHttp.createServer((req, res) => {
          if (req.headers.authorization === token) seen.authorized!++
          seen[req.method ?? "?"] = (seen[req.method ?? "?"] ?? 0) + 1
          req.resume()
          req.once("end", () => {
            res.statusCode = req.method === "PUT" ? 500 : 404
            res.end()
          })
        })
        server.listen(0, "127.0.0.1", () => {
          const { port } = server.address() as AddressInfo
          resume(Effect.succeed({ url: `http://127.0.0.1:${port}`, server, seen }))
        })
      }
    ),
    ({ server }) =>
      Effect.async<void>((resume) => {
        server.closeAllConnections()
        server.close(() => resume(Effect.void))
      })
  )

/** Every regular file under `dir` (symlinks not followed), absolute. */
const filesUnder = (dir: string): Array<string> =>
  everything(dir).map((rel) => path.join(dir, rel)).filter((p) => fs.lstatSync(p).isFile())

describe("a remote token never reaches the disk", () => {
  it.scoped("uploads a server refused stay pending, and no file under the store, sandboxes, runtime dir or the run's reports holds the token", () =>
    Effect.gen(function*() {
      const token = `Bearer held-token-${randomUUID()}`
      const { seen, url } = yield* refusingServer(token)
      const root = yield* tempDir("kiln-held-token-")
      const ws = path.join(root, "ws")
      writeTree(ws, {
        "a.txt": `alpha ${randomUUID()}\n`,
        // An input tree past 16 MiB: the sandboxer writes it (the engine writes smaller ones). The process copies the
        // sandboxer's log, which kiln removes when the run ends, into its outputs (searched below with everything
        // else).
        "big.bin": Buffer.alloc(17 * 1024 * 1024, 1),
        "tools/gen.sh": {
          content: `#!/bin/sh
mkdir -p out && cat a.txt > out/a.txt
find "$1" -name 'sb-*.log' -type f -exec cat {} + > out/sandboxer-logs.txt
find "$1" -name 'sb-*.log' -type f | wc -l > out/sandboxer-log-count.txt
`,
          mode: 0o755
        },
        "kiln.json": JSON.stringify({
          // The process reads kiln's own files on the host (the sandboxer's log): no strict view, which hides them.
          sandbox: "off",
          processes: {
            gen: { argv: ["tools/gen.sh", root], inputs: ["tools/gen.sh", "a.txt", "big.bin"], outputs: ["out/"] }
          }
        })
      })
      const reports = path.join(root, "reports")
      fs.mkdirSync(reports)
      const runtime = path.join(root, "runtime")
      fs.mkdirSync(runtime, { mode: 0o700 })
      const run = (n: number) =>
        kilnRun(root, ws, [
          "--remote-cache",
          url,
          "--remote-header",
          "authorization=$KILN_HELD_TOKEN",
          "--trace",
          path.join(reports, `trace-${n}.json`),
          "--remote-log",
          path.join(reports, `remote-${n}.jsonl`)
        ], { KILN_HELD_TOKEN: token, XDG_RUNTIME_DIR: runtime })
      const first = yield* run(1)
      assert.strictEqual(first.code, 0, first.stderr)
      assert.deepStrictEqual(first.summary.processes.map((p) => [p.name, p.source]), [["gen", "ran"]])
      assert.isAbove(first.summary.pendingUploads, 0, first.stderr)
      // The second run retries the pending uploads from the journal; the server refuses them again.
      const second = yield* run(2)
      assert.strictEqual(second.code, 0, second.stderr)
      assert.isAbove(second.summary.pendingUploads, 0, second.stderr)
      // The token was sent, and uploads were tried: the files below had every chance to hold it.
      assert.isAbove(seen.authorized!, 0)
      assert.isAbove(seen.PUT!, 0)
      const files = filesUnder(root)
      const store = path.join(root, "store")
      const pending = files.filter((f) => /\/remote\/[^/]+\/pending\/[^/]+\.json$/.test(f))
      assert.isNotEmpty(pending, `no pending upload in the journal:\n${files.join("\n")}`)
      for (const kind of ["engine/runs", "engine/memo", "stat-index"]) {
        assert.isTrue(files.some((f) => f.startsWith(path.join(store, kind))), `nothing under ${kind}`)
      }
      assert.isAbove(
        Number(fs.readFileSync(path.join(ws, "out/sandboxer-log-count.txt"), "utf8")),
        0,
        "no sandboxer log"
      )
      for (const report of ["trace-1.json", "remote-1.jsonl", "trace-2.json", "remote-2.jsonl"]) {
        assert.include(files, path.join(reports, report))
      }
      const secret = Buffer.from(token.slice("Bearer ".length))
      const holding = files.filter((f) => fs.readFileSync(f).includes(secret))
      assert.deepStrictEqual(holding, [], `${files.length} files searched`)
      assert.notInclude(first.stderr + second.stderr, token.slice("Bearer ".length))
    }))
})
