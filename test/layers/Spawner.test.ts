/**
 * The spawner script on its own: it starts what it is asked to, its output going to the files named; once its parent
 * is not the engine it was started for (that engine died, even before the spawner got going), it starts nothing: a
 * request the engine wrote just before dying must leave no output files beside a removed sandbox. When its engine
 * goes away, the processes it started that still run die with it, even one that left its sandbox directory (out
 * of the sandboxer's sight).
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { spawnSync } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"
import { SPAWNER_SOURCE } from "../../src/layers/internal/spawnerSource.js"
import { eventually, groupAlive } from "../utils/child.js"
import { tempDir } from "../utils/temp.js"

/** Pipes one request into a spawner started by `sh`, whose engine pid is `engine` (`$$` is the shell itself). */
const runSpawner = (dir: string, engine: string, argv: ReadonlyArray<string> = ["/bin/true"]) => {
  const request = {
    id: 7,
    argv,
    cwd: dir,
    env: {},
    stdout: path.join(dir, "out.log"),
    stderr: path.join(dir, "err.log")
  }
  return spawnSync("/bin/sh", ["-c", `printf '%s\\n' "$REQUEST" | "$NODE" -e "$SOURCE" -- kiln-spawner ${engine}`], {
    env: { REQUEST: JSON.stringify(request), NODE: process.execPath, SOURCE: SPAWNER_SOURCE },
    encoding: "utf8",
    timeout: 30_000
  })
}

describe("the spawner", () => {
  it.scoped("started by its engine, it opens the output files and starts the process", () =>
    Effect.gen(function*() {
      const dir = yield* tempDir()
      const r = runSpawner(dir, "$$")
      assert.strictEqual(r.status, 0, r.stderr)
      // Its stdin ends right after the request, which is its engine going away: it exits without waiting for the
      // child, whose exit it then never reports.
      const reply = JSON.parse(r.stdout.trim().split("\n")[0]!)
      assert.strictEqual(reply.id, 7)
      assert.isNumber(reply.pid)
      assert.includeMembers(fs.readdirSync(dir), ["err.log", "out.log"])
    }))

  it.scoped("started for an engine that is not its parent, it starts nothing and leaves no files", () =>
    Effect.gen(function*() {
      const dir = yield* tempDir()
      // Its parent is the shell, but it was told the engine is pid 1: the engine it was made for is gone.
      const r = runSpawner(dir, "1")
      assert.strictEqual(r.status, 0, r.stderr)
      assert.strictEqual(r.stdout, "")
      assert.deepStrictEqual(fs.readdirSync(dir), [])
    }))

  it.scopedLive("when its engine goes away, the groups it started that still run are SIGKILLed", () =>
    Effect.gen(function*() {
      const dir = yield* tempDir()
      // Its stdin ends right after the request: the engine is gone while the process runs.
      const r = runSpawner(dir, "$$", ["/bin/sh", "-c", "cd / && trap '' TERM && sleep 1000"])
      assert.strictEqual(r.status, 0, r.stderr)
      const reply = JSON.parse(r.stdout.trim().split("\n")[0]!)
      assert.isNumber(reply.pid)
      yield* Effect.addFinalizer(() => Effect.sync(() => groupAlive(reply.pid) && process.kill(-reply.pid, "SIGKILL")))
      yield* eventually("its process group is gone", () => !groupAlive(reply.pid), "2 seconds")
    }))

  it.scoped("it removes trees it is asked to, read-only ones included, and says so", () =>
    Effect.gen(function*() {
      const dir = yield* tempDir()
      const sandbox = path.join(dir, "sandbox")
      fs.mkdirSync(path.join(sandbox, "pkg", "mod"), { recursive: true })
      fs.writeFileSync(path.join(sandbox, "pkg", "mod", "f"), "x", { mode: 0o444 })
      fs.chmodSync(path.join(sandbox, "pkg", "mod"), 0o555)
      fs.chmodSync(path.join(sandbox, "pkg"), 0o555)
      fs.writeFileSync(`${sandbox}.stdout`, "out")
      const request = { id: 3, remove: [sandbox, `${sandbox}.stdout`, `${sandbox}.stderr`] }
      const r = spawnSync("/bin/sh", ["-c", `printf '%s\\n' "$REQUEST" | "$NODE" -e "$SOURCE" -- kiln-spawner $$`], {
        env: { REQUEST: JSON.stringify(request), NODE: process.execPath, SOURCE: SPAWNER_SOURCE },
        encoding: "utf8",
        timeout: 30_000
      })
      assert.strictEqual(r.status, 0, r.stderr)
      assert.deepStrictEqual(JSON.parse(r.stdout.trim()), { id: 3, removed: true })
      assert.deepStrictEqual(fs.readdirSync(dir), [])
    }))
})
