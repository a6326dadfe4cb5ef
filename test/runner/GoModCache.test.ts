/**
 * The Go case, for real: `go mod download` extracts its module cache read-only (dirs 0555, files 0444), and Pants
 * leaked every such sandbox because its recursive delete failed. Here a real `go mod download` runs in kiln
 * sandboxes against a file-system GOPROXY serving a module made by the test (no network), with the module cache an
 * output directory of the sandbox, then a named cache; no sandbox may be left behind.
 *
 * Needs Go on PATH (Debian's golang-go; .ci/run installs it). Without it the tests fail: they do not skip.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { spawnSync } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"
import * as zlib from "node:zlib"
import type * as Digest from "../../src/domain/Digest.js"
import { Process } from "../../src/domain/Process.js"
import { ProcessRunner } from "../../src/layers/runner/ProcessRunner.js"
import { Sandboxes } from "../../src/layers/sandbox/Sandboxes.js"
import { Store } from "../../src/layers/store/Store.js"
import { sandboxesLeft } from "../utils/sandboxes.js"
import { stack } from "../utils/stack.js"
import { tempDir, writeTree } from "../utils/temp.js"

const NOBODY = 65534
const removeWorker = path.resolve(".kiln-test/fixtures/removeWorker.mjs")

const MODULE = "example.com/kilntest/greet"
const VERSION = "v1.0.0"
/** Where the module lands, relative to the module cache. */
const EXTRACTED = `${MODULE}@${VERSION}`
const GREET_MOD = `module ${MODULE}\n\ngo 1.17\n`
const GREET_GO =
  `package greet\n\n// Hello greets from a kiln sandbox.\nfunc Hello() string { return "hello from kiln" }\n`

/** The directory of the real `go` binary on PATH; fails the test (it does not skip) when there is none. */
const goBinDir = (): string => {
  const found = (process.env.PATH ?? "").split(path.delimiter).filter((d) => d !== "").map((d) => path.join(d, "go"))
    .find((p) => {
      try {
        fs.accessSync(p, fs.constants.X_OK)
        return fs.statSync(p).isFile()
      } catch {
        return false
      }
    })
  assert.isDefined(
    found,
    "`go` is not on PATH: this test runs a real `go mod download`. Install Go (Debian: `apt-get install golang-go`, "
      + "as .ci/run does in CI)."
  )
  return path.dirname(fs.realpathSync(found!))
}

/** A zip of `entries` stored without compression: all that a module zip needs. */
const storedZip = (entries: ReadonlyArray<readonly [name: string, content: string]>): Buffer => {
  const parts: Array<Buffer> = []
  const central: Array<Buffer> = []
  let offset = 0
  for (const [name, content] of entries) {
    const n = Buffer.from(name, "utf8")
    const data = Buffer.from(content, "utf8")
    const crc = zlib.crc32(data)
    const local = Buffer.alloc(30)
    local.writeUInt32LE(0x04034b50, 0)
    local.writeUInt16LE(20, 4) // version needed to extract
    local.writeUInt16LE(0x0800, 6) // UTF-8 names
    local.writeUInt16LE(0, 8) // stored
    local.writeUInt16LE(0, 10) // 00:00:00
    local.writeUInt16LE(0x21, 12) // 1980-01-01
    local.writeUInt32LE(crc, 14)
    local.writeUInt32LE(data.length, 18)
    local.writeUInt32LE(data.length, 22)
    local.writeUInt16LE(n.length, 26)
    const entry = Buffer.alloc(46)
    entry.writeUInt32LE(0x02014b50, 0)
    entry.writeUInt16LE(20, 4) // version made by
    entry.writeUInt16LE(20, 6)
    entry.writeUInt16LE(0x0800, 8)
    entry.writeUInt16LE(0, 10)
    entry.writeUInt16LE(0, 12)
    entry.writeUInt16LE(0x21, 14)
    entry.writeUInt32LE(crc, 16)
    entry.writeUInt32LE(data.length, 20)
    entry.writeUInt32LE(data.length, 24)
    entry.writeUInt16LE(n.length, 28)
    entry.writeUInt32LE(offset, 42)
    parts.push(local, n, data)
    central.push(entry, n)
    offset += local.length + n.length + data.length
  }
  const directory = Buffer.concat(central)
  const end = Buffer.alloc(22)
  end.writeUInt32LE(0x06054b50, 0)
  end.writeUInt16LE(entries.length, 8)
  end.writeUInt16LE(entries.length, 10)
  end.writeUInt32LE(directory.length, 12)
  end.writeUInt32LE(offset, 16)
  return Buffer.concat([...parts, directory, end])
}

