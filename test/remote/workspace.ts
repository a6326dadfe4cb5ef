/**
 * A workspace for the remote-cache tests, run through the built CLI: a producer of a directory (a nested file, an
 * executable, a symlink), a consumer of it, and a 5 MiB output (over gRPC's 4 MiB batch limit: ByteStream). Each
 * test gets its own cache namespace, so tests sharing one server never see each other's results.
 */
import { Effect } from "effect"
import { spawn } from "node:child_process"
import { randomUUID } from "node:crypto"
import * as fs from "node:fs"
import * as path from "node:path"
import { cli } from "../utils/stack.js"
import { tempDir, writeTree } from "../utils/temp.js"

export interface Summary {
  readonly processes: ReadonlyArray<
    { name: string; source: string; exitCode: number | null; actionDigest: string; backtracks: number }
  >
  readonly ran: number
  readonly cacheHits: number
  readonly failed: number
  readonly remoteCacheHits: number
  readonly remoteExecuted: number
  readonly remoteFallbacks: number
  readonly uploadedBytes: number
  readonly downloadedBytes: number
  readonly pendingUploads: number
  readonly remoteErrors: Record<string, number>
}

const PATH = { PATH: "/usr/local/bin:/usr/bin:/bin" }

const TOOLS = {
  "tools/gen.mjs": `import * as fs from "node:fs"
fs.mkdirSync("out/deep", { recursive: true })
const text = fs.readFileSync("in/a.txt", "utf8")
fs.writeFileSync("out/a.txt", text.toUpperCase())
fs.writeFileSync("out/deep/n.txt", String(text.length))
fs.writeFileSync("out/run.sh", "#!/bin/sh\\necho hi\\n", { mode: 0o755 })
fs.symlinkSync("a.txt", "out/link")
if (process.env.KILN_TEST_GATE) {
  fs.writeFileSync(process.env.KILN_TEST_GATE + "/started", "")
  while (!fs.existsSync(process.env.KILN_TEST_GATE + "/go")) Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 20)
}
`,
  "tools/use.mjs": `import * as fs from "node:fs"
fs.mkdirSync("res", { recursive: true })
fs.writeFileSync("res/b.txt", fs.readFileSync("out/a.txt", "utf8") + fs.readFileSync("in/b.txt", "utf8"))
`,
  "tools/big.mjs": `import * as fs from "node:fs"
const seed = fs.readFileSync("in/a.txt")
const buf = Buffer.alloc(5 * 1024 * 1024 + 17)
for (let i = 0; i < buf.length; i++) buf[i] = (i * 31 + (i >> 10) + seed[i % seed.length]) & 0xff
fs.writeFileSync("big.bin", buf)
`
}

export const config = (namespace: string, gate?: string) => ({
  cacheNamespace: namespace,
  // A gated process and the test signal each other through files of the host (the gate), which the strict view
  // would hide: where it runs here, it runs without one.
  ...(gate !== undefined ? { sandbox: "off" } : {}),
  processes: {
    gen: {
      argv: ["node", "tools/gen.mjs"],
      inputs: ["tools/gen.mjs", "in/a.txt"],
      outputs: ["out/"],
      env: { ...PATH, ...(gate !== undefined ? { KILN_TEST_GATE: gate } : {}) }
    },
    use: {
      argv: ["node", "tools/use.mjs"],
      inputs: ["tools/use.mjs", "in/b.txt"],
      deps: ["gen"],
      outputs: ["res/b.txt"],
      env: PATH
    },
    big: { argv: ["node", "tools/big.mjs"], inputs: ["tools/big.mjs", "in/a.txt"], outputs: ["big.bin"], env: PATH }
  }
})

/** The outputs a run leaves in the workspace, path → bytes (symlinks as their target). */
export const outputsOf = (ws: string): Record<string, string> => {
  const out: Record<string, string> = {}
  const walk = (rel: string) => {
    const abs = path.join(ws, rel)
    const st = fs.lstatSync(abs)
    if (st.isSymbolicLink()) out[rel] = `-> ${fs.readlinkSync(abs)}`
    else if (st.isDirectory()) { for (const n of fs.readdirSync(abs).sort()) walk(path.join(rel, n)) }
    else out[rel] = `${(st.mode & 0o111) !== 0 ? "x " : ""}${fs.readFileSync(abs).toString("base64")}`
  }
  for (const top of ["out", "res", "big.bin"]) if (fs.existsSync(path.join(ws, top))) walk(top)
  return out
}

