/**
 * Write-back under attack, end to end through the built CLI: a process that makes its declared output directory a
 * symlink to a victim directory, two runs in one workspace at once, and the temp files a run killed during its
 * write-back leaves. The victim keeps its files; the second run waits for the first (saying so) and the workspace
 * ends with one run's outputs; dead kilns' temp files go, live ones' stay. Everything lives in the test's temp dir,
 * the workspace lock included (`KILN_LOCK_DIR`).
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import type { ChildProcess } from "node:child_process"
import { spawnSync } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"
import * as GenerationLock from "../../src/os/GenerationLock.js"
import * as Proc from "../../src/os/Proc.js"
import { exitOf, spawnScoped } from "../utils/child.js"
import { cli } from "../utils/stack.js"
import { tempDir, writeTree } from "../utils/temp.js"

/** A temp root with a workspace holding `config` (and `a.txt`), and kiln's directories beside it. */
const setup = (config: unknown) =>
  Effect.gen(function*() {
    const root = yield* tempDir("kiln-hostile-wb-")
    const ws = path.join(root, "ws")
    writeTree(root, { "ws/a.txt": "a\n", "ws/kiln.json": JSON.stringify(config) })
    fs.mkdirSync(path.join(root, "sandboxes"))
    const locks = path.join(root, "locks")
    const env = {
      ...process.env,
      HOME: root,
      KILN_STORE_DIR: path.join(root, "store"),
      KILN_SANDBOX_ROOT: path.join(root, "sandboxes"),
      KILN_NAMED_CACHES_DIR: path.join(root, "named"),
      KILN_LOCK_DIR: locks
    }
    /** Where kiln keeps this workspace's lock: named by its device and inode. */
    const st = fs.statSync(ws, { bigint: true })
    const lockDir = path.join(locks, `${st.dev}-${st.ino}`)
    return { root, ws, env, lockDir }
  })

type Dirs = Effect.Effect.Success<ReturnType<typeof setup>>

/** `kiln run` started, its stderr collected as it comes. */
const start = (dirs: Dirs, extra: ReadonlyArray<string> = []) =>
  Effect.map(
    spawnScoped(process.execPath, [cli, "run", "--progress", "plain", ...extra], { cwd: dirs.ws, env: dirs.env }),
    (child) => {
      const out = { child, stderr: "" }
      child.stderr!.on("data", (d) => (out.stderr += d))
      child.stdout!.resume()
      return out
    }
  )

/** Waits until the child's stderr holds `text`; fails if the child exits first. */
const said = (run: { readonly child: ChildProcess; stderr: string }, text: string) =>
  Effect.async<void, Error>((resume) => {
    const check = () => {
      if (!run.stderr.includes(text)) return false
      resume(Effect.void)
      return true
    }
    if (check()) return
    const onData = () => {
      if (check()) run.child.stderr!.off("data", onData)
    }
    run.child.stderr!.on("data", onData)
    run.child.once("exit", () => {
      // The last output may come after `exit`: `close` has it all.
      run.child.once("close", () => {
        if (!check()) resume(Effect.fail(new Error(`exited without saying ${JSON.stringify(text)}: ${run.stderr}`)))
      })
    })
  })

const finished = (run: { readonly child: ChildProcess; stderr: string }) =>
  Effect.map(exitOf(run.child), (exit) => ({ ...exit, stderr: run.stderr }))

const runToEnd = (dirs: Dirs) => Effect.scoped(Effect.flatMap(start(dirs), finished))

