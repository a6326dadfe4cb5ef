/**
 * Bad input and hostile conditions, end to end through the built CLI: a kiln.json that is not JSON, a glob that
 * matches nothing, an output made as the wrong kind, a dangling symlink among the inputs, a sandbox root and a store
 * kiln cannot write, a disk that fills up during a run, and a store file truncated on disk. Each is one line on
 * stderr that names the thing, a non-zero exit (no signal, no stack trace), and a store that `kiln store check`
 * finds clean afterwards.
 *
 * Read-only and full file systems are real: tmpfs and read-only bind mounts (root only). "Unwritable" is tested as
 * another user (uid 65534), since root ignores permission bits. Every mount is undone by its test's scope.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Fiber } from "effect"
import { execFileSync, spawn } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { startTimeOf } from "../../src/os/Proc.js"
import { eventually } from "../utils/child.js"
import { type CliResult, failsWith, runCli } from "../utils/cliRun.js"
import { tempDir } from "../utils/temp.js"
import { isRoot, tmpfs } from "../utils/tmpfs.js"

const NOBODY = 65534

type Result = CliResult

/** Whether this machine lets the tests mount file systems (root, with tmpfs allowed). */
const canMount = (() => {
  if (process.getuid?.() !== 0) return false
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "kiln-mount-probe-"))
  try {
    execFileSync("mount", ["-t", "tmpfs", "-o", "size=64k", "tmpfs", dir], { stdio: "ignore" })
    execFileSync("umount", [dir], { stdio: "ignore" })
    return true
  } catch {
    return false
  } finally {
    fs.rmSync(dir, { recursive: true, force: true })
  }
})()

/** `dir` bind-mounted read-only over itself, until the scope closes. */
const readOnlyBind = (dir: string) =>
  Effect.acquireRelease(
    Effect.sync(() => {
      execFileSync("mount", ["--bind", dir, dir])
      execFileSync("mount", ["-o", "remount,ro,bind", dir])
    }),
    () => Effect.sync(() => execFileSync("umount", [dir]))
  )

/** A temp root with a workspace holding `config`, and where kiln's store, sandboxes and named caches go. */
const setup = (config: unknown, files: Record<string, string> = {}) =>
  Effect.gen(function*() {
    const root = yield* tempDir("kiln-hostile-")
    fs.chmodSync(root, 0o755) // Reachable by the other user of the permission tests.
    const ws = path.join(root, "ws")
    fs.mkdirSync(ws)
    fs.writeFileSync(path.join(ws, "kiln.json"), typeof config === "string" ? config : JSON.stringify(config))
    for (const [rel, content] of Object.entries(files)) {
      fs.mkdirSync(path.dirname(path.join(ws, rel)), { recursive: true })
      fs.writeFileSync(path.join(ws, rel), content)
    }
    const dirs = {
      root,
      ws,
      store: path.join(root, "store"),
      sandboxes: path.join(root, "sandboxes"),
      named: path.join(root, "named")
    }
    fs.mkdirSync(dirs.sandboxes)
    return dirs
  })

type Dirs = Effect.Effect.Success<ReturnType<typeof setup>>

/** Runs the CLI to its end in the workspace, with the test's own store, sandboxes and home. */
const kiln = (
  dirs: Dirs,
  args: ReadonlyArray<string>,
  options: { readonly uid?: number; readonly cwd?: string; readonly store?: string; readonly sandboxes?: string } = {}
): Effect.Effect<Result> =>
  Effect.suspend(() =>
    runCli(args, {
      cwd: options.cwd ?? dirs.ws,
      env: {
        ...process.env,
        HOME: dirs.root,
        KILN_STORE_DIR: options.store ?? dirs.store,
        KILN_SANDBOX_ROOT: options.sandboxes ?? dirs.sandboxes,
        KILN_NAMED_CACHES_DIR: dirs.named,
        // A fresh store's first run starts a collection; detached, it would outlive the run and hold the full-disk
        // tests' tmpfs busy at unmount. Waiting for it keeps each run's processes inside the run.
        KILN_STORE_GC: "wait",
        // Another user's kiln refuses the suite's lock directory (root's): it gets one of its own.
        ...(options.uid !== undefined ? { KILN_LOCK_DIR: lockDirOf(dirs, options.uid) } : {})
      },
      ...(options.uid !== undefined ? { uid: options.uid } : {})
    })
  )