/** A machine: a workspace copy and a store of its own; `run` is `kiln run` there. */
export const machine = (
  namespace: string,
  options: { readonly gate?: string; readonly extra?: Record<string, unknown> } = {}
) =>
  Effect.gen(function*() {
    const root = yield* tempDir("kiln-remote-")
    const ws = path.join(root, "ws")
    // The namespace in the inputs makes every blob of a test its own: evicting one leaves other tests' alone.
    writeTree(ws, { ...TOOLS, "in/a.txt": `alpha ${namespace}\n`, "in/b.txt": "beta\n" })
    const base = config(namespace, options.gate)
    fs.writeFileSync(
      path.join(ws, "kiln.json"),
      JSON.stringify({ ...base, processes: { ...base.processes, ...options.extra } })
    )
    fs.mkdirSync(path.join(root, "sandboxes"))
    const env = {
      ...process.env,
      KILN_STORE_DIR: path.join(root, "store"),
      KILN_SANDBOX_ROOT: path.join(root, "sandboxes"),
      KILN_NAMED_CACHES_DIR: path.join(root, "named")
    }
    const result = (status: number | null, stderr: string, summaryFile: string) => ({
      code: status,
      stderr,
      summary: fs.existsSync(summaryFile) ? JSON.parse(fs.readFileSync(summaryFile, "utf8")) as Summary : undefined
    })
    /**
     * Runs the CLI with `argv` in the background (the test worker's event loop keeps turning: vitest times out a
     * worker that blocks it for a minute): its exit code, stdout and stderr (through files, since kiln's helpers may
     * hold a pipe open after kiln has exited).
     */
    /** The pids of the kiln processes started here, newest last (a test interrupts one). */
    const started: Array<number> = []
    const spawnCli = (argv: ReadonlyArray<string>, extraEnv: Record<string, string> = {}) =>
      Effect.sync(() => {
        const out = path.join(root, `out-${randomUUID()}`)
        const err = path.join(root, `err-${randomUUID()}`)
        const fds = [fs.openSync(out, "w"), fs.openSync(err, "w")] as const
        const child = spawn(process.execPath, [cli, ...argv], {
          cwd: ws,
          env: { ...env, ...extraEnv },
          stdio: ["ignore", fds[0], fds[1]]
        })
        for (const fd of fds) fs.closeSync(fd)
        started.push(child.pid!)
        // Its output is read when the waiting fiber resumes, not in the exit callback: a test that timed out has
        // removed the files by then. Interrupted, the wait kills the run (its spawner ends what it started).
        return Effect.async<{ code: number | null; stdout: string; stderr: string }>((resume) => {
          child.once(
            "exit",
            (code) =>
              resume(Effect.sync(() => ({
                code,
                stdout: fs.readFileSync(out, "utf8"),
                stderr: fs.readFileSync(err, "utf8")
              })))
          )
          return Effect.sync(() => {
            if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL")
          })
        })
      })
    const runArgs = (
      more: ReadonlyArray<string>,
      summaryFile: string
    ) => ["run", ...more, "--progress", "plain", "--summary", summaryFile]
    /** `kiln run` in the background: its exit, once it ends. */
    const start = (more: ReadonlyArray<string>, extraEnv: Record<string, string> = {}) =>
      Effect.suspend(() => {
        const summaryFile = path.join(root, `summary-${randomUUID()}.json`)
        return Effect.map(
          spawnCli(runArgs(more, summaryFile), extraEnv),
          (exited) => Effect.map(exited, (r) => result(r.code, r.stderr, summaryFile))
        )
      })
    /** `kiln run`, to its end. */
    const run = (more: ReadonlyArray<string>, extraEnv: Record<string, string> = {}) =>
      Effect.flatten(start(more, extraEnv))
    /** Any other kiln command, to its end. */
    const kiln = (more: ReadonlyArray<string>) => Effect.flatten(spawnCli(more))
    return { root, ws, run, start, kiln, lastPid: () => started[started.length - 1]! }
  })

export const namespace = () => `test-${randomUUID()}`

export const sources = (s: Summary | undefined): Record<string, string> =>
  Object.fromEntries((s?.processes ?? []).map((p) => [p.name, p.source]))
