/**
 * Roots another local user made first, or can write, through the built CLI (red-team H1, L2): a sandbox root such as
 * `/dev/shm/kiln`, a store root, a named caches directory are refused before anything runs (exit 2, one line naming
 * the directory, its owner and its mode), while a store shared with a group on purpose (`mkdir -m 2770`) is used; and
 * a runtime directory another user took first is passed over, never a reason the run fails.
 *
 * "Another user" is uid 65534, which takes root to chown to: these run as root only. Every directory is in the test's
 * own temp dir (a sticky 1777 one stands for /dev/shm and /tmp).
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { spawn, spawnSync } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"
import { cli } from "../utils/stack.js"
import { tempDir } from "../utils/temp.js"

const isRoot = process.geteuid?.() === 0
const NOBODY = 65534

interface Result {
  readonly code: number | null
  readonly stdout: string
  readonly stderr: string
}

/** A temp root holding a workspace of one process (an executable input), and where kiln goes. */
const setup = Effect.gen(function*() {
  const root = yield* tempDir("kiln-hostile-roots-")
  const ws = path.join(root, "ws")
  fs.mkdirSync(ws)
  fs.writeFileSync(path.join(ws, "tool.sh"), "#!/bin/sh\ncat in.txt > out.txt\n", { mode: 0o755 })
  fs.writeFileSync(path.join(ws, "in.txt"), "a private input\n")
  fs.writeFileSync(
    path.join(ws, "kiln.json"),
    JSON.stringify({
      processes: {
        p: { argv: ["./tool.sh"], inputs: ["tool.sh", "in.txt"], outputs: ["out.txt"], namedCaches: { c: "cache" } }
      }
    })
  )
  // Stands for /dev/shm and /tmp: anyone may make an entry, only its owner may rename or remove it.
  const shared = path.join(root, "shm")
  fs.mkdirSync(shared)
  fs.chmodSync(shared, 0o1777)
  return {
    root,
    ws,
    shared,
    store: path.join(root, "store"),
    sandboxes: path.join(root, "sandboxes"),
    named: path.join(root, "named")
  }
})

type Dirs = Effect.Effect.Success<typeof setup>

/** A directory made by `owner` with `mode` (chmod: the umask does not apply), as that user would have made it. */
const madeBy = (p: string, uid: number, gid: number, mode: number) => {
  fs.mkdirSync(p)
  fs.chownSync(p, uid, gid)
  fs.chmodSync(p, mode)
  return p
}

/** Runs the CLI to its end, with only the environment given here (HOME in the temp dir, no runtime dir inherited). */
const kiln = (dirs: Dirs, args: ReadonlyArray<string>, env: Record<string, string> = {}): Effect.Effect<Result> =>
  Effect.scoped(Effect.gen(function*() {
    const base: Record<string, string> = {}
    // And no standby engine: these runs' runtime directories are the test's to judge, not to leave one in.
    for (const k of ["PATH", "KILN_SPAWNER", "KILN_STANDBY"]) {
      if (process.env[k] !== undefined) base[k] = process.env[k]!
    }
    const child = yield* Effect.acquireRelease(
      Effect.sync(() =>
        spawn(process.execPath, [cli, ...args], {
          cwd: dirs.ws,
          stdio: ["ignore", "pipe", "pipe"],
          env: {
            ...base,
            HOME: dirs.root,
            KILN_STORE_DIR: dirs.store,
            KILN_SANDBOX_ROOT: dirs.sandboxes,
            KILN_NAMED_CACHES_DIR: dirs.named,
            ...env
          }
        })
      ),
      (child) => Effect.sync(() => child.exitCode === null && child.signalCode === null && child.kill("SIGKILL"))
    )
    let stdout = ""
    let stderr = ""
    child.stdout!.on("data", (d) => (stdout += d))
    child.stderr!.on("data", (d) => (stderr += d))
    return yield* Effect.async<Result>((resume) => {
      child.once("close", (code) => resume(Effect.succeed({ code, stdout, stderr })))
    })
  }))

const run = (dirs: Dirs, extra: ReadonlyArray<string> = [], env: Record<string, string> = {}) =>
  kiln(dirs, ["run", "--progress", "plain", ...extra], env)

const quote = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")

/** Exit 2 and exactly one line on stderr, naming `root`, the directory at fault with its owner and mode, and why. */
const refused = (r: Result, role: string, root: string, at: string, owner: number, mode: string, why: string) => {
  assert.strictEqual(r.code, 2, r.stderr)
  const what = `\\(owner uid ${owner}, mode ${mode}\\)`
  const line = root === at
    ? `kiln: refusing the ${role} ${quote(root)} ${what}: it ${quote(why)}`
    : `kiln: refusing the ${role} ${quote(root)}: ${quote(at)} ${what} ${quote(why)}`
  assert.match(r.stderr, new RegExp(`^${line}\n$`))
}