describe("write-back, hostile", () => {
  it.scoped("a process that makes its declared output directory a symlink to a victim: the victim keeps its files, and nothing of it is cached", () =>
    Effect.gen(function*() {
      const root = yield* tempDir("kiln-victim-")
      writeTree(root, { "p.txt": "precious", "d/x": "keep" })
      // While the marker is there (outside the workspace, not an input: a host path it is shown), the process makes
      // the symlink.
      const marker = path.join(yield* tempDir("kiln-marker-"), "poison")
      fs.writeFileSync(marker, "")
      const script = `if [ -e '${marker}' ]; then ln -s '${root}' out; else mkdir out && echo made > out/m.txt; fi`
      const dirs = yield* setup({
        processes: {
          gen: {
            argv: ["/bin/sh", "-c", script],
            inputs: ["a.txt"],
            outputs: ["out/"],
            hostPaths: [path.dirname(marker)]
          }
        }
      })
      // Twice: the first run, then whatever it left in the store.
      for (let i = 0; i < 2; i++) {
        const r = yield* runToEnd(dirs)
        assert.strictEqual(r.code, 1, r.stderr)
        assert.match(r.stderr, /^✗ gen: .*`out\/?`.*symlink/m)
        assert.deepStrictEqual(fs.readdirSync(root).sort(), ["d", "p.txt"])
        assert.strictEqual(fs.readFileSync(path.join(root, "p.txt"), "utf8"), "precious")
        assert.strictEqual(fs.readFileSync(path.join(root, "d/x"), "utf8"), "keep")
        assert.deepStrictEqual(fs.readdirSync(dirs.ws).sort(), ["a.txt", "kiln.json"])
      }
      // Capture refused the symlink, so nothing of those runs is in the store to be served: the next run runs it.
      // (A poisoned entry from a cache is refused at lookup, test/remote/HostileEntries.test.ts, and write-back's own
      // refusal of one is test/engine/WriteBack.test.ts's.)
      fs.rmSync(marker)
      const r = yield* runToEnd(dirs)
      assert.strictEqual(r.code, 0, r.stderr)
      assert.match(r.stderr, /^kiln: 1 process: 1 ran/m)
      assert.strictEqual(fs.readFileSync(path.join(dirs.ws, "out/m.txt"), "utf8"), "made\n")
      assert.deepStrictEqual(fs.readdirSync(root).sort(), ["d", "p.txt"])
    }))

  it.scoped("two runs in one workspace: each waits for the lock, saying so once, and out/ ends as one run's", () =>
    Effect.gen(function*() {
      const files = 50
      const dirs = yield* setup({
        processes: {
          gen: {
            argv: [
              "/bin/sh",
              "-c",
              `mkdir -p out; id=$$-$(date +%N); for i in $(seq 1 ${files}); do echo $id > out/f$i.txt; done; ` +
              "echo $id > stamp.txt"
            ],
            inputs: ["a.txt"],
            outputs: ["out/", "stamp.txt"],
            cache: "never"
          }
        }
      })
      // This test holds the workspace lock, as another kiln run would: both runs must wait for it to write back.
      const me = Proc.self()
      const held = GenerationLock.tryTake(dirs.lockDir, me)
      assert.strictEqual(held._tag, "Taken")
      const first = yield* start(dirs)
      const second = yield* start(dirs)
      const waiting = `kiln: waiting for another kiln run in this workspace (pid ${process.pid})\n`
      yield* said(first, waiting)
      yield* said(second, waiting)
      assert.isFalse(fs.existsSync(path.join(dirs.ws, "stamp.txt")), "nothing written while the lock is held")
      GenerationLock.release(dirs.lockDir, (held as { generation: number }).generation, me)
      const ends = [yield* finished(first), yield* finished(second)]
      for (const end of ends) {
        assert.strictEqual(end.code, 0, end.stderr)
        assert.strictEqual(end.stderr.split(waiting).length - 1, 1, `said once: ${end.stderr}`)
      }
      // One of them said it waits for the other, or for the test's pid only: either way, one run's outputs.
      const out = path.join(dirs.ws, "out")
      const names = fs.readdirSync(out)
      assert.strictEqual(names.length, files, names.join(" "))
      const ids = new Set(names.map((n) => fs.readFileSync(path.join(out, n), "utf8")))
      assert.strictEqual(ids.size, 1, [...ids].join(" "))
      assert.deepStrictEqual([...ids], [fs.readFileSync(path.join(dirs.ws, "stamp.txt"), "utf8")])
    }))

  it.scoped("after a run killed during its write-back: its temp files go, a live kiln's stay, its stale lock is taken", () =>
    Effect.gen(function*() {
      const dirs = yield* setup({
        processes: {
          gen: {
            argv: ["/bin/sh", "-c", "mkdir -p out && echo a > out/a.txt && echo f > f.txt"],
            inputs: ["a.txt"],
            outputs: ["out/", "f.txt"]
          }
        }
      })
      assert.strictEqual((yield* runToEnd(dirs)).code, 0)
      const me = Proc.self()
      // A kiln that had this test's pid once (another start time), and one that ended (its pid is free).
      const gone = spawnSync("true").pid
      const dead = [`.f.txt.kiln-${me.pid}-1-0`, `out/.a.txt.kiln-${me.pid}-1-1`, `.f.txt.kiln-${gone}-2`]
      const live = [`.f.txt.kiln-${me.pid}-${me.startTime}-3`, `out/.a.txt.kiln-${me.pid}-${me.startTime}-4`]
      for (const p of [...dead, ...live]) fs.writeFileSync(path.join(dirs.ws, p), "partial")
      // What `kill -9` during write-back leaves: the lock, held by the dead run, and the output not renamed in yet.
      fs.mkdirSync(dirs.lockDir, { recursive: true })
      fs.writeFileSync(path.join(dirs.lockDir, "3"), JSON.stringify({ pid: me.pid, startTime: "1", state: "held" }))
      fs.rmSync(path.join(dirs.ws, "f.txt"))
      const r = yield* runToEnd(dirs)
      assert.strictEqual(r.code, 0, r.stderr)
      assert.notInclude(r.stderr, "waiting")
      assert.strictEqual(fs.readFileSync(path.join(dirs.ws, "f.txt"), "utf8"), "f\n")
      for (const p of dead) assert.isFalse(fs.existsSync(path.join(dirs.ws, p)), p)
      for (const p of live) assert.isTrue(fs.existsSync(path.join(dirs.ws, p)), p)
      assert.deepStrictEqual(fs.readdirSync(dirs.lockDir), ["4"])
      assert.strictEqual(JSON.parse(fs.readFileSync(path.join(dirs.lockDir, "4"), "utf8")).state, "released")
    }))
})