/** A workspace lock directory of `uid`'s own, made for it once. */
const lockDirOf = (dirs: Dirs, uid: number) => {
  const dir = path.join(dirs.root, `locks-${uid}`)
  if (!fs.existsSync(dir)) {
    fs.mkdirSync(dir, { mode: 0o700 })
    fs.chownSync(dir, uid, uid)
  }
  return dir
}

const run = (
  dirs: Dirs,
  extra: ReadonlyArray<string> = [],
  options: Parameters<typeof kiln>[2] & { readonly progress?: string } = {}
) => kiln(dirs, ["run", "--progress", options.progress ?? "plain", ...extra], options)

const quote = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")

/** `kiln store check` on the store finds it clean. */
const checkClean = (dirs: Dirs, store = dirs.store) =>
  Effect.map(kiln(dirs, ["store", "check", "--store-dir", store]), (r) => {
    assert.strictEqual(r.code, 0, `${r.stdout}${r.stderr}`)
    assert.match(r.stdout, /^checked \d+ entries: clean$/m)
    assert.strictEqual(r.stderr, "")
  })

const writes = (file: string, text: string) => ({ argv: ["/bin/sh", "-c", `printf '${text}' > ${file}`] })

describe("bad input", () => {
  it.scoped("a kiln.json that is not JSON: exit 2, the file and the parser's complaint", () =>
    Effect.gen(function*() {
      const dirs = yield* setup({ processes: { a: { ...writes("a.txt", "a"), outputs: ["a.txt"] } } })
      assert.strictEqual((yield* run(dirs)).code, 0)
      fs.writeFileSync(path.join(dirs.ws, "kiln.json"), "{ \"processes\": { \"a\": ")
      failsWith(yield* run(dirs), 2, /^kiln: kiln\.json:1:\d+: not valid JSON: expected a value$/)
      yield* checkClean(dirs)
    }))

  it.scoped("a glob that matches nothing is an error naming the process and the glob, with any --progress", () =>
    Effect.gen(function*() {
      const dirs = yield* setup({
        processes: {
          a: { argv: ["true"], inputs: ["src/**/*.c", "nothing/**/*.c"] },
          b: { ...writes("b.txt", "b"), outputs: ["b.txt"] }
        }
      }, { "src/main.c": "int main;\n" })
      const line = /^✗ a: kiln\.json: processes\.a\.inputs\[1\]: glob "nothing\/\*\*\/\*\.c" matches nothing$/
      failsWith(yield* run(dirs, ["--keep-going"]), 1, line)
      failsWith(yield* run(dirs, ["--keep-going"], { progress: "none" }), 1, line)
      assert.strictEqual(fs.readFileSync(path.join(dirs.ws, "b.txt"), "utf8"), "b")
      yield* checkClean(dirs)
    }))

  it.scoped("an output declared as a file but made as a directory (and the reverse) is named as declared", () =>
    Effect.gen(function*() {
      const dirs = yield* setup({
        processes: { a: { argv: ["/bin/sh", "-c", "mkdir -p out.txt && echo x > out.txt/f"], outputs: ["out.txt"] } }
      })
      const line = new RegExp(
        "^✗ a: output `out\\.txt` is declared as a file, but the process made a directory there " +
          "\\(declare `out\\.txt/` to capture a directory\\)$"
      )
      failsWith(yield* run(dirs), 1, line)
      // Not cached as a success, nothing written back.
      failsWith(yield* run(dirs), 1, line)
      assert.isFalse(fs.existsSync(path.join(dirs.ws, "out.txt")))
      fs.writeFileSync(
        path.join(dirs.ws, "kiln.json"),
        JSON.stringify({ processes: { a: { ...writes("gen", "x"), outputs: ["gen/"] } } })
      )
      failsWith(
        yield* run(dirs),
        1,
        /^✗ a: output `gen\/` is declared as a directory, but the process made a file there$/
      )
      yield* checkClean(dirs)
    }))

  it.scoped("two processes declaring one output: a config error naming both, before anything runs", () =>
    Effect.gen(function*() {
      // Each would write the other's file back: which one the workspace holds would depend on the order they ran.
      const dirs = yield* setup({
        processes: {
          a: { ...writes("out.txt", "a"), outputs: ["out.txt"] },
          c: { ...writes("out.txt", "c"), outputs: ["out.txt"] },
          b: { argv: ["true"], deps: ["a", "c"] }
        }
      })
      failsWith(
        yield* run(dirs, ["b"]),
        2,
        /^kiln: kiln\.json:\d+:\d+: processes\.c\.outputs\[0\]: out\.txt is also an output of "a" \(out\.txt\): two processes cannot write the same path back$/
      )
      yield* checkClean(dirs)
    }))

  it.scoped("a dangling symlink among the inputs is kept as the symlink it is: the process sees it dangle", () =>
    Effect.gen(function*() {
      // REAPI trees hold symlinks, and kiln never follows one: a dangling link is a link like any other (git and
      // Bazel keep them too). The process gets exactly what the workspace has, and fails by itself if it reads it.
      const dirs = yield* setup({
        processes: {
          look: {
            argv: ["/bin/sh", "-c", "readlink lib/link > seen.txt; test -e lib/link || echo dangling >> seen.txt"],
            inputs: ["lib/**"],
            outputs: ["seen.txt"]
          },
          read: { argv: ["/bin/cat", "lib/link"], inputs: ["lib/**"], deps: ["look"] }
        }
      }, { "lib/real.txt": "real\n" })
      fs.symlinkSync("../missing/target.txt", path.join(dirs.ws, "lib/link"))
      const r = yield* run(dirs)
      assert.isNull(r.signal)
      assert.strictEqual(r.code, 1, r.stderr)
      assert.strictEqual(fs.readFileSync(path.join(dirs.ws, "seen.txt"), "utf8"), "../missing/target.txt\ndangling\n")
      // The process that reads it fails with its own error, naming the link.
      assert.include(r.stderr, "✗ read exit 1")
      assert.include(r.stderr, "lib/link: No such file or directory")
      const snap = yield* kiln(dirs, ["store", "snapshot", dirs.ws, "--glob", "lib/**"])
      assert.strictEqual(snap.code, 0, snap.stderr)
      assert.include(
        (yield* kiln(dirs, ["store", "ls", snap.stdout.trim()])).stdout,
        "lib/link -> ../missing/target.txt"
      )
      yield* checkClean(dirs)
    }))
})