/** Nothing ran: no output, and nothing made in the refused directory. */
const nothingRan = (dirs: Dirs, refusedDir: string) => {
  assert.isFalse(fs.existsSync(path.join(dirs.ws, "out.txt")))
  if (fs.existsSync(refusedDir)) assert.deepStrictEqual(fs.readdirSync(refusedDir), [])
}

describe.skipIf(!isRoot)("roots another user made or can write (as root)", () => {
  it.scoped("a sandbox root another user made first (/dev/shm/kiln): exit 2, its owner and mode, nothing made", () =>
    Effect.gen(function*() {
      const dirs = yield* setup
      const taken = madeBy(path.join(dirs.shared, "kiln"), NOBODY, NOBODY, 0o777)
      const args = ["--sandbox-root", taken]
      refused(yield* run(dirs, args), "sandbox root", taken, taken, NOBODY, "0777", "is writable by every user")
      nothingRan(dirs, taken)
      // Closed to others, but still theirs: they can open it again, or swap what it holds.
      fs.chmodSync(taken, 0o700)
      refused(
        yield* run(dirs, args),
        "sandbox root",
        taken,
        taken,
        NOBODY,
        "0700",
        "is another user's (kiln runs as uid 0)"
      )
      nothingRan(dirs, taken)
      // Root's own, but open to all.
      const open = madeBy(path.join(dirs.root, "open"), 0, 0, 0o777)
      refused(
        yield* run(dirs, ["--sandbox-root", open]),
        "sandbox root",
        open,
        open,
        0,
        "0777",
        "is writable by every user"
      )
      // Root's own and private, in a directory anyone can write and which is not sticky: anyone can swap it.
      const inside = madeBy(path.join(open, "sandboxes"), 0, 0, 0o700)
      refused(
        yield* run(dirs, ["--sandbox-root", inside]),
        "sandbox root",
        inside,
        open,
        0,
        "0777",
        "is writable by every user, who can replace what it holds"
      )
      nothingRan(dirs, inside)
      // One kiln makes itself in the sticky directory is private, and its sandboxes are too.
      const own = path.join(dirs.shared, "kiln-root")
      const ok = yield* run(dirs, ["--sandbox-root", own, "--keep-sandboxes", "always"])
      assert.strictEqual(ok.code, 0, ok.stderr)
      assert.strictEqual(fs.statSync(own).mode & 0o7777, 0o700)
      const kept = fs.readdirSync(own).filter((n) => /^kiln-sandbox-[^.]+$/.test(n))
      assert.lengthOf(kept, 1)
      assert.strictEqual(fs.statSync(path.join(own, kept[0]!)).mode & 0o777, 0o700)
    }))

  it.scoped("a store root another user made, or anyone can write: exit 2, for `kiln run` and `kiln store`", () =>
    Effect.gen(function*() {
      const dirs = yield* setup
      const theirs = madeBy(path.join(dirs.shared, "store"), NOBODY, NOBODY, 0o700)
      const why = "is another user's (kiln runs as uid 0)"
      refused(yield* run(dirs, ["--store-dir", theirs]), "store root", theirs, theirs, NOBODY, "0700", why)
      refused(
        yield* kiln(dirs, ["store", "check", "--store-dir", theirs]),
        "store root",
        theirs,
        theirs,
        NOBODY,
        "0700",
        why
      )
      nothingRan(dirs, theirs)
      fs.chmodSync(theirs, 0o777)
      refused(
        yield* run(dirs, ["--store-dir", theirs]),
        "store root",
        theirs,
        theirs,
        NOBODY,
        "0777",
        "is writable by every user"
      )
      const open = madeBy(path.join(dirs.root, "open-store"), 0, 0, 0o777)
      refused(yield* run(dirs, ["--store-dir", open]), "store root", open, open, 0, "0777", "is writable by every user")
      nothingRan(dirs, open)
    }))

  it.scoped("a store shared with the user's group on purpose (setgid, group-writable) is used, whoever made it", () =>
    Effect.gen(function*() {
      const dirs = yield* setup
      // Made by another member of group 0 (root's), as README says: `mkdir -m 2770`.
      const team = madeBy(path.join(dirs.root, "team-store"), NOBODY, 0, 0o2770)
      const r = yield* run(dirs, ["--store-dir", team])
      assert.strictEqual(r.code, 0, r.stderr)
      assert.strictEqual(fs.readFileSync(path.join(dirs.ws, "out.txt"), "utf8"), "a private input\n")
      assert.strictEqual(fs.statSync(team).mode & 0o7777, 0o2770, "kiln keeps the mode of a root that exists")
      const check = yield* kiln(dirs, ["store", "check", "--store-dir", team])
      assert.strictEqual(check.code, 0, check.stderr)
      assert.match(check.stdout, /^checked \d+ entries: clean$/m)
      // Not setgid: nothing says it is shared on purpose, and it is another user's.
      fs.chmodSync(team, 0o770)
      refused(
        yield* run(dirs, ["--store-dir", team]),
        "store root",
        team,
        team,
        NOBODY,
        "0770",
        "is another user's (kiln runs as uid 0)"
      )
      // Shared with the group and with everyone.
      fs.chmodSync(team, 0o2777)
      refused(
        yield* run(dirs, ["--store-dir", team]),
        "store root",
        team,
        team,
        NOBODY,
        "2777",
        "is writable by every user"
      )
    }))

  it.scoped("a named caches directory another user made: exit 2", () =>
    Effect.gen(function*() {
      const dirs = yield* setup
      const theirs = madeBy(path.join(dirs.shared, "named"), NOBODY, NOBODY, 0o755)
      refused(
        yield* run(dirs, ["--named-caches-dir", theirs]),
        "named caches directory",
        theirs,
        theirs,
        NOBODY,
        "0755",
        "is another user's (kiln runs as uid 0)"
      )
      nothingRan(dirs, theirs)
      // One kiln makes is private to its user.
      const r = yield* run(dirs)
      assert.strictEqual(r.code, 0, r.stderr)
      assert.strictEqual(fs.statSync(dirs.named).mode & 0o7777, 0o700)
    }))

  it.scoped("a runtime directory another user took first is passed over: the sandboxer starts, the run succeeds", () =>
    Effect.gen(function*() {
      const dirs = yield* setup
      // An input tree past 16 MiB, which the sandboxer writes (the engine writes smaller ones): its socket is in the
      // runtime directory.
      fs.writeFileSync(path.join(dirs.ws, "big.bin"), Buffer.alloc(17 * 1024 * 1024, 1))
      const config = JSON.parse(fs.readFileSync(path.join(dirs.ws, "kiln.json"), "utf8")) as {
        processes: { p: { inputs: Array<string> } }
      }
      config.processes.p.inputs.push("big.bin")
      fs.writeFileSync(path.join(dirs.ws, "kiln.json"), JSON.stringify(config))
      const runtime = path.join(dirs.root, ".cache", "kiln", "run")
      // $XDG_RUNTIME_DIR open to all, where another user made `kiln` first (as /tmp/kiln-<uid> could be taken).
      const openXdg = madeBy(path.join(dirs.root, "xdg-open"), NOBODY, NOBODY, 0o777)
      madeBy(path.join(openXdg, "kiln"), NOBODY, NOBODY, 0o777)
      const first = yield* run(dirs, [], { XDG_RUNTIME_DIR: openXdg })
      assert.strictEqual(first.code, 0, first.stderr)
      assert.strictEqual(fs.readFileSync(path.join(dirs.ws, "out.txt"), "utf8"), "a private input\n")
      assert.deepStrictEqual(fs.readdirSync(path.join(openXdg, "kiln")), [], "nothing of kiln's in theirs")
      assert.strictEqual(fs.statSync(runtime).mode & 0o7777, 0o700)
      assert.strictEqual(fs.statSync(runtime).uid, 0)
      // A private $XDG_RUNTIME_DIR whose `kiln` another user made (root let them): passed over too.
      const xdg = madeBy(path.join(dirs.root, "xdg"), 0, 0, 0o700)
      madeBy(path.join(xdg, "kiln"), NOBODY, NOBODY, 0o700)
      fs.rmSync(path.join(dirs.ws, "out.txt"))
      const second = yield* run(dirs, ["--cache", "off"], { XDG_RUNTIME_DIR: xdg })
      assert.strictEqual(second.code, 0, second.stderr)
      assert.strictEqual(fs.readFileSync(path.join(dirs.ws, "out.txt"), "utf8"), "a private input\n")
      assert.deepStrictEqual(fs.readdirSync(path.join(xdg, "kiln")), [])
    }))

  it.scoped("a FIFO a member of a shared store's group put in its layout, usage or generation file: one line, at once", () =>
    Effect.gen(function*() {
      for (const file of ["kiln-store.json", "usage", "cap.json", "generation"]) {
        const dirs = yield* setup
        const team = madeBy(path.join(dirs.root, "team-store"), process.geteuid?.() ?? 0, 0, 0o2770)
        const first = yield* run(dirs, ["--store-dir", team])
        assert.strictEqual(first.code, 0, first.stderr)
        fs.rmSync(path.join(team, file), { force: true })
        assert.strictEqual(spawnSync("mkfifo", [path.join(team, file)]).status, 0)
        const stats = yield* kiln(dirs, ["store", "stats", "--store-dir", team])
        if (file === "generation") {
          // Read as "none": its only reader (the run memo's check) then trusts nothing it remembered.
          assert.strictEqual(stats.code, 0, stats.stderr)
        } else {
          assert.notStrictEqual(stats.code, 0)
          assert.include(stats.stderr, `${path.join(team, file)} is not a regular file`, stats.stderr)
          assert.strictEqual(stats.stderr.trim().split("\n").length, 1, stats.stderr)
        }
      }
    }))
})