/**
 * A consumer module requiring the module, under `dir`, and a file-system GOPROXY serving it inside the consumer: an
 * input like the rest, where the process sees it (`{chroot}/proxy`), as the strict view shows it nothing else.
 */
const writeFixture = (dir: string) => {
  const consumer = path.join(dir, "consumer")
  const proxy = path.join(consumer, "proxy")
  writeTree(path.join(proxy, MODULE, "@v"), {
    list: `${VERSION}\n`,
    [`${VERSION}.info`]: JSON.stringify({ Version: VERSION, Time: "2024-01-01T00:00:00Z" }),
    [`${VERSION}.mod`]: GREET_MOD,
    [`${VERSION}.zip`]: storedZip([[`${EXTRACTED}/go.mod`, GREET_MOD], [`${EXTRACTED}/greet.go`, GREET_GO]])
  })
  writeTree(consumer, {
    "go.mod": `module example.com/kilntest/consumer\n\ngo 1.17\n\nrequire ${MODULE} ${VERSION}\n`,
    "main.go": `package main\n\nimport "${MODULE}"\n\nfunc main() { println(greet.Hello()) }\n`
  })
  return { goproxy: "file://{chroot}/proxy", consumer }
}

/** `go` in a sandbox with exactly this environment: HOME, caches and GOPATH inside it; no GOFLAGS. */
const goProcess = (
  script: string,
  o: {
    readonly goBin: string
    readonly goproxy: string
    readonly inputDigest: Digest.Digest
    readonly modcache?: string
  },
  extra: Partial<ConstructorParameters<typeof Process>[0]> = {}
) =>
  new Process({
    argv: ["/bin/sh", "-c", script],
    env: {
      PATH: `${o.goBin}:/usr/bin:/bin`,
      HOME: "{chroot}/home",
      GOCACHE: "{chroot}/gocache",
      GOPATH: "{chroot}/gopath",
      GOMODCACHE: `{chroot}/${o.modcache ?? "modcache"}`,
      GOPROXY: o.goproxy,
      GOSUMDB: "off",
      GOTOOLCHAIN: "local"
    },
    inputDigest: o.inputDigest,
    description: "go mod download",
    ...extra
  })

/** `go mod download -json`, then the modes of the extracted module's directory and a file of it. */
const DOWNLOAD =
  `go mod download -json && stat -c '%a %n' modcache/${EXTRACTED} modcache/${EXTRACTED}/greet.go > perms.txt`

const text = (digest: Digest.Digest) =>
  Effect.flatMap(Store, (s) => Effect.map(s.getFile(digest), (b) => Buffer.from(b).toString("utf8")))

const mode = (p: string) => fs.statSync(p).mode & 0o7777

const chownTree = (p: string, uid: number) => {
  fs.lchownSync(p, uid, uid)
  if (fs.lstatSync(p).isDirectory()) { for (const n of fs.readdirSync(p)) chownTree(path.join(p, n), uid) }
}

/** Runs `p`, fails on a non-zero exit with its stderr, and returns the result with the JSON `go` printed. */
const runGo = (p: Process) =>
  Effect.gen(function*() {
    const r = yield* Effect.flatMap(ProcessRunner, (runner) => runner.run(p))
    const stderr = yield* text(r.stderrDigest)
    assert.strictEqual(r.exitCode, 0, `go failed:\n${stderr}`)
    assert.strictEqual(r.source, "ran")
    const info = JSON.parse(yield* text(r.stdoutDigest)) as { Path: string; Version: string; Dir: string }
    assert.strictEqual(info.Path, MODULE)
    assert.strictEqual(info.Version, VERSION)
    assert.match(info.Dir, new RegExp(`/kiln-sandbox-[0-9a-z_-]+/modcache/${EXTRACTED.replace(/\./g, "\\.")}$`))
    return r
  })