describe.skipIf(!canMount)("a sandbox root or a store kiln cannot write", () => {
  it.scoped("a sandbox root on a read-only file system: the root and EROFS", () =>
    Effect.gen(function*() {
      const dirs = yield* setup({ processes: { a: { ...writes("a.txt", "a"), outputs: ["a.txt"] } } })
      const ro = yield* tmpfs(path.join(dirs.root, "ro"), "1m", { mode: "0700", readOnly: true })
      failsWith(
        yield* run(dirs, ["--sandbox-root", ro]),
        1,
        new RegExp(`^✗ a: ${quote(ro)}: cannot create a sandbox: read-only file system \\(EROFS\\)$`)
      )
      assert.isFalse(fs.existsSync(path.join(dirs.ws, "a.txt")))
      yield* checkClean(dirs)
    }))

  it.scoped("a store on a read-only file system, fresh or already full of entries: the path and EROFS", () =>
    Effect.gen(function*() {
      const dirs = yield* setup({ processes: { a: { ...writes("a.txt", "a"), outputs: ["a.txt"] } } })
      const ro = yield* tmpfs(path.join(dirs.root, "ro"), "1m", { mode: "0700", readOnly: true })
      const fresh = path.join(ro, "store")
      failsWith(
        yield* run(dirs, [], { store: fresh }),
        1,
        new RegExp(`^kiln: ${quote(fresh)}: cannot open the store: read-only file system \\(EROFS\\)$`)
      )
      assert.strictEqual((yield* run(dirs)).code, 0)
      fs.rmSync(path.join(dirs.ws, "a.txt"))
      yield* Effect.scoped(Effect.gen(function*() {
        yield* readOnlyBind(dirs.store)
        failsWith(
          yield* run(dirs),
          1,
          new RegExp(
            `^kiln: ${quote(dirs.store)}/\\w+/[0-9a-f]+: cannot open the LMDB environment: ` +
              "read-only file system \\(EROFS\\)$"
          )
        )
      }))
      yield* checkClean(dirs)
      assert.strictEqual((yield* run(dirs)).code, 0)
      assert.strictEqual(fs.readFileSync(path.join(dirs.ws, "a.txt"), "utf8"), "a")
    }))
})

