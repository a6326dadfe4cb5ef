/**
 * The directory of the workspace lock (`KILN_LOCK_DIR`, by default `~/.cache/kiln/locks`) is judged as the store and
 * sandbox roots are (`os/PrivateDir.ts`, red team V10): a lock directory others can write is a lock they can forge (a
 * planted holder naming a live process makes every run wait on it) or break (a removed holder lets two runs write one
 * workspace at once). The CLI refuses one before anything runs: exit 2, one line naming the directory, its owner and
 * its mode. The engine's lock judges the directory it makes as well, so one another user made meanwhile (under a
 * sticky /tmp) is refused there too, never waited on.
 *
 * "Another user" is uid 65534, which takes root to chown to: those tests run as root only. Every directory is in the
 * test's own temp dir.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Exit } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"
import * as WorkspaceLock from "../../src/layers/engine/internal/workspaceLock.js"
import * as Proc from "../../src/os/Proc.js"
import { type CliResult, runCli } from "../utils/cliRun.js"
import { tempDir } from "../utils/temp.js"

const isRoot = process.geteuid?.() === 0
const NOBODY = 65534
const me = process.geteuid?.() ?? 0

/** A workspace whose one process writes an output (so a run takes the lock), and where kiln keeps its state. */
const setup = Effect.gen(function*() {
  const root = yield* tempDir("kiln-lock-dir-")
  const ws = path.join(root, "ws")
  fs.mkdirSync(ws)
  fs.mkdirSync(path.join(root, "sandboxes"))
  fs.writeFileSync(path.join(ws, "in.txt"), "in\n")
  fs.writeFileSync(
    path.join(ws, "kiln.json"),
    JSON.stringify({
      processes: {
        p: { argv: ["/bin/sh", "-c", "cat in.txt > out.txt"], inputs: ["in.txt"], outputs: ["out.txt"], env: {} }
      }
    })
  )
  const run = (lockDir: string) =>
    runCli(["run", "--progress", "plain"], {
      cwd: ws,
      env: {
        PATH: process.env.PATH ?? "/usr/bin:/bin",
        ...(process.env.KILN_SPAWNER !== undefined ? { KILN_SPAWNER: process.env.KILN_SPAWNER } : {}),
        HOME: root,
        KILN_STORE_DIR: path.join(root, "store"),
        KILN_SANDBOX_ROOT: path.join(root, "sandboxes"),
        KILN_NAMED_CACHES_DIR: path.join(root, "named"),
        KILN_LOCK_DIR: lockDir
      }
    })
  return { root, ws, run }
})

/** A directory made with `mode` (chmod: the umask does not apply) and owned by `uid`. */
const madeBy = (p: string, uid: number, mode: number) => {
  fs.mkdirSync(p)
  fs.chownSync(p, uid, uid)
  fs.chmodSync(p, mode)
  return p
}

/** Exit 2 and exactly one line: the lock directory, the directory at fault with its owner and mode, and why. */
const refused = (r: CliResult, lockDir: string, at: string, owner: number, mode: string, why: string) => {
  assert.isNull(r.signal, r.stderr)
  assert.strictEqual(r.code, 2, r.stderr)
  const what = `(owner uid ${owner}, mode ${mode})`
  assert.strictEqual(
    r.stderr,
    lockDir === at
      ? `kiln: refusing the workspace lock directory ${lockDir} ${what}: it ${why}\n`
      : `kiln: refusing the workspace lock directory ${lockDir}: ${at} ${what} ${why}\n`
  )
}

/** The generation file a forger plants: a holder that is a live process (this one), which is not a kiln run. */
const plantHolder = (lockDir: string, ws: string) => {
  const st = fs.statSync(ws, { bigint: true })
  const dir = path.join(lockDir, `${st.dev}-${st.ino}`)
  fs.mkdirSync(dir, { mode: 0o777 })
  const holder = { ...Proc.self(), state: "held" }
  fs.writeFileSync(path.join(dir, "0"), JSON.stringify(holder) + "\n", { mode: 0o666 })
}

describe("the workspace lock directory", () => {
  it.scoped("one every user can write (0777): exit 2 and the line, nothing run, nothing made in it", () =>
    Effect.gen(function*() {
      const { root, run, ws } = yield* setup
      const open = madeBy(path.join(root, "open"), me, 0o777)
      refused(yield* run(open), open, open, me, "0777", "is writable by every user")
      assert.isFalse(fs.existsSync(path.join(ws, "out.txt")))
      assert.deepStrictEqual(fs.readdirSync(open), [])
    }))

  it.scoped("one in a directory every user can write, which they can replace: exit 2, naming that directory", () =>
    Effect.gen(function*() {
      const { root, run } = yield* setup
      const parent = madeBy(path.join(root, "parent"), me, 0o777)
      const locks = path.join(parent, "locks")
      refused(
        yield* run(locks),
        locks,
        parent,
        me,
        "0777",
        "is writable by every user, who can replace what it holds"
      )
      assert.isFalse(fs.existsSync(locks))
    }))

  it.scoped("a missing one is made 0700 and used; the run writes back", () =>
    Effect.gen(function*() {
      const { root, run, ws } = yield* setup
      const locks = path.join(root, "cache", "locks")
      const r = yield* run(locks)
      assert.strictEqual(r.code, 0, r.stderr)
      assert.strictEqual(fs.readFileSync(path.join(ws, "out.txt"), "utf8"), "in\n")
      assert.strictEqual(fs.statSync(locks).mode & 0o7777, 0o700)
      assert.strictEqual(fs.readdirSync(locks).length, 1)
    }))
})

describe.skipIf(!isRoot)("the workspace lock directory, another user's (as root)", () => {
  it.scoped("another user's, holding a planted holder: exit 2 and the line, where the run used to wait on it", () =>
    Effect.gen(function*() {
      const { root, run, ws } = yield* setup
      const theirs = madeBy(path.join(root, "theirs"), NOBODY, 0o755)
      plantHolder(theirs, ws)
      refused(yield* run(theirs), theirs, theirs, NOBODY, "0755", "is another user's (kiln runs as uid 0)")
      assert.isFalse(fs.existsSync(path.join(ws, "out.txt")))
    }))

  it.scoped("the engine's lock refuses one another user made in a sticky directory, rather than wait on it", () =>
    Effect.gen(function*() {
      const root = yield* tempDir("kiln-lock-dir-")
      const ws = path.join(root, "ws")
      fs.mkdirSync(ws)
      // Stands for /tmp: anyone may make an entry there, as another user did after the CLI looked.
      const shared = madeBy(path.join(root, "tmp"), me, 0o1777)
      const theirs = madeBy(path.join(shared, "locks"), NOBODY, 0o777)
      plantHolder(theirs, ws)
      const lock = yield* WorkspaceLock.make(ws, theirs, path.join(root, "store"))
      const taken = yield* Effect.exit(lock.hold)
      assert.isTrue(Exit.isFailure(taken))
      if (Exit.isFailure(taken)) {
        assert.include(
          String(taken.cause),
          `refusing the workspace lock directory ${theirs} (owner uid ${NOBODY}, mode 0777): it is writable by every user`
        )
      }
      // Nothing of the run's in their directory, and not in the store's either: a refusal, not a fallback.
      assert.strictEqual(fs.readdirSync(theirs).length, 1)
      assert.isFalse(fs.existsSync(path.join(root, "store")))
    }))
})