describe("ProcessRunner: go mod download", () => {
  it.scopedLive("a read-only module cache in the sandbox is captured as an output, and the sandbox is removed", () =>
    Effect.gen(function*() {
      const goBin = goBinDir()
      const root = yield* tempDir("kiln-go-")
      const { consumer, goproxy } = writeFixture(path.join(root, "fixture"))
      yield* Effect.gen(function*() {
        const store = yield* Store
        const sandboxes = yield* Sandboxes
        const inputDigest = yield* store.snapshot(consumer)
        const r = yield* runGo(goProcess(DOWNLOAD, { goBin, goproxy, inputDigest }, {
          outputFiles: ["perms.txt"],
          outputDirectories: ["modcache"]
        }))

        const entries = yield* store.listTree(r.outputDigest)
        const paths = entries.map((e) => `${e.type}:${e.path}`)
        for (const p of [`directory:modcache/${EXTRACTED}`, `file:modcache/${EXTRACTED}/go.mod`, "file:perms.txt"]) {
          assert.include(paths, p)
        }
        const greet = entries.find((e) => e.path === `modcache/${EXTRACTED}/greet.go`)
        assert.isDefined(greet, `no greet.go among the outputs: ${paths.join(", ")}`)
        assert.strictEqual(yield* text(greet!.digest!), GREET_GO)
        assert.include(paths, `file:modcache/cache/download/${MODULE}/@v/${VERSION}.zip`)

        // The cache was read-only in the sandbox, and the sandbox is gone all the same.
        const perms = entries.find((e) => e.path === "perms.txt")!
        assert.strictEqual(
          yield* text(perms.digest!),
          `555 modcache/${EXTRACTED}\n444 modcache/${EXTRACTED}/greet.go\n`
        )
        assert.deepStrictEqual(sandboxesLeft(path.join(root, "sandboxes")), [])
        assert.strictEqual(yield* sandboxes.removalFailures, 0)
      }).pipe(Effect.provide(stack({ root })))
      // The sandbox with the read-only cache was kept idle for a next process, and went with the engine's scope.
      assert.deepStrictEqual(fs.readdirSync(path.join(root, "sandboxes")), [])
    }))

  it.scopedLive("a named module cache keeps the read-only module across runs, and no sandbox is left", () =>
    Effect.gen(function*() {
      const goBin = goBinDir()
      const root = yield* tempDir("kiln-go-")
      const { consumer, goproxy } = writeFixture(path.join(root, "fixture"))
      const namedCaches = path.join(root, "named_caches")
      const cached = path.join(namedCaches, "go_mod")
      yield* Effect.gen(function*() {
        const store = yield* Store
        const sandboxes = yield* Sandboxes
        const inputDigest = yield* store.snapshot(consumer)
        const named = { namedCaches: { go_mod: "modcache" }, cache: "never" as const }

        yield* runGo(goProcess(DOWNLOAD, { goBin, goproxy, inputDigest }, named))
        assert.strictEqual(mode(path.join(cached, EXTRACTED)), 0o555)
        assert.strictEqual(mode(path.join(cached, EXTRACTED, "greet.go")), 0o444)
        assert.strictEqual(mode(path.join(cached, EXTRACTED, "go.mod")), 0o444)
        assert.strictEqual(fs.readFileSync(path.join(cached, EXTRACTED, "greet.go"), "utf8"), GREET_GO)
        assert.deepStrictEqual(sandboxesLeft(path.join(root, "sandboxes")), [])

        // With the proxy off, the module can only come from the named cache...
        yield* runGo(goProcess("go mod download -json", { goBin, goproxy: "off", inputDigest }, named))
        // ...as an empty module cache shows: with the proxy off, nothing can be downloaded.
        const control = yield* Effect.flatMap(ProcessRunner, (runner) =>
          runner.run(
            goProcess("go mod download", { goBin, goproxy: "off", inputDigest, modcache: "empty-modcache" }, named)
          ))
        assert.notStrictEqual(control.exitCode, 0)
        assert.include(yield* text(control.stderrDigest), "module lookup disabled by GOPROXY=off")

        assert.deepStrictEqual(sandboxesLeft(path.join(root, "sandboxes")), [])
        assert.strictEqual(yield* sandboxes.removalFailures, 0)
      }).pipe(Effect.provide(stack({ root })))
      assert.deepStrictEqual(fs.readdirSync(path.join(root, "sandboxes")), [])

      // Root ignores permission bits, so as root kiln's removal of Go's real cache is proven as `nobody`; either way
      // beside a copy of it that a plain `rm -rf` cannot remove.
      const asRoot = process.getuid?.() === 0
      const user = { ...(asRoot ? { uid: NOBODY, gid: NOBODY } : {}), env: { ...process.env, LC_ALL: "C" } }
      const copy = path.join(namedCaches, "control")
      const cp = spawnSync("cp", ["-a", cached, copy], { encoding: "utf8" })
      assert.strictEqual(cp.status, 0, cp.stderr)
      if (asRoot) {
        fs.chmodSync(root, 0o711)
        chownTree(namedCaches, NOBODY)
      }
      const rm = spawnSync("rm", ["-rf", copy], { ...user, encoding: "utf8" })
      assert.notStrictEqual(rm.status, 0, "Go's module cache should defeat a plain rm -rf")
      assert.include(rm.stderr, "Permission denied")
      const ours = spawnSync(process.execPath, [removeWorker, cached], { ...user, encoding: "utf8" })
      assert.strictEqual(ours.stdout.trim(), "removed", ours.stderr)
      assert.isFalse(fs.existsSync(cached))
    }))
})