describe.skipIf(!isRoot)("as another user: a sandbox root and a store it may not write", () => {
  it.scoped("a sandbox root owned by root: the root and EACCES", () =>
    Effect.gen(function*() {
      const dirs = yield* setup({ processes: { a: { ...writes("a.txt", "a"), outputs: ["a.txt"] } } })
      fs.chownSync(dirs.ws, NOBODY, NOBODY)
      const mine = path.join(dirs.root, "nobody")
      fs.mkdirSync(mine)
      fs.chownSync(mine, NOBODY, NOBODY)
      const store = path.join(mine, "store")
      const rootOnly = path.join(dirs.root, "root-only")
      fs.mkdirSync(rootOnly, { mode: 0o755 })
      // Another user's: refused before anything runs (it could read the inputs, or swap a sandbox).
      failsWith(
        yield* run(dirs, ["--sandbox-root", rootOnly], { uid: NOBODY, store }),
        2,
        new RegExp(
          `^kiln: refusing the sandbox root ${quote(rootOnly)} \\(owner uid 0, mode 0755\\): it is another user's`
        )
      )
      // A sandbox root of its own it cannot make: the root and EACCES.
      const notMade = path.join(rootOnly, "sandboxes")
      failsWith(
        yield* run(dirs, ["--sandbox-root", notMade], { uid: NOBODY, store }),
        1,
        new RegExp(`^✗ a: ${quote(notMade)}: cannot create a sandbox: permission denied \\(EACCES\\)$`)
      )
      // Checked by its owner: root refuses a store another user owns.
      const check = yield* kiln(dirs, ["store", "check", "--store-dir", store], { uid: NOBODY })
      assert.strictEqual(check.code, 0, `${check.stdout}${check.stderr}`)
      assert.match(check.stdout, /^checked \d+ entries: clean$/m)
    }))

  it.scoped("a store owned by root, new or existing: the path and EACCES", () =>
    Effect.gen(function*() {
      const dirs = yield* setup({ processes: { a: { ...writes("a.txt", "a"), outputs: ["a.txt"] } } })
      fs.chownSync(dirs.ws, NOBODY, NOBODY)
      const sandboxes = path.join(dirs.root, "nobody-sandboxes")
      fs.mkdirSync(sandboxes)
      fs.chownSync(sandboxes, NOBODY, NOBODY)
      const rootOnly = path.join(dirs.root, "root-only")
      fs.mkdirSync(rootOnly, { mode: 0o755 })
      const fresh = path.join(rootOnly, "store")
      failsWith(
        yield* run(dirs, [], { uid: NOBODY, store: fresh, sandboxes }),
        1,
        new RegExp(`^kiln: ${quote(fresh)}: cannot open the store: permission denied \\(EACCES\\)$`)
      )
      assert.strictEqual((yield* run(dirs)).code, 0) // root makes the store, private to root (0700)
      // Another user's store, private or opened up to be read: refused before anything in it is read.
      for (const mode of [0o700, 0o755]) {
        fs.chmodSync(dirs.store, mode)
        failsWith(
          yield* run(dirs, [], { uid: NOBODY, sandboxes }),
          2,
          new RegExp(
            `^kiln: refusing the store root ${quote(dirs.store)} \\(owner uid 0, mode 0${
              mode.toString(8)
            }\\): it is another user's \\(kiln runs as uid 65534\\)$`
          )
        )
      }
      // Not group-writable: root's. Shared with nobody's group on purpose (setgid, group-writable): then the LMDB
      // environment nobody may write is named.
      fs.chownSync(dirs.store, 0, NOBODY)
      fs.chmodSync(dirs.store, 0o2750)
      failsWith(
        yield* run(dirs, [], { uid: NOBODY, sandboxes }),
        2,
        /^kiln: refusing the store root .*\(owner uid 0, mode 2750\): it is another user's/
      )
      fs.chmodSync(dirs.store, 0o2770)
      failsWith(
        yield* run(dirs, [], { uid: NOBODY, sandboxes }),
        1,
        new RegExp(
          `^kiln: ${
            quote(dirs.store)
          }/\\w+/[0-9a-f]+: cannot open the LMDB environment: permission denied \\(EACCES\\)$`
        )
      )
      fs.chownSync(dirs.store, 0, 0)
      fs.chmodSync(dirs.store, 0o700)
      yield* checkClean(dirs)
    }))
})

