/**
 * The built `kiln` executable (dist/cli.js, built by `npm test` before vitest runs), as users and scripts see it:
 * stdout, one-line errors on stderr, exit codes.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { spawnSync } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"
import { Golden, writeGoldenTree } from "../fixtures/golden.js"
import { tempDir } from "../utils/temp.js"

const cli = path.resolve("dist/cli.js")

const kiln = (args: ReadonlyArray<string>, storeDir: string) =>
  Effect.sync(() => {
    const r = spawnSync(process.execPath, [cli, ...args, "--store-dir", storeDir], { encoding: "utf8" })
    return { code: r.status, stdout: r.stdout, stderr: r.stderr.trim() }
  })

describe("kiln store", () => {
  it.scoped("snapshot prints the REAPI digest; ls, cat and materialize read it back", () =>
    Effect.gen(function*() {
      const store = yield* tempDir()
      const work = yield* tempDir()
      writeGoldenTree(work)
      const snap = yield* kiln(["store", "snapshot", work], store)
      assert.strictEqual(snap.code, 0, snap.stderr)
      assert.strictEqual(snap.stdout.trim(), Golden.v4)
      const ls = yield* kiln(["store", "ls", Golden.v4], store)
      assert.include(ls.stdout, "src/in.txt")
      assert.include(ls.stdout, "link -> src/in.txt")
      const cat = yield* kiln(["store", "cat", Golden.inTxt], store)
      assert.strictEqual(cat.stdout, "some input text\n")
      const out = path.join(yield* tempDir(), "out")
      const mat = yield* kiln(["store", "materialize", Golden.v4, out], store)
      assert.strictEqual(mat.code, 0, mat.stderr)
      assert.strictEqual(fs.readFileSync(path.join(out, "src/in.txt"), "utf8"), "some input text\n")
      const check = yield* kiln(["store", "check"], store)
      assert.strictEqual(check.code, 0)
      assert.include(check.stdout, "clean")
      const stats = yield* kiln(["store", "stats", "--json"], store)
      assert.strictEqual(JSON.parse(stats.stdout).files.entries, 2)
      // Nothing else has the store open: the slots stats itself holds to count are not reported as in use.
      assert.deepInclude(JSON.parse(stats.stdout).readers, { inUse: 0, stale: 0 })
      const rm = yield* kiln(["store", "rm", Golden.inTxt], store)
      assert.strictEqual(rm.code, 0)
      const gone = yield* kiln(["store", "cat", Golden.inTxt], store)
      assert.notStrictEqual(gone.code, 0)
    }))

  it.scoped("a bad digest, a missing digest and a missing directory are one-line errors naming them", () =>
    Effect.gen(function*() {
      const store = yield* tempDir()
      const bad = yield* kiln(["store", "cat", "abc/12"], store)
      assert.strictEqual(bad.code, 2)
      assert.include(bad.stderr, "abc/12")
      assert.strictEqual(bad.stderr.split("\n").length, 1)
      const missing = "7576ce57b04785aaa2aeb2532b3b49ac822e71292fcfa0dae582e229f593d9ea/16"
      const absent = yield* kiln(["store", "cat", missing], store)
      assert.strictEqual(absent.code, 1)
      assert.include(absent.stderr, missing)
      assert.strictEqual(absent.stderr.split("\n").length, 1)
      const noDir = yield* kiln(["store", "snapshot", "/nonexistent/kiln-dir"], store)
      assert.notStrictEqual(noDir.code, 0)
      assert.include(noDir.stderr, "/nonexistent/kiln-dir")
      const size = yield* kiln(["store", "gc", "--target-size", "12Q"], store)
      assert.strictEqual(size.code, 2)
      assert.include(size.stderr, "12Q")
    }))

  it.scoped("gc takes a size with units", () =>
    Effect.gen(function*() {
      const store = yield* tempDir()
      const gc = yield* kiln(["store", "gc", "--target-size", "1G", "--json"], store)
      assert.strictEqual(gc.code, 0, gc.stderr)
      assert.strictEqual(JSON.parse(gc.stdout).targetBytes, 1024 ** 3)
    }))

  it("help written to a pipe or a file is plain text, without terminal styles", () => {
    for (const args of [["--help"], ["store", "--help"], ["run", "--help"], ["store", "gc", "--help"]]) {
      const r = spawnSync(process.execPath, [cli, ...args], { encoding: "utf8" })
      assert.strictEqual(r.status, 0, r.stderr)
      // Every command's help is kiln's own (@effect/cli's was `USAGE`).
      assert.match(r.stdout, /Usage:/)
      assert.notInclude(r.stdout, "\u001b", args.join(" "))
    }
  })

  it("--help says what kiln is in one line, then lists its commands one a line, and the store options once", () => {
    const r = spawnSync(process.execPath, [cli, "--help"], { encoding: "utf8" })
    assert.strictEqual(r.status, 0, r.stderr)
    const lines = r.stdout.split("\n")
    assert.match(lines[0]!, /^kiln: a hermetic process-execution engine for build tools/)
    for (const command of ["run", "explain", "exec", "store", "schema", "clean"]) {
      assert.strictEqual(lines.filter((l) => new RegExp(`^  ${command} +\\S`).test(l)).length, 1, command)
    }
    assert.notInclude(r.stdout, "sandboxer", "an internal command is not listed")
    // Each store option is described once, not under every command that takes it.
    for (const option of ["--store-dir", "--store-shards", "--store-max-size", "--store-lease-time"]) {
      assert.strictEqual(r.stdout.split(`${option} `).length - 1, 1, option)
    }
    assert.strictEqual(spawnSync(process.execPath, [cli, "-h"], { encoding: "utf8" }).stdout, r.stdout)
  })

  it("a bare `kiln` prints the short help and exits 2, as a bare `git` fails; `kiln store` lists its commands", () => {
    const help = spawnSync(process.execPath, [cli, "--help"], { encoding: "utf8" }).stdout
    const bare = spawnSync(process.execPath, [cli], { encoding: "utf8" })
    assert.strictEqual(bare.status, 2)
    assert.strictEqual(bare.stdout, help)
    assert.strictEqual(bare.stderr, "")
    const store = spawnSync(process.execPath, [cli, "store"], { encoding: "utf8" })
    assert.strictEqual(store.status, 2)
    for (const command of ["snapshot", "materialize", "cat", "ls", "rm", "check", "gc", "stats"]) {
      assert.match(store.stdout, new RegExp(`^  ${command} +\\S`, "m"), command)
    }
    assert.strictEqual(spawnSync(process.execPath, [cli, "store", "--help"], { encoding: "utf8" }).stdout, store.stdout)
  })

  it("`kiln run --help` is written as `kiln --help` is: grouped, one line per option, the store options said once", () => {
    const r = spawnSync(process.execPath, [cli, "run", "--help"], { encoding: "utf8" })
    assert.strictEqual(r.status, 0, r.stderr)
    // Updated on purpose: @effect/cli's generated help was 350 lines, each store option repeated under every command.
    assert.isBelow(r.stdout.split("\n").length, 60)
    for (const option of ["--config", "--concurrency", "--reuse-sandboxes", "--remote-cache", "--cache"]) {
      assert.strictEqual(r.stdout.split("\n").filter((l) => l.startsWith(`  ${option} `)).length, 1, option)
    }
    for (const heading of ["Usage:", "Options:", "Sandboxes:", "Remote cache and execution:"]) {
      assert.match(r.stdout, new RegExp(`^${heading}`, "m"), heading)
    }
    assert.include(r.stdout, "processes at once (default: the CPU count)")
    assert.notInclude(r.stdout, "--store-lease-time", "the store options are in `kiln --help`")
    assert.include(r.stdout, "store options too (`kiln --help`)")
    assert.notInclude(r.stdout, "A user-defined piece of text")
  })

  it("--version prints the version", () => {
    const r = spawnSync(process.execPath, [cli, "--version"], { encoding: "utf8" })
    assert.strictEqual(r.status, 0)
    // One line: the version and its newline, nothing after it.
    assert.match(r.stdout, /^\d+\.\d+\.\d+\n$/)
  })

  it.scoped("a code cache of lmdb's modules that does not fit them, or is damaged, costs only the compile", () =>
    Effect.gen(function*() {
      // A copy of the built CLI inside the checkout (its node_modules resolve from there), with its own caches.
      const dist = path.resolve(".kiln-test", `dist-${process.pid}`)
      fs.mkdirSync(dist, { recursive: true })
      yield* Effect.addFinalizer(() => Effect.sync(() => fs.rmSync(dist, { recursive: true, force: true })))
      for (const f of ["cli.cjs", "kiln.cjs", "kiln.cjs.cache"]) {
        fs.copyFileSync(path.resolve("dist", f), path.join(dist, f))
      }
      // As the build lays it out: the loader is CommonJS, and `cli.js` names it (Node takes the real path's format).
      fs.symlinkSync("cli.cjs", path.join(dist, "cli.js"))
      const deps = JSON.parse(fs.readFileSync(path.resolve("dist/deps.cache"), "utf8")) as Record<string, string>
      assert.include(Object.keys(deps), "lmdb/dist/index.cjs")
      const store = yield* tempDir()
      const work = yield* tempDir()
      writeGoldenTree(work)
      for (
        const cache of [
          // Another file's code under lmdb's name, and bytes that are no cache at all.
          JSON.stringify({ "lmdb/dist/index.cjs": deps["msgpackr/dist/node.cjs"] }),
          JSON.stringify({ "lmdb/dist/index.cjs": Buffer.from("not a cache").toString("base64") }),
          "{ not json"
        ]
      ) {
        fs.writeFileSync(path.join(dist, "deps.cache"), cache)
        const r = spawnSync(process.execPath, [
          path.join(dist, "cli.js"),
          "store",
          "snapshot",
          work,
          "--store-dir",
          store
        ], {
          encoding: "utf8"
        })
        assert.strictEqual(r.status, 0, r.stderr)
        assert.strictEqual(r.stdout.trim(), Golden.v4)
      }
    }))
})

describe("kiln clean", () => {
  it.scoped("removes sandboxes whose owner is dead and reports them", () =>
    Effect.gen(function*() {
      const root = yield* tempDir()
      const orphan = path.join(root, "kiln-sandbox-0123456789ab")
      fs.mkdirSync(path.join(orphan, "ro"), { recursive: true })
      fs.chmodSync(path.join(orphan, "ro"), 0o555)
      fs.writeFileSync(`${orphan}.owner`, JSON.stringify({ pid: 2 ** 22 + 1, startTime: "1" }))
      const r = spawnSync(process.execPath, [cli, "clean", "--sandbox-root", root], { encoding: "utf8" })
      assert.strictEqual(r.status, 0, r.stderr)
      assert.include(r.stdout, `removed ${orphan}`)
      assert.isFalse(fs.existsSync(orphan))
    }))
})

describe("kiln exec", () => {
  it.scoped("runs a process, prints the result as JSON, hits the cache the second time, exits with its code", () =>
    Effect.gen(function*() {
      const root = yield* tempDir()
      const env = {
        ...process.env,
        KILN_STORE_DIR: path.join(root, "store"),
        KILN_SANDBOX_ROOT: path.join(root, "sandboxes"),
        KILN_NAMED_CACHES_DIR: path.join(root, "named")
      }
      fs.mkdirSync(path.join(root, "sandboxes"))
      const exec = (args: ReadonlyArray<string>) =>
        spawnSync(process.execPath, [cli, "exec", ...args], { encoding: "utf8", env })
      const argv = ["--output", "out.txt", "--json", "--", "/bin/sh", "-c", "echo made > out.txt; echo hi"]
      const first = exec(argv)
      assert.strictEqual(first.status, 0, first.stderr)
      const r1 = JSON.parse(first.stdout)
      assert.strictEqual(r1.exitCode, 0)
      assert.strictEqual(r1.source, "ran")
      assert.strictEqual(r1.timedOut, false)
      for (const k of ["outputDigest", "stdoutDigest", "stderrDigest", "actionDigest"]) {
        assert.match(r1[k], /^[0-9a-f]{64}\/\d+$/)
      }
      assert.isNumber(r1.durationMs)
      const r2 = JSON.parse(exec(argv).stdout)
      assert.strictEqual(r2.source, "cache-hit")
      assert.strictEqual(r2.outputDigest, r1.outputDigest)
      const failing = exec(["--", "/bin/sh", "-c", "echo oops >&2; exit 5"])
      assert.strictEqual(failing.status, 5)
      assert.include(failing.stderr, "oops")
      const missing = exec(["--", "/no/such/binary"])
      assert.strictEqual(missing.status, 1)
      assert.include(missing.stderr, "/no/such/binary")
      assert.deepStrictEqual(fs.readdirSync(path.join(root, "sandboxes")), [])
    }))
})
