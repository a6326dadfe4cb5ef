/**
 * The remote cache against real servers on 127.0.0.1 (`scripts/remote/servers.sh`): Bazel's REAPI worker over gRPC
 * (plaintext, and TLS with client certificates) and nginx as Bazel's HTTP cache. Two machines are two workspace
 * copies at different paths with a store each; the second must get every process from the remote with the same
 * bytes. Faults are the servers' own: a dead port, a listener that never answers, an evicted or corrupted blob,
 * the worker killed mid-run. The worker is shared by every test here, so the test that kills it restarts it.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { createHash } from "node:crypto"
import * as fs from "node:fs"
import * as path from "node:path"
import { eventually } from "../utils/child.js"
import { corruptBlob, deadPort, evictBlob, killVictim, remoteServers, restartVictim, tarpit } from "../utils/remote.js"
import { tempDir } from "../utils/temp.js"
import { machine, namespace, outputsOf, sources } from "./workspace.js"

const hashOf = (bytes: Uint8Array | string) => createHash("sha256").update(bytes).digest("hex")

/** The remote flags for a server: grpc, grpcs with the test CA and client certificate, http. */
const flags = (kind: "grpc" | "grpcs" | "http" | "https") => {
  const s = remoteServers()
  return kind === "grpc"
    ? ["--remote-cache", s.reapiUrl]
    : kind === "http"
    ? ["--remote-cache", s.httpUrl]
    : [
      "--remote-cache",
      kind === "https" ? s.httpsUrl : s.reapiTlsUrl,
      "--remote-ca",
      s.tlsCa,
      "--remote-client-cert",
      s.tlsClientCert,
      "--remote-client-key",
      s.tlsClientKey
    ]
}

/** Fills the remote from one machine, then a second machine with an empty store gets everything from it. */
const roundTrip = (kind: "grpc" | "grpcs" | "http" | "https") =>
  Effect.gen(function*() {
    const ns = namespace()
    const first = yield* machine(ns)
    const filled = yield* first.run(flags(kind))
    assert.strictEqual(filled.code, 0, filled.stderr)
    assert.strictEqual(filled.summary!.ran, 3)
    assert.strictEqual(filled.summary!.pendingUploads, 0, filled.stderr)
    assert.isAbove(filled.summary!.uploadedBytes, 5 * 1024 * 1024)
    const second = yield* machine(ns)
    const served = yield* second.run(flags(kind))
    assert.strictEqual(served.code, 0, served.stderr)
    assert.deepStrictEqual(sources(served.summary), { gen: "remote-cache", use: "remote-cache", big: "remote-cache" })
    assert.strictEqual(served.summary!.remoteCacheHits, 3)
    assert.isAbove(served.summary!.downloadedBytes, 5 * 1024 * 1024)
    assert.deepStrictEqual(served.summary!.remoteErrors, {})
    assert.match(served.stderr, /3 cached \(3 from the remote\)/)
    // Two checkouts at different paths, two stores: the same keys, the same bytes.
    assert.deepStrictEqual(
      served.summary!.processes.map((p) => p.actionDigest).sort(),
      filled.summary!.processes.map((p) => p.actionDigest).sort()
    )
    assert.deepStrictEqual(outputsOf(second.ws), outputsOf(first.ws))
    assert.strictEqual(fs.readlinkSync(path.join(second.ws, "out/link")), "a.txt")
    // The hits are in the local store now: the next run asks the remote nothing.
    const again = yield* second.run(flags(kind))
    assert.deepStrictEqual(sources(again.summary), { gen: "cache-hit", use: "cache-hit", big: "cache-hit" })
    return { first, second, ns }
  })

