/**
 * Sandboxes: created fresh, removed by their finalizer even when read-only, failures reported and counted,
 * orphans of dead engines swept.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Logger } from "effect"
import { spawnSync } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"
import * as SandboxDir from "../../src/layers/internal/sandboxDir.js"
import * as Sandboxes from "../../src/layers/Sandboxes.js"
import { tempDir } from "../utils/temp.js"

const NOBODY = 65534
const removeWorker = path.resolve(".kiln-test/fixtures/removeWorker.mjs")

/** dirs 0555 and files 0444, nested 5 deep, as `go mod download` leaves its module cache. */
const readOnlyTree = (top: string) => {
  let dir = top
  const dirs: Array<string> = []
  for (let i = 0; i < 5; i++) {
    fs.mkdirSync(dir, { recursive: true })
    fs.writeFileSync(path.join(dir, `file${i}`), "x", { mode: 0o444 })
    dirs.push(dir)
    dir = path.join(dir, `level${i}`)
  }
  for (const d of dirs.reverse()) fs.chmodSync(d, 0o555)
}

const chownTree = (p: string, uid: number) => {
  fs.lchownSync(p, uid, uid)
  if (fs.lstatSync(p).isDirectory()) { for (const n of fs.readdirSync(p)) chownTree(path.join(p, n), uid) }
}

const collectLogs = (into: Array<string>) =>
  Logger.replace(Logger.defaultLogger, Logger.make(({ message }) => into.push(String(message))))

