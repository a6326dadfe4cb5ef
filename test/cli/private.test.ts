/**
 * What kiln makes on a machine is its user's own: with nothing configured, another local user can read neither a
 * running process's sandbox (its inputs) nor the store (every cached blob and log).
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { spawn, spawnSync } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"
import * as ProcessRunner from "../../src/layers/runner/ProcessRunner.js"
import { eventually, exitOf } from "../utils/child.js"
import { cli } from "../utils/stack.js"
import { tempDir } from "../utils/temp.js"

const isRoot = process.geteuid?.() === 0
const NOBODY = 65534

/** What `nobody` gets reading `file` (or listing it, for a directory): the error code, or "read". */
const asNobody = (target: string): string => {
  const r = spawnSync(process.execPath, [
    "-e",
    `try { const fs = require("fs"); const t = ${JSON.stringify(target)};
       fs.statSync(t).isDirectory() ? fs.readdirSync(t) : fs.readFileSync(t); console.log("read") }
     catch (e) { console.log(e.code) }`
  ], { uid: NOBODY, gid: NOBODY, encoding: "utf8", cwd: "/" })
  return r.stdout.trim()
}

describe("kiln's defaults are private to its user", () => {
  it.scopedLive.skipIf(!isRoot)(
    "a second user reads neither a running sandbox nor the store (as root only)",
    () =>
      Effect.gen(function*() {
        const root = yield* tempDir("kiln-private-")
        // Everything above kiln's own directories is open to all, so that only kiln's modes decide.
        fs.chmodSync(root, 0o755)
        const cache = path.join(root, "cache")
        fs.mkdirSync(path.join(cache, "kiln"), { recursive: true, mode: 0o755 })
        fs.chmodSync(cache, 0o755)
        fs.chmodSync(path.join(cache, "kiln"), 0o755)
        const ws = path.join(root, "ws")
        const running = path.join(root, "running")
        const release = path.join(root, "release")
        fs.mkdirSync(path.join(ws, "src"), { recursive: true })
        fs.writeFileSync(path.join(ws, "src", "secret.txt"), "a secret input\n")
        fs.writeFileSync(
          path.join(ws, "kiln.json"),
          JSON.stringify({
            processes: {
              hold: {
                argv: ["/bin/sh", "-c", `pwd > ${running}; until [ -e ${release} ]; do sleep 0.02; done`],
                inputs: ["src/*.txt"],
                env: { PATH: "/usr/bin:/bin" }
              }
            }
          })
        )
        const env: Record<string, string> = { PATH: process.env.PATH ?? "/usr/bin:/bin", XDG_CACHE_HOME: cache }
        for (const k of ["HOME", "KILN_SPAWNER"]) if (process.env[k] !== undefined) env[k] = process.env[k]!
        // The process and this test signal each other through files of the host (`running`, `release`), which the
        // strict view hides; what is tested is the modes of kiln's directories, as another user meets them.
        env.KILN_STRICT_VIEW = "0"
        const child = spawn(process.execPath, [cli, "run", "--progress", "none"], { cwd: ws, env, stdio: "ignore" })
        // Whatever the test finds, the run is let go and awaited before its directories are removed: a killed
        // engine's helpers would make them again.
        yield* Effect.addFinalizer(() =>
          Effect.zipRight(
            Effect.sync(() => fs.writeFileSync(release, "")),
            exitOf(child).pipe(
              Effect.timeout("60 seconds"),
              Effect.catchAll(() => Effect.sync(() => child.kill("SIGKILL")))
            )
          )
        )
        yield* eventually("the process is running in its sandbox", () => fs.existsSync(running), "60 seconds")
        const sandboxes = path.join(cache, "kiln", "sandboxes")
        const store = path.join(cache, "kiln", "store")
        // The process may see its sandbox at the exec root (`pwd` is then /mnt): the one directory under the root.
        const made = fs.readdirSync(sandboxes).filter((n) => fs.statSync(path.join(sandboxes, n)).isDirectory())
        assert.strictEqual(made.length, 1, `the sandbox is under the default root: ${made.join(", ")}`)
        const sandbox = path.join(sandboxes, made[0]!)
        assert.include([sandbox, ProcessRunner.execRoot()], fs.readFileSync(running, "utf8").trim())
        assert.strictEqual(fs.statSync(sandboxes).mode & 0o777, 0o700)
        assert.strictEqual(fs.statSync(store).mode & 0o777, 0o700)
        assert.strictEqual(asNobody(path.join(sandbox, "src", "secret.txt")), "EACCES")
        assert.strictEqual(asNobody(sandboxes), "EACCES")
        assert.strictEqual(asNobody(path.join(store, "kiln-store.json")), "EACCES")
        assert.strictEqual(asNobody(store), "EACCES")
        fs.writeFileSync(release, "")
        assert.strictEqual((yield* exitOf(child)).code, 0)
      })
  )

  it.scopedLive.skipIf(!isRoot)(
    "a store root its owner made group-readable keeps its mode (as root only)",
    () =>
      Effect.gen(function*() {
        const root = yield* tempDir("kiln-private-")
        const store = path.join(root, "shared-store")
        fs.mkdirSync(store, { mode: 0o750 })
        fs.chmodSync(store, 0o2750)
        const r = spawnSync(process.execPath, [cli, "store", "stats", "--store-dir", store], { encoding: "utf8" })
        assert.strictEqual(r.status, 0, r.stderr)
        assert.strictEqual(fs.statSync(store).mode & 0o7777, 0o2750)
      })
  )
})
