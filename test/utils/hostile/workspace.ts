/**
 * A one-process workspace for tests against hostile servers, run through the built CLI: `p` writes `o.txt` (`local`)
 * from `a.txt`, so a test can tell a local run from a remote hit by the file. Each run has its own store, sandboxes
 * and summary under the test's temp directory.
 */
import { Effect } from "effect"
import { spawn } from "node:child_process"
import { randomUUID } from "node:crypto"
import * as fs from "node:fs"
import * as path from "node:path"
import type { Summary } from "../../remote/workspace.js"
import { cli } from "../stack.js"
import { tempDir, writeTree } from "../temp.js"

export interface Ran {
  readonly code: number | null
  readonly stdout: string
  readonly stderr: string
  readonly summary: Summary | undefined
}

/** `kiln.json`'s one process, with `remote` (a checked-in remote section) when given. */
export const oneProcess = (remote?: Record<string, unknown>) => ({
  ...(remote !== undefined ? { remote } : {}),
  processes: {
    p: {
      argv: ["/bin/sh", "-c", "echo local > o.txt"],
      inputs: ["a.txt"],
      outputs: ["o.txt"],
      env: { PATH: "/usr/bin:/bin" }
    }
  }
})

/** The workspace: `config` as kiln.json, and `a.txt` unique to it unless `a` is given (two machines, one key). */
export const hostileWorkspace = (config: unknown = oneProcess(), a = `a ${randomUUID()}\n`) =>
  Effect.gen(function*() {
    const root = yield* tempDir("kiln-hostile-remote-")
    const ws = path.join(root, "ws")
    writeTree(ws, { "a.txt": a, "kiln.json": JSON.stringify(config) })
    fs.mkdirSync(path.join(root, "sandboxes"))
    const baseEnv: Record<string, string | undefined> = {
      ...process.env,
      KILN_STORE_DIR: path.join(root, "store"),
      KILN_SANDBOX_ROOT: path.join(root, "sandboxes"),
      KILN_NAMED_CACHES_DIR: path.join(root, "named")
    }
    /**
     * Any kiln command, in the background (the worker's event loop keeps turning for the servers in it), to its end;
     * `run` gets `--summary`. Interrupted, the wait kills it.
     */
    const kiln = (argv: ReadonlyArray<string>, env: Record<string, string> = {}) =>
      Effect.suspend(() => {
        const summaryFile = path.join(root, `summary-${randomUUID()}.json`)
        const full = argv[0] === "run" ? [...argv, "--progress", "plain", "--summary", summaryFile] : argv
        const out = path.join(root, `out-${randomUUID()}`)
        const err = path.join(root, `err-${randomUUID()}`)
        const fds = [fs.openSync(out, "w"), fs.openSync(err, "w")] as const
        const child = spawn(process.execPath, [cli, ...full], {
          cwd: ws,
          env: { ...baseEnv, ...env },
          stdio: ["ignore", fds[0], fds[1]]
        })
        for (const fd of fds) fs.closeSync(fd)
        return Effect.async<Ran>((resume) => {
          child.once("exit", (code) =>
            resume(Effect.sync(() => ({
              code,
              stdout: fs.readFileSync(out, "utf8"),
              stderr: fs.readFileSync(err, "utf8"),
              summary: fs.existsSync(summaryFile)
                ? JSON.parse(fs.readFileSync(summaryFile, "utf8")) as Summary
                : undefined
            }))))
          return Effect.sync(() => {
            if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL")
          })
        })
      })
    /** `o.txt`'s text, if the run left one. */
    const output = () => {
      const file = path.join(ws, "o.txt")
      return fs.existsSync(file) ? fs.readFileSync(file, "utf8") : undefined
    }
    return { root, ws, kiln, output }
  })