describe("Sandboxes", () => {
  it.scoped("a sandbox is a fresh directory that its scope removes, read-only trees included", () =>
    Effect.gen(function*() {
      const root = yield* tempDir()
      const sandboxes = yield* Sandboxes.make({ root, sweepOnStart: false })
      const dir = yield* Effect.scoped(
        Effect.gen(function*() {
          const sandbox = yield* sandboxes.make("test")
          assert.isTrue(path.basename(sandbox.path).startsWith("kiln-sandbox-"))
          assert.deepStrictEqual(fs.readdirSync(sandbox.path), [])
          readOnlyTree(path.join(sandbox.path, "pkg", "mod"))
          return sandbox.path
        })
      )
      assert.isFalse(fs.existsSync(dir))
      assert.isFalse(fs.existsSync(SandboxDir.ownerFileOf(dir)))
      assert.strictEqual(yield* sandboxes.removalFailures, 0)
    }))

  it.scoped("a sandbox goes through the remover it was made with; one the remover fails on is removed here", () =>
    Effect.gen(function*() {
      const root = yield* tempDir()
      const sandboxes = yield* Sandboxes.make({ root, sweepOnStart: false })
      const asked: Array<string> = []
      const elsewhere = (dir: string) =>
        Effect.sync(() => {
          asked.push(dir)
          fs.rmSync(dir, { recursive: true })
        })
      // A directory in it: not one to empty and keep for the next process.
      const first = yield* Effect.scoped(Effect.map(sandboxes.make("test", elsewhere), (s) => {
        fs.mkdirSync(path.join(s.path, "sub"))
        return s.path
      }))
      assert.deepStrictEqual(asked, [first])
      // Half done, then failed: what is left (a read-only tree, a log beside it) is removed here.
      const failing = (dir: string) =>
        Effect.zipRight(Effect.sync(() => fs.rmSync(path.join(dir, "gone"))), Effect.fail(new Error("spawner lost")))
      const second = yield* Effect.scoped(Effect.map(sandboxes.make("test", failing), (s) => {
        fs.writeFileSync(path.join(s.path, "gone"), "")
        readOnlyTree(path.join(s.path, "pkg"))
        fs.writeFileSync(`${s.path}${SandboxDir.STDOUT_SUFFIX}`, "out")
        return s.path
      }))
      assert.deepStrictEqual(fs.readdirSync(root), [])
      assert.isFalse(fs.existsSync(second))
      assert.strictEqual(yield* sandboxes.removalFailures, 0)
    }))

  it.scoped("a finished sandbox of a few files is emptied under a new name and reused; its scope removes it", () =>
    Effect.gen(function*() {
      const root = yield* tempDir()
      const asked: Array<string> = []
      const remover = (dir: string) => Effect.sync(() => void asked.push(dir))
      const used = yield* Effect.scoped(Effect.gen(function*() {
        const sandboxes = yield* Sandboxes.make({ root, sweepOnStart: false })
        const first = yield* Effect.scoped(Effect.map(sandboxes.make("a", remover), (s) => {
          fs.writeFileSync(path.join(s.path, "in.txt"), "in")
          fs.symlinkSync("in.txt", path.join(s.path, "link"))
          fs.chmodSync(s.path, 0o700)
          fs.writeFileSync(`${s.path}${SandboxDir.STDOUT_SUFFIX}`, "out")
          return s.path
        }))
        // Gone under its own name, logs and all, and not through the remover: one empty sandbox of ours is idle,
        // with the log file its next process's spawn truncates.
        assert.isFalse(fs.existsSync(first))
        assert.isFalse(fs.existsSync(`${first}${SandboxDir.STDOUT_SUFFIX}`))
        assert.deepStrictEqual(asked, [])
        const idle = fs.readdirSync(root).find((n) => SandboxDir.sandboxNameOf(n) === n)
        assert.sameMembers(fs.readdirSync(root), [idle!, `${idle}${SandboxDir.STDOUT_SUFFIX}`])
        assert.deepStrictEqual(SandboxDir.readOwner(path.join(root, idle!)), SandboxDir.self())
        const second = yield* Effect.scoped(Effect.map(sandboxes.make("b", remover), (s) => {
          assert.strictEqual(s.path, path.join(root, idle!))
          assert.deepStrictEqual(fs.readdirSync(s.path), [])
          assert.strictEqual(fs.statSync(s.path).mode & 0o777, 0o755 & ~process.umask())
          fs.mkdirSync(path.join(s.path, "sub"))
          return s.path
        }))
        // One with a directory in it goes through the remover (this one only notes it), and none is idle then.
        assert.deepStrictEqual(asked, [second])
        // (A real remover takes the logs beside it too: here, the one the first process left.)
        fs.rmSync(second, { recursive: true })
        fs.rmSync(`${second}${SandboxDir.STDOUT_SUFFIX}`)
        yield* Effect.scoped(sandboxes.make("c", remover))
        assert.strictEqual(fs.readdirSync(root).length, 1)
        // Once more with logs, which then wait beside the idle sandbox until the scope ends.
        yield* Effect.scoped(Effect.map(sandboxes.make("d", remover), (s) => {
          fs.writeFileSync(`${s.path}${SandboxDir.STDERR_SUFFIX}`, "err")
        }))
        assert.strictEqual(fs.readdirSync(root).length, 2)
        // Many at once: as many as the pool keeps (16) wait idle, the rest are removed here, none by the remover.
        asked.length = 0
        yield* Effect.scoped(
          Effect.forEach(
            Array.from({ length: 20 }, (_, i) => `many${i}`),
            (d) =>
              Effect.map(sandboxes.make(d, remover), (s) => {
                fs.writeFileSync(path.join(s.path, "in.txt"), d)
              })
          )
        )
        assert.deepStrictEqual(asked, [])
        const dirs = fs.readdirSync(root).filter((n) => SandboxDir.sandboxNameOf(n) === n)
        assert.strictEqual(dirs.length, 16)
        for (const d of dirs) assert.deepStrictEqual(fs.readdirSync(path.join(root, d)), [])
        return first
      }))
      assert.deepStrictEqual(fs.readdirSync(root), [], `idle sandboxes outlived their scope (first was ${used})`)
    }))

  it.scoped("removal of a read-only tree works as an unprivileged user, where rm -rf fails", () =>
    Effect.gen(function*() {
      if (process.getuid?.() !== 0) return
      const root = yield* tempDir()
      fs.chmodSync(root, 0o777)
      const control = path.join(root, "control")
      const sandbox = path.join(root, "kiln-sandbox-nobody")
      readOnlyTree(control)
      readOnlyTree(sandbox)
      chownTree(control, NOBODY)
      chownTree(sandbox, NOBODY)
      const rm = spawnSync("rm", ["-rf", control], { uid: NOBODY, gid: NOBODY, encoding: "utf8" })
      assert.notStrictEqual(rm.status, 0, "the control tree should defeat a plain rm -rf")
      const ours = spawnSync(process.execPath, [removeWorker, sandbox], { uid: NOBODY, gid: NOBODY, encoding: "utf8" })
      assert.strictEqual(ours.stdout.trim(), "removed", ours.stderr)
      assert.isFalse(fs.existsSync(sandbox))
    }))

  it.scoped("a sandbox that cannot be removed is logged with its path and errno, and counted", () =>
    Effect.gen(function*() {
      const root = yield* tempDir()
      const logs: Array<string> = []
      const sandboxes = yield* Sandboxes.make({ root, sweepOnStart: false })
      let stuck = ""
      const chattr = (flag: string) => spawnSync("chattr", [flag, stuck], { encoding: "utf8" })
      yield* Effect.addFinalizer(() => Effect.sync(() => stuck !== "" && chattr("-i")))
      const dir = yield* Effect.scoped(
        Effect.gen(function*() {
          const sandbox = yield* sandboxes.make("test")
          stuck = path.join(sandbox.path, "deep", "immutable")
          fs.mkdirSync(path.dirname(stuck))
          fs.writeFileSync(stuck, "x")
          // An immutable file (chattr +i) defeats even root: the simulation of a tree kiln cannot remove.
          const r = chattr("+i")
          assert.strictEqual(r.status, 0, `chattr +i failed: ${r.stderr}`)
          return sandbox.path
        })
      ).pipe(Effect.provide(collectLogs(logs)))
      assert.isTrue(fs.existsSync(dir))
      assert.strictEqual(yield* sandboxes.removalFailures, 1)
      const warning = logs.find((l) => l.includes("could not remove sandbox"))
      assert.isDefined(warning)
      assert.include(warning, dir)
      assert.include(warning, "EPERM")
    }))

  it.scoped("keep: always keeps the sandbox with a __run.sh that re-runs the process exactly", () =>
    Effect.gen(function*() {
      const root = yield* tempDir()
      const sandboxes = yield* Sandboxes.make({ root, keep: "always", sweepOnStart: false })
      const dir = yield* Effect.scoped(
        Effect.gen(function*() {
          const sandbox = yield* sandboxes.make("echo")
          fs.mkdirSync(path.join(sandbox.path, "sub"))
          yield* sandbox.setCommand({
            argv: ["/bin/sh", "-c", "echo \"$GREETING, it's $(pwd)\" > out.txt"],
            env: { GREETING: "hello 'there'" },
            workingDirectory: "sub"
          })
          return sandbox.path
        })
      )
      assert.isTrue(fs.existsSync(dir))
      const run = spawnSync(path.join(dir, "__run.sh"), { encoding: "utf8" })
      assert.strictEqual(run.status, 0, run.stderr)
      assert.strictEqual(fs.readFileSync(path.join(dir, "sub", "out.txt"), "utf8"), `hello 'there', it's ${dir}/sub\n`)
      // A kept sandbox survives sweeps; `kept: true` removes it.
      assert.strictEqual((yield* sandboxes.sweep()).kept, 1)
      assert.isTrue(fs.existsSync(dir))
      yield* sandboxes.sweep({ kept: true })
      assert.isFalse(fs.existsSync(dir))
    }))

  it.scoped("keep: on-failure keeps only the sandbox of a failed process", () =>
    Effect.gen(function*() {
      const root = yield* tempDir()
      const sandboxes = yield* Sandboxes.make({ root, keep: "on-failure", sweepOnStart: false })
      const ok = yield* Effect.scoped(Effect.map(sandboxes.make("ok"), (s) => s.path))
      const failed = yield* Effect.scoped(
        Effect.flatMap(sandboxes.make("failed"), (s) => Effect.as(s.markFailed, s.path))
      )
      assert.isFalse(fs.existsSync(ok))
      assert.isTrue(fs.existsSync(failed))
    }))

  it.scoped("the start-up sweep removes sandboxes of dead owners (read-only trees too) and keeps live ones", () =>
    Effect.gen(function*() {
      const root = yield* tempDir()
      const dead = spawnSync("sh", ["-c", "echo $$"], { encoding: "utf8" })
      const deadOwner = { pid: Number(dead.stdout.trim()), startTime: "1" }
      const orphan = SandboxDir.create(root, deadOwner)
      readOnlyTree(path.join(orphan, "cache"))
      // Our own pid with another start time: a recycled pid, so the owner is dead.
      const recycled = SandboxDir.create(root, { pid: process.pid, startTime: "1" })
      const live = SandboxDir.create(root, SandboxDir.self())
      // The name is the owner record: nothing is written beside a sandbox.
      assert.sameMembers(fs.readdirSync(root), [orphan, recycled, live].map((d) => path.basename(d)))
      assert.deepStrictEqual(SandboxDir.readOwner(live), SandboxDir.self())
      // A sandbox of an earlier version: a random name, and an owner file beside it.
      const older = path.join(root, "kiln-sandbox-0123456789ab")
      fs.mkdirSync(older)
      fs.writeFileSync(SandboxDir.ownerFileOf(older), JSON.stringify(deadOwner))
      const sandboxes = yield* Sandboxes.make({ root, sweepOnStart: false })
      const report = yield* sandboxes.sweep()
      assert.sameMembers([...report.removed], [orphan, recycled, older])
      assert.isFalse(fs.existsSync(SandboxDir.ownerFileOf(older)))
      assert.isFalse(fs.existsSync(orphan))
      assert.isFalse(fs.existsSync(SandboxDir.ownerFileOf(orphan)))
      assert.isTrue(fs.existsSync(live))
      SandboxDir.remove(live)
    }))
})