describe.skipIf(!canMount)("a disk that fills up during a run", () => {
  /** Writes `count` random files of `size` bytes under `out/` (small files: LMDB's part of the store). */
  const many = (count: number, size: number) => ({
    argv: [
      "/bin/sh",
      "-c",
      `mkdir -p out && i=0; while [ $i -lt ${count} ]; do head -c ${size} /dev/urandom > out/f$i; i=$((i+1)); done`
    ],
    outputs: ["out/"]
  })
  const big = { argv: ["/bin/sh", "-c", "head -c 12000000 /dev/urandom > big.bin"], outputs: ["big.bin"] }

  it.scoped("the store's disk, by small outputs (LMDB): the shard and how much room it needed", () =>
    Effect.gen(function*() {
      const dirs = yield* setup({ processes: { gen: many(300, 30_000) } })
      yield* tmpfs(dirs.store, "8m", { mode: "0700" })
      failsWith(
        yield* run(dirs),
        1,
        new RegExp(
          `^✗ gen: ${quote(dirs.store)}/files/[0-9a-f]+: write failed: no space left on device ` +
            "\\([\\d.]+ \\w+ free, the write needs about [\\d.]+ \\w+\\)$"
        )
      )
      assert.isFalse(fs.existsSync(path.join(dirs.ws, "out")))
      yield* checkClean(dirs)
      execFileSync("mount", ["-o", "remount,size=64m", dirs.store])
      assert.strictEqual((yield* run(dirs)).code, 0)
      assert.lengthOf(fs.readdirSync(path.join(dirs.ws, "out")), 300)
      yield* checkClean(dirs)
    }))

  it.scoped("the store's disk, by a large output: the store's large-file folder", () =>
    Effect.gen(function*() {
      const dirs = yield* setup({ processes: { big } })
      yield* tmpfs(dirs.store, "8m", { mode: "0700" })
      failsWith(
        yield* run(dirs),
        1,
        new RegExp(
          `^✗ big: ${
            quote(dirs.store)
          }/immutable/files: cannot store a large file: no space left on device \\(ENOSPC\\)$`
        )
      )
      yield* checkClean(dirs)
    }))

  it.scoped("a store made on a disk with no room for it: the shard it could not create", () =>
    Effect.gen(function*() {
      const dirs = yield* setup({ processes: { a: { ...writes("a.txt", "a"), outputs: ["a.txt"] } } })
      yield* tmpfs(dirs.store, "200k", { mode: "0700" })
      failsWith(
        yield* run(dirs),
        1,
        new RegExp(
          `^kiln: ${
            quote(dirs.store)
          }/\\w+/[0-9a-f]+: cannot create an LMDB environment: no space left on device \\([\\d.]+ \\w+ free\\)$`
        )
      )
      execFileSync("mount", ["-o", "remount,size=64m", dirs.store])
      yield* checkClean(dirs)
    }))

  it.scoped("the workspace's disk, while outputs are written back: the file, and no partial file left", () =>
    Effect.gen(function*() {
      const dirs = yield* setup({ processes: { big } })
      const ws = path.join(dirs.root, "small-ws")
      yield* tmpfs(ws, "4m", { mode: "0700" })
      fs.copyFileSync(path.join(dirs.ws, "kiln.json"), path.join(ws, "kiln.json"))
      const line = new RegExp(
        `^✗ big: cannot write outputs back: ${
          quote(ws)
        }/big\\.bin: cannot write an output file: no space left on device \\(ENOSPC\\)$`
      )
      failsWith(yield* run(dirs, [], { cwd: ws }), 1, line)
      assert.deepStrictEqual(fs.readdirSync(ws), ["kiln.json"])
      // The process succeeded and is cached; writing back fails the same way, and says so, also with no progress.
      failsWith(yield* run(dirs, [], { cwd: ws, progress: "none" }), 1, line)
      yield* checkClean(dirs)
    }))

  it.scoped("the sandboxes' disk, while inputs are materialized: the file in the sandbox", () =>
    Effect.gen(function*() {
      const dirs = yield* setup({ processes: { a: { argv: ["/bin/cat", "in.bin"], inputs: ["in.bin"] } } })
      fs.writeFileSync(path.join(dirs.ws, "in.bin"), Buffer.alloc(3_000_000, 7))
      const sandboxes = yield* tmpfs(path.join(dirs.root, "small-sandboxes"), "1m", { mode: "0700" })
      failsWith(
        yield* run(dirs, ["--sandbox-root", sandboxes]),
        1,
        new RegExp(
          `^✗ a: ${
            quote(sandboxes)
          }/kiln-sandbox-[\\w-]+/in\\.bin: cannot materialize: no space left on device \\(ENOSPC\\)$`
        )
      )
      assert.deepStrictEqual(fs.readdirSync(sandboxes), [])
      yield* checkClean(dirs)
    }))
})