describe("remote cache: round trips", () => {
  it.scoped("gRPC (Bazel's worker): a second machine gets every process from the remote", () => roundTrip("grpc"))
  it.scoped("HTTP (nginx): a second machine gets every process from the remote", () => roundTrip("http"))
  it.scoped("gRPC over mTLS; a client without TLS is refused, and the run goes on locally", () =>
    Effect.gen(function*() {
      yield* roundTrip("grpcs")
      const plain = yield* machine(namespace())
      const url = remoteServers().reapiTlsUrl.replace("grpcs:", "grpc:")
      const r = yield* plain.run(["--remote-cache", url])
      assert.strictEqual(r.code, 0, r.stderr)
      assert.strictEqual(r.summary!.ran, 3)
      assert.match(r.stderr, /remote cache grpc:\/\/localhost:\d+ is unreachable/)
      const required = yield* plain.run(["--remote-cache", url, "--remote-required"])
      assert.strictEqual(required.code, 1)
      assert.match(required.stderr, /remote cache grpc:\/\/localhost:\d+ is unreachable.*--remote-required/)
    }))

  it.scoped("HTTPS with a client certificate (nginx, ssl_verify_client on); without one, the run goes on locally", () =>
    Effect.gen(function*() {
      yield* roundTrip("https")
      const anonymous = yield* machine(namespace())
      const r = yield* anonymous.run(["--remote-cache", remoteServers().httpsUrl, "--remote-ca", remoteServers().tlsCa])
      assert.strictEqual(r.code, 0, r.stderr)
      assert.strictEqual(r.summary!.ran, 3)
      assert.match(r.stderr, /remote cache https:\/\/localhost:\d+ refused kiln's probe \(INVALID_ARGUMENT: HTTP 400\)/)
    }))

  it.scoped("grpcs without the client certificate the worker requires: one warning line with OpenSSL's reason", () =>
    Effect.gen(function*() {
      const anonymous = yield* machine(namespace())
      const url = remoteServers().reapiTlsUrl
      const r = yield* anonymous.run(["--remote-cache", url, "--remote-ca", remoteServers().tlsCa])
      assert.strictEqual(r.code, 0, r.stderr)
      assert.strictEqual(r.summary!.ran, 3)
      const lines = r.stderr.split("\n")
      const warning = lines.filter((l) => l.startsWith(`kiln: warning: remote cache ${url} is unreachable`))
      assert.strictEqual(warning.length, 1, r.stderr)
      // OpenSSL's reason, and the line ends where the warning does: nothing of it spills onto a line of its own.
      assert.match(warning[0]!, /SSL.*\): running locally$/, r.stderr)
      assert.isTrue(lines.every((l) => l === "" || /^(kiln: |✓ )/.test(l)), r.stderr)
    }))

  it.scoped("kiln.json's remote object and KILN_REMOTE_CACHE name the cache; the command line wins", () =>
    Effect.gen(function*() {
      const ns = namespace()
      const first = yield* machine(ns)
      const configFile = path.join(first.ws, "kiln.json")
      const config = JSON.parse(fs.readFileSync(configFile, "utf8"))
      fs.writeFileSync(
        configFile,
        JSON.stringify({ ...config, remote: { cache: `http://127.0.0.1:${yield* Effect.promise(deadPort)}` } })
      )
      const viaEnv = yield* first.run([], { KILN_REMOTE_CACHE: remoteServers().reapiUrl })
      assert.strictEqual(viaEnv.code, 0, viaEnv.stderr)
      assert.notMatch(viaEnv.stderr, /unreachable/)
      const second = yield* machine(ns)
      const viaFlag = yield* second.run(flags("grpc"), { KILN_REMOTE_CACHE: "http://127.0.0.1:1" })
      assert.strictEqual(viaFlag.summary!.remoteCacheHits, 3, viaFlag.stderr)
    }))
})

