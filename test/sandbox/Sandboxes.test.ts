/**
 * Sandboxes: created fresh, removed by their finalizer even when read-only, failures reported and counted,
 * orphans of dead engines swept.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Logger } from "effect"
import { spawnSync } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"
import * as SandboxDir from "../../src/layers/sandbox/internal/sandboxDir.js"
import * as Sandboxes from "../../src/layers/sandbox/Sandboxes.js"
import * as Proc from "../../src/os/Proc.js"
import { tempDir } from "../utils/temp.js"

const NOBODY = 65534
const isRoot = process.getuid?.() === 0
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

/** Fills a sandbox with more entries than an idle one may hold. */
const crowd = (sandbox: string) => {
  for (let i = 0; i < 1100; i++) fs.writeFileSync(path.join(sandbox, `f${i}`), "")
}

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
      // Too many entries in it to keep it for the next process.
      const first = yield* Effect.scoped(Effect.map(sandboxes.make("test", elsewhere), (s) => {
        crowd(s.path)
        return s.path
      }))
      assert.deepStrictEqual(asked, [first])
      // Half done, then failed: what is left (a read-only tree, a log beside it) is removed here.
      const failing = (dir: string) =>
        Effect.zipRight(Effect.sync(() => fs.rmSync(path.join(dir, "gone"))), Effect.fail(new Error("spawner lost")))
      const second = yield* Effect.scoped(Effect.map(sandboxes.make("test", failing), (s) => {
        crowd(s.path)
        fs.writeFileSync(path.join(s.path, "gone"), "")
        readOnlyTree(path.join(s.path, "pkg"))
        fs.writeFileSync(`${s.path}${SandboxDir.STDOUT_SUFFIX}`, "out")
        return s.path
      }))
      assert.deepStrictEqual(fs.readdirSync(root), [])
      assert.isFalse(fs.existsSync(second))
      assert.strictEqual(yield* sandboxes.removalFailures, 0)
    }))

  it.scoped("a finished sandbox is kept under a new name, as it is, and reused; its scope removes it", () =>
    Effect.gen(function*() {
      const root = yield* tempDir()
      const asked: Array<string> = []
      const remover = (dir: string) => Effect.sync(() => void asked.push(dir))
      const isSandbox = (n: string) => SandboxDir.sandboxNameOf(n) === n
      const used = yield* Effect.scoped(Effect.gen(function*() {
        const sandboxes = yield* Sandboxes.make({ root, sweepOnStart: false })
        const first = yield* Effect.scoped(Effect.map(sandboxes.make("a", remover), (s) => {
          assert.isFalse(s.reused)
          fs.mkdirSync(path.join(s.path, "sub"))
          fs.writeFileSync(path.join(s.path, "sub/in.txt"), "in")
          fs.symlinkSync("sub/in.txt", path.join(s.path, "link"))
          fs.chmodSync(s.path, 0o700)
          fs.writeFileSync(`${s.path}${SandboxDir.STDOUT_SUFFIX}`, "out")
          return s.path
        }))
        // Gone under its own name, logs and all, and not through the remover: it is idle under another name of
        // ours, with what its process left and the log file its next process's spawn truncates.
        assert.isFalse(fs.existsSync(first))
        assert.isFalse(fs.existsSync(`${first}${SandboxDir.STDOUT_SUFFIX}`))
        assert.deepStrictEqual(asked, [])
        const idle = fs.readdirSync(root).find(isSandbox)!
        assert.sameMembers(fs.readdirSync(root), [idle, `${idle}${SandboxDir.STDOUT_SUFFIX}`])
        assert.deepStrictEqual(SandboxDir.readOwner(path.join(root, idle)), Proc.self())
        assert.strictEqual(fs.statSync(path.join(root, idle)).mode & 0o777, 0o700 & ~process.umask())
        // Who wants an empty sandbox gets a new one; who can refill one gets it, with what it holds.
        yield* Effect.scoped(Effect.map(sandboxes.make("b", remover), (s) => {
          assert.notStrictEqual(s.path, path.join(root, idle))
          assert.deepStrictEqual(fs.readdirSync(s.path), [])
        }))
        const third = yield* Effect.scoped(Effect.map(sandboxes.make("c", remover, { used: true }), (s) => {
          assert.strictEqual(s.path, path.join(root, idle))
          assert.isTrue(s.reused)
          assert.sameMembers(fs.readdirSync(s.path), ["sub", "link"])
          // More than a sandbox is kept with: it goes through the remover.
          crowd(s.path)
          return s.path
        }))
        assert.deepStrictEqual(asked, [third])
        // (A real remover takes the logs beside it too.)
        fs.rmSync(third, { recursive: true })
        fs.rmSync(`${third}${SandboxDir.STDOUT_SUFFIX}`)
        // Many at once: as many as the pool keeps (16) wait idle; the rest, empty ones, are removed here, and those
        // that hold something go through the remover.
        asked.length = 0
        yield* Effect.scoped(
          Effect.forEach(
            Array.from({ length: 20 }, (_, i) => `many${i}`),
            (d) =>
              Effect.map(sandboxes.make(d, remover), (s) => {
                // Released last (a scope releases in reverse), when the pool is full.
                if (d === "many0") fs.writeFileSync(path.join(s.path, "in.txt"), d)
              })
          )
        )
        assert.strictEqual(asked.length, 1)
        assert.strictEqual(fs.readdirSync(root).filter(isSandbox).length, 16 + 1)
        assert.deepStrictEqual(fs.readdirSync(asked[0]!), ["in.txt"])
        fs.rmSync(asked[0]!, { recursive: true })
        return first
      }))
      assert.deepStrictEqual(fs.readdirSync(root), [], `idle sandboxes outlived their scope (first was ${used})`)
    }))

  it.scoped("a process gets the idle sandbox nearest its tree in shape, or a new one when all are further than that", () =>
    Effect.gen(function*() {
      const root = yield* tempDir()
      const sandboxes = yield* Sandboxes.make({ root, sweepOnStart: false })
      const remover = () => Effect.void
      // As a fan-in process leaves its sandbox (a directory and a file per dependency), and a leaf's.
      const wide = (dir: string) => {
        for (let i = 0; i < 30; i++) {
          fs.mkdirSync(path.join(dir, `d${i}`))
          fs.writeFileSync(path.join(dir, `d${i}/out.txt`), "x")
        }
      }
      const narrow = (dir: string) => {
        fs.mkdirSync(path.join(dir, "src"))
        fs.writeFileSync(path.join(dir, "src/a.txt"), "a")
        fs.writeFileSync(path.join(dir, "src/b.txt"), "b")
      }
      const held = (dir: string) => fs.readdirSync(dir).sort()
      const WIDE = { dirs: 30, files: 30 }
      const NARROW = { dirs: 1, files: 2 }
      // Both idle at once.
      yield* Effect.scoped(Effect.gen(function*() {
        wide((yield* sandboxes.make("wide", remover)).path)
        narrow((yield* sandboxes.make("narrow", remover)).path)
      }))
      const use = (wanted: { dirs: number; files: number }) =>
        Effect.scoped(
          Effect.map(
            sandboxes.make("p", remover, { used: true, wanted }),
            (s) => ({ reused: s.reused, held: held(s.path) })
          )
        )
      // Each to its like, whichever went idle last.
      assert.deepStrictEqual(yield* use(NARROW), { reused: true, held: ["src"] })
      assert.deepStrictEqual(yield* use(WIDE), {
        reused: true,
        held: Array.from({ length: 30 }, (_, i) => `d${i}`).sort()
      })
      assert.deepStrictEqual(yield* use(NARROW), { reused: true, held: ["src"] })
      // With the narrow one in use, a narrow tree would make the wide one free 60 entries (more than a new sandbox
      // makes): it gets a new one, and the wide one stays idle for the next wide tree.
      yield* Effect.scoped(Effect.gen(function*() {
        const narrowNow = yield* sandboxes.make("narrow", remover, { used: true, wanted: NARROW })
        assert.deepStrictEqual(held(narrowNow.path), ["src"])
        const another = yield* sandboxes.make("another", remover, { used: true, wanted: NARROW })
        assert.isFalse(another.reused)
        assert.deepStrictEqual(held(another.path), [])
      }))
      assert.lengthOf((yield* use(WIDE)).held, 30)
      // Without a shape, as before: the latest idle one that holds something.
      assert.isTrue(
        yield* Effect.scoped(
          Effect.map(sandboxes.make("any", remover, { used: true }), (s) => s.reused)
        )
      )
    }))

  it.scoped("with reuse off, a sandbox a process left something in is removed, and every process gets an empty one", () =>
    Effect.gen(function*() {
      const root = yield* tempDir()
      const asked: Array<string> = []
      const remover = (dir: string) =>
        Effect.sync(() => {
          asked.push(dir)
          fs.rmSync(dir, { recursive: true })
        })
      const sandboxes = yield* Sandboxes.make({ root, sweepOnStart: false, reuse: false })
      const first = yield* Effect.scoped(Effect.map(sandboxes.make("a", remover, { used: true }), (s) => {
        fs.writeFileSync(path.join(s.path, "in.txt"), "in")
        return s.path
      }))
      assert.deepStrictEqual(asked, [first])
      // An empty one is still kept, and given out empty.
      yield* Effect.scoped(sandboxes.make("b", remover, { used: true }))
      yield* Effect.scoped(Effect.map(sandboxes.make("c", remover, { used: true }), (s) => {
        assert.isFalse(s.reused)
        assert.deepStrictEqual(fs.readdirSync(s.path), [])
      }))
      assert.strictEqual(asked.length, 1)
    }))

  // Switching to another user takes root (as CI runs); elsewhere the test is skipped, and says so.
  it.scoped.skipIf(!isRoot)(
    "removal of a read-only tree works as an unprivileged user, where rm -rf fails",
    () =>
      Effect.gen(function*() {
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
        const ours = spawnSync(process.execPath, [removeWorker, sandbox], {
          uid: NOBODY,
          gid: NOBODY,
          encoding: "utf8"
        })
        assert.strictEqual(ours.stdout.trim(), "removed", ours.stderr)
        assert.isFalse(fs.existsSync(sandbox))
      })
  )

  it.scoped("a sandbox that cannot be removed is logged with its path and errno, and counted, idle ones too", () =>
    Effect.gen(function*() {
      const root = yield* tempDir()
      const logs: Array<string> = []
      const chattr = (...args: Array<string>) => spawnSync("chattr", args, { encoding: "utf8" })
      // (An idle sandbox has been renamed since its file was made immutable.)
      yield* Effect.addFinalizer(() => Effect.sync(() => chattr("-R", "-i", root)))
      /** A sandbox with an immutable file (chattr +i defeats even root: a tree kiln cannot remove). */
      const immovable = (sandboxes: Sandboxes.Service, big: boolean) =>
        Effect.scoped(Effect.map(sandboxes.make("test"), (sandbox) => {
          if (big) crowd(sandbox.path)
          const file = path.join(sandbox.path, "deep", "immutable")
          fs.mkdirSync(path.dirname(file))
          fs.writeFileSync(file, "x")
          const r = chattr("+i", file)
          assert.strictEqual(r.status, 0, `chattr +i failed: ${r.stderr}`)
          return sandbox.path
        }))
      // Removed as it is released (too big to keep idle).
      const sandboxes = yield* Sandboxes.make({ root, sweepOnStart: false })
      const dir = yield* immovable(sandboxes, true).pipe(Effect.provide(collectLogs(logs)))
      assert.isTrue(fs.existsSync(dir))
      assert.strictEqual(yield* sandboxes.removalFailures, 1)
      const warning = logs.find((l) => l.includes("could not remove sandbox"))
      assert.isDefined(warning)
      assert.include(warning, dir)
      assert.include(warning, "EPERM")
      // Kept idle, then removed as its owner's scope ends.
      logs.length = 0
      const idleFailures = yield* Effect.scoped(Effect.gen(function*() {
        const other = yield* Sandboxes.make({ root, sweepOnStart: false })
        yield* immovable(other, false)
        assert.strictEqual(yield* other.removalFailures, 0)
        return other
      })).pipe(Effect.provide(collectLogs(logs)))
      assert.strictEqual(yield* idleFailures.removalFailures, 1)
      assert.include(logs.find((l) => l.includes("could not remove sandbox")), "EPERM")
    }))

  // Making a bind mount takes root (as CI runs); elsewhere the test is skipped, and says so.
  it.scoped.skipIf(!isRoot)(
    "a sandbox with a file system mounted in it is neither reused nor deleted through: it is reported",
    () =>
      Effect.gen(function*() {
        const root = yield* tempDir()
        const outside = yield* tempDir()
        fs.writeFileSync(path.join(outside, "precious"), "keep me")
        const logs: Array<string> = []
        const sandboxes = yield* Sandboxes.make({ root, sweepOnStart: false })
        let at = ""
        const dir = yield* Effect.scoped(Effect.map(sandboxes.make("test", undefined, { used: true }), (s) => {
          at = path.join(s.path, "mnt")
          fs.mkdirSync(at)
          return s.path
        }))
        // (Kept idle, empty of anything but the mount point.)
        assert.isFalse(fs.existsSync(dir))
        let mounted = false
        yield* Effect.addFinalizer(() => Effect.sync(() => mounted && spawnSync("umount", [at])))
        yield* Effect.scoped(Effect.map(sandboxes.make("test", undefined, { used: true }), (s) => {
          at = path.join(s.path, "mnt")
          // A process running as root may leave a bind mount behind.
          const mount = spawnSync("mount", ["--bind", outside, at], { encoding: "utf8" })
          assert.strictEqual(mount.status, 0, `mount --bind failed: ${mount.stderr}`)
          mounted = true
        })).pipe(Effect.provide(collectLogs(logs)))
        assert.isTrue(fs.existsSync(at))
        assert.strictEqual(fs.readFileSync(path.join(outside, "precious"), "utf8"), "keep me")
        assert.strictEqual(yield* sandboxes.removalFailures, 1)
        const warning = logs.find((l) => l.includes("could not remove sandbox"))
        assert.include(warning, `a file system is mounted at ${at}`)
      })
  )

  it.scoped("keep: always keeps the sandbox with a __run.sh that re-runs the process exactly", () =>
    Effect.gen(function*() {
      const root = yield* tempDir()
      const sandboxes = yield* Sandboxes.make({ root, keep: "always", sweepOnStart: false })
      const dir = yield* Effect.scoped(
        Effect.gen(function*() {
          const sandbox = yield* sandboxes.make("echo")
          fs.mkdirSync(path.join(sandbox.path, "sub"))
          yield* sandbox.setCommand(() => ({
            argv: ["/bin/sh", "-c", "echo \"$GREETING, it's $(pwd)\" > out.txt"],
            env: { GREETING: "hello 'there'" },
            workingDirectory: "sub"
          }))
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
      const live = SandboxDir.create(root, Proc.self())
      // The name is the owner record: nothing is written beside a sandbox.
      assert.sameMembers(fs.readdirSync(root), [orphan, recycled, live].map((d) => path.basename(d)))
      assert.deepStrictEqual(SandboxDir.readOwner(live), Proc.self())
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