describe("a store file truncated on disk", () => {
  /** The shard of `kind` whose data file is largest: the one the run wrote most to. */
  const fullestShard = (store: string, kind: string) =>
    fs.readdirSync(path.join(store, kind)).map((s) => path.join(store, kind, s, "data.mdb"))
      .sort((a, b) => fs.statSync(b).size - fs.statSync(a).size)[0]!

  for (
    const [what, cut] of [["to half its pages", 0.5], [
      "into its first page, its lock file gone (a copied store)",
      0
    ]] as const
  ) {
    it.scoped(`cut ${what}: one line naming the file, check finds it, --repair sets it aside, the run recovers`, () =>
      Effect.gen(function*() {
        const dirs = yield* setup({
          processes: {
            gen: {
              argv: ["/bin/sh", "-c", "mkdir -p out && seq 1 2000 > out/n.txt && echo hi > out/hi.txt"],
              outputs: ["out/"]
            },
            use: { argv: ["/bin/sh", "-c", "wc -l < out/n.txt > count.txt"], deps: ["gen"], outputs: ["count.txt"] }
          }
        })
        assert.strictEqual((yield* run(dirs)).code, 0)
        const file = fullestShard(dirs.store, "files")
        const pages = fs.statSync(file).size / 4096
        fs.truncateSync(file, cut === 0 ? 100 : Math.floor(pages * cut) * 4096)
        if (cut === 0) fs.rmSync(path.join(path.dirname(file), "lock.mdb"))
        const line = new RegExp(
          `^kiln: ${
            quote(file)
          }: truncated \\(\\d+ bytes, .+\\); \`kiln store check --repair\` sets the shard aside, ` +
            "and re-running makes again what it held \\(the store is a cache\\)$"
        )
        failsWith(yield* run(dirs), 1, line)
        failsWith(yield* kiln(dirs, ["store", "check"]), 1, line)
        const repair = yield* kiln(dirs, ["store", "check", "--repair"])
        assert.strictEqual(repair.code, 1, repair.stderr)
        assert.match(
          repair.stdout,
          new RegExp(`^set aside ${quote(file)}, truncated .*: moved to ${quote(dirs.store)}/corrupt/`)
        )
        yield* checkClean(dirs)
        fs.rmSync(path.join(dirs.ws, "out"), { recursive: true })
        fs.rmSync(path.join(dirs.ws, "count.txt"))
        const again = yield* run(dirs)
        assert.strictEqual(again.code, 0, again.stderr)
        assert.strictEqual(fs.readFileSync(path.join(dirs.ws, "count.txt"), "utf8").trim(), "2000")
        yield* checkClean(dirs)
      }))
  }
})