describe("remote cache: modes and explain", () => {
  it.scoped("--remote-cache-mode read never uploads, write never reads; explain says whether the remote has it", () =>
    Effect.gen(function*() {
      const ns = namespace()
      const reader = yield* machine(ns)
      const read = yield* reader.run([...flags("grpc"), "--remote-cache-mode", "read"])
      assert.strictEqual(read.code, 0, read.stderr)
      assert.strictEqual(read.summary!.uploadedBytes, 0)
      assert.strictEqual(read.summary!.pendingUploads, 0)
      const before = yield* reader.kiln(["explain", "use", ...flags("grpc")])
      assert.match(before.stdout, /remote cache grpc:\/\/127\.0\.0\.1:\d+: does not have it/)
      const writer = yield* machine(ns)
      const wrote = yield* writer.run([...flags("grpc"), "--remote-cache-mode", "write"])
      assert.deepStrictEqual(sources(wrote.summary), { gen: "ran", use: "ran", big: "ran" })
      assert.strictEqual(wrote.summary!.pendingUploads, 0, wrote.stderr)
      const after = yield* reader.kiln(["explain", "use", ...flags("grpc")])
      assert.match(after.stdout, /remote cache grpc:\/\/127\.0\.0\.1:\d+: has it, with every blob it names/)
      // A machine in write mode does not read what it wrote.
      const again = yield* machine(ns)
      const w2 = yield* again.run([...flags("grpc"), "--remote-cache-mode", "write"])
      assert.strictEqual(w2.summary!.remoteCacheHits, 0)
      const bad = yield* again.run([...flags("grpc"), "--remote-cache-mode", "sometimes"])
      assert.strictEqual(bad.code, 2)
      assert.match(bad.stderr, /--remote-cache-mode: `sometimes` is not one of read-write, read, write/)
    }))

  it.scoped("a header's $VAR is read from the environment and an unset one is a one-line error; neither is logged", () =>
    Effect.gen(function*() {
      const m = yield* machine(namespace())
      const log = path.join(m.root, "calls.jsonl")
      const ok = yield* m.run([
        ...flags("grpc"),
        "--remote-header",
        "x-kiln-token=$KILN_TEST_SECRET",
        "--remote-log",
        log
      ], {
        KILN_TEST_SECRET: "s3cret-value"
      })
      assert.strictEqual(ok.code, 0, ok.stderr)
      assert.notInclude(fs.readFileSync(log, "utf8"), "s3cret-value")
      assert.notInclude(ok.stderr, "s3cret-value")
      const unset = yield* m.run([...flags("grpc"), "--remote-header", "x-kiln-token=$KILN_TEST_UNSET_SECRET"])
      assert.strictEqual(unset.code, 2)
      assert.match(unset.stderr, /^kiln: --remote-header: header x-kiln-token: \$KILN_TEST_UNSET_SECRET is not set\n$/)
    }))
})

describe("remote cache: what is never shared", () => {
  it.scoped("a failure, a `cache: never` process and a result missing a declared output are not uploaded", () =>
    Effect.gen(function*() {
      const PATH = { PATH: "/usr/local/bin:/usr/bin:/bin" }
      const extra = {
        fails: { argv: ["node", "-e", "process.exit(3)"], env: PATH },
        uncached: {
          argv: ["node", "-e", "require('fs').writeFileSync('u.txt', 'u')"],
          outputs: ["u.txt"],
          cache: "never",
          env: PATH
        },
        partial: { argv: ["node", "-e", ""], outputs: ["never-made.txt"], env: PATH }
      }
      const ns = namespace()
      const first = yield* machine(ns, { extra })
      const filled = yield* first.run([...flags("grpc"), "--keep-going"])
      assert.strictEqual(filled.code, 1)
      assert.strictEqual(filled.summary!.pendingUploads, 0, filled.stderr)
      const second = yield* machine(ns, { extra })
      const r = yield* second.run([...flags("grpc"), "--keep-going"])
      assert.deepStrictEqual(sources(r.summary), {
        gen: "remote-cache",
        use: "remote-cache",
        big: "remote-cache",
        fails: "ran",
        uncached: "ran",
        partial: "ran"
      })
    }))
})

describe("remote cache: faults", () => {
  it.scoped("a dead port and a silent listener: the build succeeds locally, says so once, and costs at most the probe", () =>
    Effect.gen(function*() {
      const dead = yield* machine(namespace())
      const port = yield* Effect.promise(deadPort)
      const r = yield* dead.run(["--remote-cache", `grpc://127.0.0.1:${port}`])
      assert.strictEqual(r.code, 0, r.stderr)
      assert.strictEqual(r.summary!.ran, 3)
      assert.strictEqual(r.stderr.match(/warning: remote cache .* is unreachable/g)?.length, 1, r.stderr)
      assert.match(r.stderr, /unreachable \(UNAVAILABLE.*\): 3 processes ran locally, 0 uploaded/)
      assert.strictEqual(r.summary!.pendingUploads, 3)
      const silent = yield* Effect.acquireRelease(Effect.promise(tarpit), (t) => Effect.promise(t.close))
      for (const url of [silent.url, silent.httpUrl]) {
        const quiet = yield* machine(namespace())
        const q = yield* quiet.run(["--remote-cache", url])
        assert.strictEqual(q.code, 0, q.stderr)
        assert.match(q.stderr, /unreachable \(DEADLINE_EXCEEDED/)
        const required = yield* quiet.run(["--remote-cache", url, "--remote-required"])
        assert.strictEqual(required.code, 1)
        assert.match(required.stderr, new RegExp(`remote cache ${url.replace(/[/.]/g, "\\$&")} is unreachable`))
      }
    }))

  for (const kind of ["grpc", "http"] as const) {
    it.scoped(`${kind}: an entry whose blob was evicted is recovered in one run, and the blob uploaded again`, () =>
      Effect.gen(function*() {
        const { first, ns } = yield* roundTrip(kind)
        const blob = hashOf(fs.readFileSync(path.join(first.ws, "out/a.txt")))
        evictBlob(blob, kind === "grpc" ? "reapi" : "http")
        const third = yield* machine(ns)
        fs.writeFileSync(path.join(third.ws, "in/b.txt"), "gamma\n") // `use` must run, on gen's outputs
        const r = yield* third.run(flags(kind))
        assert.strictEqual(r.code, 0, r.stderr)
        assert.deepStrictEqual(sources(r.summary), { gen: "ran", use: "ran", big: "remote-cache" })
        assert.match(r.stderr, /remote cache entry for gen is unusable \(NOT_FOUND/)
        assert.strictEqual(
          fs.readFileSync(path.join(third.ws, "res/b.txt"), "utf8"),
          `ALPHA ${ns.toUpperCase()}\ngamma\n`
        )
        assert.strictEqual(r.summary!.pendingUploads, 0)
        // Uploaded again: a fourth machine gets gen from the remote.
        const fourth = yield* machine(ns)
        const after = yield* fourth.run(flags(kind))
        assert.strictEqual(after.summary!.remoteCacheHits, 3, after.stderr)
      }))

    it.scoped(`${kind}: a corrupted blob is detected, and the process runs instead`, () =>
      Effect.gen(function*() {
        const { first, ns } = yield* roundTrip(kind)
        corruptBlob(hashOf(fs.readFileSync(path.join(first.ws, "big.bin"))), kind === "grpc" ? "reapi" : "http")
        const third = yield* machine(ns)
        const r = yield* third.run([...flags(kind), "--cache-content", "fetch"])
        assert.strictEqual(r.code, 0, r.stderr)
        assert.strictEqual(sources(r.summary).big, "ran")
        assert.match(r.stderr, /remote cache entry for big is unusable \((INTERNAL|DIGEST_MISMATCH)/)
        assert.deepStrictEqual(outputsOf(third.ws), outputsOf(first.ws))
        // Its good bytes went up again, over the bad ones: the next machine gets everything from the remote.
        const fourth = yield* machine(ns)
        const after = yield* fourth.run(flags(kind))
        assert.strictEqual(after.summary!.remoteCacheHits, 3, after.stderr)
        assert.deepStrictEqual(outputsOf(fourth.ws), outputsOf(first.ws))
        // Under validate (the default) bad bytes show when they are fetched, to be written back: the process runs.
        corruptBlob(hashOf(fs.readFileSync(path.join(first.ws, "big.bin"))), kind === "grpc" ? "reapi" : "http")
        const fifth = yield* machine(ns)
        const late = yield* fifth.run(flags(kind))
        assert.strictEqual(late.code, 0, late.stderr)
        assert.strictEqual(sources(late.summary).big, "ran")
        assert.match(late.stderr, /the remote cannot give the files of .*(INTERNAL|DIGEST_MISMATCH)/)
        assert.deepStrictEqual(outputsOf(fifth.ws), outputsOf(first.ws))
      }))
  }

  it.scoped("validate checks every blob of a hit remotely: an evicted one makes it a miss, before anything uses it", () =>
    Effect.gen(function*() {
      const { first, ns } = yield* roundTrip("grpc")
      evictBlob(hashOf(fs.readFileSync(path.join(first.ws, "out/deep/n.txt"))))
      const third = yield* machine(ns)
      const r = yield* third.run([...flags("grpc"), "--cache-content", "validate"])
      assert.strictEqual(r.code, 0, r.stderr)
      assert.deepStrictEqual(sources(r.summary), { gen: "ran", use: "remote-cache", big: "remote-cache" })
      assert.strictEqual(r.summary!.processes.find((p) => p.name === "gen")!.backtracks, 0)
      assert.deepStrictEqual(outputsOf(third.ws), outputsOf(first.ws))
    }))

  it.scoped("defer fetches a hit's files when they are written back; one gone by then re-runs its producer", () =>
    Effect.gen(function*() {
      const { first, ns } = yield* roundTrip("http")
      const lazy = yield* machine(ns)
      const ok = yield* lazy.run([...flags("http"), "--cache-content", "defer"])
      assert.deepStrictEqual(sources(ok.summary), { gen: "remote-cache", use: "remote-cache", big: "remote-cache" })
      assert.isAbove(ok.summary!.downloadedBytes, 5 * 1024 * 1024)
      assert.deepStrictEqual(outputsOf(lazy.ws), outputsOf(first.ws))
      evictBlob(hashOf(fs.readFileSync(path.join(first.ws, "out/a.txt"))), "http")
      const gone = yield* machine(ns)
      const r = yield* gone.run([...flags("http"), "--cache-content", "defer"])
      assert.strictEqual(r.code, 0, r.stderr)
      assert.strictEqual(sources(r.summary).gen, "ran")
      assert.strictEqual(r.summary!.processes.find((p) => p.name === "gen")!.backtracks, 1)
      assert.deepStrictEqual(outputsOf(gone.ws), outputsOf(first.ws))
      // Its fresh result went up again: the next machine gets everything from the remote.
      const after = yield* machine(ns)
      assert.strictEqual((yield* after.run(flags("http"))).summary!.remoteCacheHits, 3)
    }))

  it.scopedLive("kiln remote status probes; kiln remote flush fails while the remote is away, and uploads once it is back", () =>
    Effect.gen(function*() {
      const ns = namespace()
      const gate = yield* tempDir("kiln-gate-")
      const first = yield* machine(ns, { gate })
      const status = yield* first.kiln(["remote", "status", ...flags("grpc")])
      assert.strictEqual(status.code, 0, status.stderr)
      assert.match(status.stdout, /reachable in \d+ ms\n {2}REAPI 2\.0/)
      assert.match(status.stdout, /action cache: read and write/)
      const http = yield* first.kiln(["remote", "status", ...flags("http")])
      assert.match(http.stdout, /Bazel HTTP cache/)
      // The worker dies while gen runs (a worker of its own: other test files share the plain one): the run goes on,
      // and its uploads wait in the journal.
      const victim = ["--remote-cache", remoteServers().victimUrl]
      const running = yield* first.start(victim)
      yield* eventually("gen started", () => fs.existsSync(path.join(gate, "started")), "60 seconds")
      yield* killVictim
      yield* Effect.addFinalizer(() => Effect.promise(restartVictim))
      fs.writeFileSync(path.join(gate, "go"), "")
      const r = yield* running
      assert.strictEqual(r.code, 0, r.stderr)
      assert.isAbove(r.summary!.pendingUploads, 0, r.stderr)
      assert.match(r.stderr, /uploads? to grpc:\/\/127\.0\.0\.1:\d+ (is|are) pending/)
      const away = yield* first.kiln(["remote", "flush", ...victim])
      assert.strictEqual(away.code, 1)
      assert.match(away.stderr, /uploads? to grpc:\/\/127\.0\.0\.1:\d+ (is|are) still pending/)
      yield* Effect.promise(restartVictim)
      // The next run with that remote takes them up (its processes all local hits); flush then finds nothing.
      const resumed = yield* first.run(victim)
      assert.deepStrictEqual(sources(resumed.summary), { gen: "cache-hit", use: "cache-hit", big: "cache-hit" })
      assert.strictEqual(resumed.summary!.pendingUploads, 0, resumed.stderr)
      const flushed = yield* first.kiln(["remote", "flush", ...victim])
      assert.strictEqual(flushed.code, 0, flushed.stderr)
      assert.match(flushed.stderr, /nothing is pending/)
      const second = yield* machine(ns, { gate })
      const served = yield* second.run(victim)
      assert.strictEqual(served.summary!.remoteCacheHits, 3, served.stderr)
    }))
})