describe("a machine that went down while kiln wrote the store (commits are synced when a run ends)", () => {
  const config = {
    processes: {
      gen: { argv: ["/bin/sh", "-c", "seq 1 2000 > n.txt"], outputs: ["n.txt"] },
      use: { argv: ["/bin/sh", "-c", "wc -l < n.txt > count.txt"], deps: ["gen"], outputs: ["count.txt"] }
    }
  }
  const markers = (dirs: Dirs) => fs.readdirSync(path.join(dirs.store, "unsynced")).sort()
  const boot = fs.readFileSync("/proc/sys/kernel/random/boot_id", "utf8").trim()
  const dataFiles = (dirs: Dirs) =>
    ["files", "directories", "actions", "locks"].flatMap((kind) =>
      fs.readdirSync(path.join(dirs.store, kind)).map((s) => path.join(dirs.store, kind, s, "data.mdb"))
    ).filter((f) => fs.existsSync(f)).sort()

  it.scoped("a run leaves no marker; one of an earlier boot refuses every shard until --repair sets them aside", () =>
    Effect.gen(function*() {
      const dirs = yield* setup(config)
      assert.strictEqual((yield* run(dirs)).code, 0)
      assert.deepStrictEqual(markers(dirs), [])
      // What a run leaves when the machine goes down before it synced: its marker, named by another boot.
      const marker = path.join(dirs.store, "unsynced", `00000000-dead-boot-0000-000000000000_4242_1234`)
      fs.writeFileSync(marker, "")
      // A run the run memo answers reads nothing of the store; one that restores an output must open its shards.
      fs.rmSync(path.join(dirs.ws, "count.txt"))
      const line = new RegExp(
        `^kiln: ${quote(dirs.store)}/\\w+/\\d+/data\\.mdb: the machine went down while kiln \\(pid 4242\\) was ` +
          `writing to this store, before it synced \\(${quote(marker)}\\), so its LMDB files may be torn; ` +
          "`kiln store check --repair` sets the shard aside, and re-running makes again what it held " +
          "\\(the store is a cache\\)$"
      )
      failsWith(yield* run(dirs), 1, line)
      failsWith(yield* kiln(dirs, ["store", "check"]), 1, line)
      const shards = dataFiles(dirs)
      const repair = yield* kiln(dirs, ["store", "check", "--repair"])
      assert.strictEqual(repair.code, 1, repair.stderr)
      const setAside = repair.stdout.split("\n").filter((l) => l.startsWith("set aside "))
      assert.deepStrictEqual(setAside.map((l) => l.slice("set aside ".length).split(",")[0]).sort(), shards)
      assert.deepStrictEqual(markers(dirs), [])
      yield* checkClean(dirs)
      fs.rmSync(path.join(dirs.ws, "n.txt"))
      const again = yield* run(dirs)
      assert.strictEqual(again.code, 0, again.stderr)
      assert.strictEqual(fs.readFileSync(path.join(dirs.ws, "count.txt"), "utf8").trim(), "2000")
      assert.deepStrictEqual(markers(dirs), [])
    }))

  it.scopedLive("a run that has committed keeps its marker until it ends", () =>
    Effect.gen(function*() {
      const started = path.join(yield* tempDir(), "started")
      const go = `${started}.go`
      const dirs = yield* setup({
        // `use` and the test signal each other through files of the host: no strict view, which would hide them.
        sandbox: "off",
        processes: {
          gen: config.processes.gen,
          // Runs once gen's outputs are stored, and waits for the test to have looked.
          use: {
            ...config.processes.use,
            argv: [
              "/bin/sh",
              "-c",
              `touch ${started}; while [ ! -e ${go} ]; do sleep 0.02; done; wc -l < n.txt > count.txt`
            ]
          }
        }
      })
      const running = yield* Effect.fork(run(dirs))
      yield* eventually("use started", () => fs.existsSync(started))
      const seen = markers(dirs)
      fs.writeFileSync(go, "")
      assert.strictEqual((yield* Fiber.join(running)).code, 0)
      assert.strictEqual(seen.length, 1, seen.join(", "))
      assert.match(seen[0]!, new RegExp(`^${quote(boot)}_\\d+_\\d+$`))
      assert.notStrictEqual(seen[0]!.split("_")[1], String(process.pid))
      assert.deepStrictEqual(markers(dirs), [])
    }))

  it.scoped("a marker of this boot whose process is gone is settled by the next run; a live writer's is left", () =>
    Effect.gen(function*() {
      const dirs = yield* setup(config)
      assert.strictEqual((yield* run(dirs)).code, 0)
      // A process of this boot that is gone (its commits are in the page cache), and one still running (this one).
      const gone = spawn("/bin/true")
      const gonePid = yield* Effect.async<number>((resume) => {
        gone.once("exit", () => resume(Effect.succeed(gone.pid!)))
      })
      const dead = `${boot}_${gonePid}_1`
      const live = `${boot}_${process.pid}_${startTimeOf(process.pid)}`
      for (const name of [dead, live]) fs.writeFileSync(path.join(dirs.store, "unsynced", name), "")
      fs.writeFileSync(
        path.join(dirs.ws, "kiln.json"),
        JSON.stringify({
          processes: {
            ...config.processes,
            more: { argv: ["/bin/sh", "-c", "echo more > more.txt"], outputs: ["more.txt"] }
          }
        })
      )
      const r = yield* run(dirs)
      assert.strictEqual(r.code, 0, r.stderr)
      assert.deepStrictEqual(markers(dirs), [live])
      yield* checkClean(dirs)
    }))
})
