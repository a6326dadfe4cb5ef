import { assert, describe, it } from "@effect/vitest"
import { Effect, Either, Exit, FastCheck, Option } from "effect"
import { spawnSync } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"
import * as Digest from "../../src/domain/Digest.js"
import * as Directory from "../../src/domain/Directory.js"
import { InvalidOutput } from "../../src/domain/TreeErrors.js"
import { NoProducer } from "../../src/layers/engine/Engine.js"
import { registrySize } from "../../src/layers/store/internal/lmdb/envs.js"
import * as Sharded from "../../src/layers/store/internal/lmdb/shards.js"
import * as Store from "../../src/layers/store/Store.js"
import * as StoreMaintenance from "../../src/layers/store/StoreMaintenance.js"
import { Golden, writeGoldenTree } from "../fixtures/golden.js"
import { tempDir, tempStore, writeTree } from "../utils/temp.js"

const bytes = (s: string) => Buffer.from(s)
const big = (seed: number, size = 600 * 1024) => {
  const b = Buffer.alloc(size)
  for (let i = 0; i < size; i++) b[i] = (i * 31 + seed) & 0xff
  return b
}

/** Flips one byte of a value in an LMDB shard, through lmdb-js, bypassing the store's verification. */
const corruptLmdbValue = async (shardDir: string, hash: string) => {
  const { open } = await import("lmdb")
  const env = open<Buffer, Buffer>({
    path: shardDir,
    encoding: "binary",
    keyEncoding: "binary",
    maxDbs: 4,
    maxReaders: 4096
  })
  const db = env.openDB<Buffer, Buffer>({ name: "content", encoding: "binary", keyEncoding: "binary" })
  const key = Buffer.from(hash, "hex")
  const value = Buffer.from(db.getBinary(key)!)
  value[0] = value[0]! ^ 0xff
  await db.put(key, value)
  await env.close()
}

describe("Store", () => {
  it.scoped("round-trips files and directories, and knows the empty digest without I/O", () =>
    Effect.gen(function*() {
      const store = yield* tempStore()
      const d = yield* store.putFile(bytes("some input text\n"))
      assert.strictEqual(Digest.format(d), Golden.inTxt)
      assert.deepStrictEqual(Buffer.from(yield* store.getFile(d)), bytes("some input text\n"))
      assert.isTrue(yield* store.hasFile(Digest.empty))
      assert.isTrue(yield* store.hasDirectory(Digest.empty))
      assert.strictEqual((yield* store.getFile(Digest.empty)).length, 0)
      assert.deepStrictEqual(yield* store.getDirectory(Digest.empty), Directory.empty)
      const dir = yield* store.putDirectory(Golden.v4Directory())
      assert.strictEqual(Digest.format(dir), Golden.v4)
      assert.deepStrictEqual(yield* store.getDirectory(dir), Golden.v4Directory())
      // A file blob is not a directory: the stores are separate.
      assert.isFalse(yield* store.hasDirectory(d))
    }))

  it.scoped("put verifies the bytes against an expected digest", () =>
    Effect.gen(function*() {
      const store = yield* tempStore()
      const wrong = Digest.ofBytes(bytes("other"))
      const exit = yield* Effect.exit(store.putFile(bytes("some input text\n"), wrong))
      assert.isTrue(Exit.isFailure(exit))
      assert.isFalse(yield* store.hasFile(wrong))
    }))

  it.scoped("a missing digest is a typed MissingDigest naming it", () =>
    Effect.gen(function*() {
      const store = yield* tempStore()
      const d = Digest.ofBytes(bytes("never stored"))
      const err = yield* Effect.flip(store.getFile(d))
      assert.strictEqual(err._tag, "MissingDigest")
      assert.include(err.message, Digest.format(d))
    }))

  it.scoped("large files live outside LMDB, read-only, and round-trip", () =>
    Effect.gen(function*() {
      const store = yield* tempStore()
      const content = big(1)
      const d = yield* store.putFile(content)
      const file = path.join(store.options.root, "immutable", "files", d.hash.slice(0, 2), d.hash)
      assert.strictEqual(fs.statSync(file).mode & 0o777, 0o444)
      assert.isTrue(Buffer.from(yield* store.getFile(d)).equals(content))
      // Idempotent.
      yield* store.putFile(content)
      assert.strictEqual(fs.readdirSync(path.dirname(file)).length, 1)
    }))

  it.scoped("ensureDownloaded names the first absent blob, directory or file", () =>
    Effect.gen(function*() {
      const store = yield* tempStore()
      const work = yield* tempDir()
      writeGoldenTree(work)
      const root = yield* store.snapshot(work)
      yield* store.ensureTree(root, { complete: true })
      const inTxt = Either.getOrThrow(Digest.parse(Golden.inTxt))
      yield* StoreMaintenance.make(store).remove(inTxt)
      const missingFile = yield* Effect.flip(store.ensureTree(root, { complete: true }))
      assert.strictEqual(missingFile._tag, "MissingDigest")
      assert.strictEqual(Digest.format((missingFile as Digest.MissingDigest).digest), Golden.inTxt)
      const v2 = Either.getOrThrow(Digest.parse(Golden.v2))
      yield* StoreMaintenance.make(store).remove(v2)
      const missingDir = yield* Effect.flip(store.ensureTree(root, { complete: true }))
      assert.strictEqual(Digest.format((missingDir as Digest.MissingDigest).digest), Golden.v2)
      assert.strictEqual((missingDir as Digest.MissingDigest).kind, "directory")
    }))

  it.scoped("re-opening with another map size or shard count fails with StoreConfigConflict", () =>
    Effect.gen(function*() {
      const root = yield* tempDir()
      yield* Store.make({ root })
      const mapSize = yield* Effect.flip(Store.make({ root, filesMapSize: 1024 * 1024 * 1024 }))
      assert.strictEqual(mapSize._tag, "StoreConfigConflict")
      assert.include(mapSize.message, "mapSize")
      const shards = yield* Effect.flip(Store.make({ root, shardCount: 8 }))
      assert.strictEqual(shards._tag, "StoreConfigConflict")
      assert.include(shards.message, "shardCount=4")
      assert.include(shards.message, "shardCount=8")
      const readers = yield* Effect.flip(Store.make({ root, maxReaders: 126 }))
      assert.strictEqual(readers._tag, "StoreConfigConflict")
      // The same settings share the environments.
      yield* Store.make({ root })
    }))

  it.scoped("a store made without a shard count has 4; one opened without a count keeps the count it was made with", () =>
    Effect.gen(function*() {
      const fresh = yield* tempDir()
      const made = yield* Store.make({ root: fresh })
      assert.strictEqual(made.options.shardCount, 4)
      assert.deepStrictEqual(JSON.parse(fs.readFileSync(path.join(fresh, "kiln-store.json"), "utf8")).shardCount, 4)

      // A store made by an earlier kiln, whose default was 16: its entries stay where they are, in 16 shards.
      const older = yield* tempDir()
      const digests = yield* Effect.scoped(Effect.gen(function*() {
        const store = yield* Store.make({ root: older, shardCount: 16 })
        return yield* Effect.forEach(
          Array.from({ length: 32 }, (_, i) => new TextEncoder().encode(`blob ${i}\n`)),
          (bytes) => store.putFile(bytes)
        )
      }))
      const reopened = yield* Store.make({ root: older })
      assert.strictEqual(reopened.options.shardCount, 16)
      for (const digest of digests) assert.isTrue(yield* reopened.hasFile(digest))
      // Some of them are in shards a 4-shard layout does not have.
      const shardsUsed = fs.readdirSync(path.join(older, "files")).filter((name) => /^[0-9a-f]+$/.test(name))
      assert.isAbove(Math.max(...shardsUsed.map((name) => parseInt(name, 16))), 3)
    }))

  it.scoped("a new shard is made whole beside its place and renamed in; what a killed maker left there is removed, an empty place an older kiln made is taken", () =>
    Effect.gen(function*() {
      const root = yield* tempDir()
      // The remains of a process killed while it made shard 0 (its pid: a process that has exited).
      const dead = spawnSync(process.execPath, ["-e", ""]).pid!
      const abandoned = path.join(root, "files", `0.new-${dead}-zz`)
      fs.mkdirSync(abandoned, { recursive: true })
      fs.writeFileSync(path.join(abandoned, "data.mdb"), "half made")
      // An older kiln made each shard's directory, empty, before renaming the new environment onto it.
      fs.mkdirSync(path.join(root, "directories", "0"), { recursive: true })
      const store = yield* Store.make({ root, shardCount: 1 })
      const digest = yield* store.putFile(new TextEncoder().encode("hi\n"))
      assert.isTrue(yield* store.hasFile(digest))
      assert.isFalse(fs.existsSync(abandoned))
      for (const kind of ["files", "directories", "actions"]) {
        assert.deepStrictEqual(fs.readdirSync(path.join(root, kind)), ["0"])
        assert.includeMembers(fs.readdirSync(path.join(root, kind, "0")), ["data.mdb", "lock.mdb"])
      }
    }))

  it.scopedLive("shards open on first use; a truncated data file in one not yet open still fails the open", () =>
    Effect.gen(function*() {
      const root = yield* tempDir()
      // A blob whose hash does not start with 0, so that its files shard is not one opened at once.
      let blob = 0
      while (Digest.ofBytes(bytes(`b${blob}`)).hash.startsWith("0")) blob++
      const shard = yield* Effect.scoped(Effect.gen(function*() {
        const before = registrySize()
        const store = yield* Store.make({ root, shardCount: 16 })
        // Shard 0 of files, directories, actions and the action locks.
        assert.strictEqual(registrySize(), before + 4)
        const digest = yield* store.putFile(bytes(`b${blob}`))
        assert.strictEqual(registrySize(), before + 5)
        assert.isTrue(yield* store.hasFile(digest))
        yield* StoreMaintenance.make(store).stats
        assert.strictEqual(registrySize(), before + 3 * 16 + 1)
        return path.join(root, "files", digest.hash[0]!, "data.mdb")
      }))
      fs.truncateSync(shard, 100)
      const error = yield* Effect.flip(Store.make({ root }))
      assert.strictEqual(error._tag, "StoreError")
      assert.include(error.message, shard)
      assert.include(error.message, "truncated")
    }))

  it.scoped("stats fails with a StoreError naming a data file it cannot stat, not with a defect", () =>
    Effect.gen(function*() {
      const root = yield* tempDir()
      const store = yield* Store.make({ root, shardCount: 16 })
      const digest = yield* store.putFile(bytes("stat me"))
      const file = path.join(root, "files", digest.hash[0]!, "data.mdb")
      // LMDB keeps its open file; the name now loops (ELOOP), until the data file is put back.
      fs.renameSync(file, `${file}.away`)
      fs.symlinkSync(path.basename(file), file)
      yield* Effect.addFinalizer(() =>
        Effect.sync(() => {
          fs.unlinkSync(file)
          fs.renameSync(`${file}.away`, file)
        })
      )
      const error = yield* Effect.flip(StoreMaintenance.make(store).stats)
      assert.strictEqual(error._tag, "StoreError")
      assert.strictEqual(error.reason, "Io")
      assert.strictEqual(error.path, file)
      assert.include(error.message, "ELOOP")
    }))

  it.scoped("a shard count that is not a power of two is refused", () =>
    Effect.gen(function*() {
      const root = yield* tempDir()
      const err = yield* Effect.flip(Store.make({ root, shardCount: 12 }))
      assert.include(err.message, "power of two")
    }))

  it.scoped("the action cache stores and replaces results", () =>
    Effect.gen(function*() {
      const store = yield* tempStore()
      const action = Digest.ofBytes(bytes("an action"))
      assert.isTrue(Option.isNone((yield* store.getActionResults([action]))[0]!))
      yield* store.putActionResult(action, bytes("first"))
      yield* store.putActionResult(action, bytes("second"))
      const [got] = yield* store.getActionResults([action])
      assert.strictEqual(Buffer.from(Option.getOrThrow(got!)).toString(), "second")
    }))

  it.scoped("many action-cache entries are read in one call, in order, across every shard", () =>
    Effect.gen(function*() {
      const store = yield* tempStore({ shardCount: 16 })
      const actions = Array.from({ length: 200 }, (_, i) => Digest.ofBytes(bytes(`action ${i}`)))
      const stored = actions.filter((_, i) => i % 3 !== 0)
      yield* Effect.forEach(stored, (a) => store.putActionResult(a, bytes(`result of ${a.hash}`)), { discard: true })
      assert.strictEqual(new Set(actions.map((a) => a.hash.slice(0, 1))).size, 16, "the keys cover all 16 shards")
      const got = yield* store.getActionResults(actions)
      assert.strictEqual(got.length, actions.length)
      got.forEach((r, i) => {
        if (i % 3 === 0) assert.isTrue(Option.isNone(r), `action ${i} was never stored`)
        else assert.strictEqual(Buffer.from(Option.getOrThrow(r)).toString(), `result of ${actions[i]!.hash}`)
      })
      assert.deepStrictEqual(yield* store.getActionResults([]), [])
    }))

  describe("gc", () => {
    it.scoped("never removes a leased entry, removes unleased ones down to the target, clears strays", () =>
      Effect.gen(function*() {
        const root = yield* tempDir()
        // Entries stored with a lease that has already run out (negative lease time) are GC candidates.
        const expired = yield* Store.make({ root, leaseTimeMs: -1000 })
        const oldLarge = yield* expired.putFile(big(7))
        yield* Effect.sync(() => {
          // The small ones must expire strictly later than the large one.
          const t = Date.now()
          while (Date.now() === t) continue
        })
        const old = yield* expired.putFiles(Array.from({ length: 10 }, (_, i) => bytes(`old ${i}`.padEnd(100, "x"))))
        // Another Store on the same root (through another spelling of the path) that leases for an hour.
        const leased = yield* Store.make({ root: `${root}/`, leaseTimeMs: 3_600_000 })
        const keep = yield* leased.putFiles(Array.from({ length: 5 }, (_, i) => bytes(`new ${i}`.padEnd(100, "y"))))
        const strayDir = path.join(root, "immutable", "files")
        fs.mkdirSync(path.join(strayDir, "zz"), { recursive: true })
        fs.writeFileSync(path.join(strayDir, "zz", "not-a-digest"), "junk")
        const oldTemp = path.join(strayDir, "ab", "stray.1.tmp")
        fs.mkdirSync(path.dirname(oldTemp), { recursive: true })
        fs.writeFileSync(oldTemp, "partial")
        fs.utimesSync(oldTemp, new Date(0), new Date(0))
        const freshTemp = path.join(strayDir, "ab", "writing.2.tmp")
        fs.writeFileSync(freshTemp, "in progress")

        const before = yield* StoreMaintenance.make(leased).stats
        // Target: room for the 5 leased entries and 4 of the 10 unleased small ones.
        const report = yield* StoreMaintenance.make(leased).gc({ targetSizeBytes: 900 })
        assert.strictEqual(report.beforeBytes, before.files.bytes + before.largeFiles.bytes)
        assert.isTrue(report.reachedTarget)
        assert.isAtMost(report.afterBytes, 900)
        for (const d of keep) assert.isTrue(yield* leased.hasFile(d), "a leased entry was removed")
        assert.isFalse(yield* leased.hasFile(oldLarge), "the large unleased file goes first (oldest)")
        const survivors = (yield* Effect.forEach(old, (d) => leased.hasFile(d))).filter(Boolean).length
        assert.strictEqual(survivors, 4)
        assert.isFalse(fs.existsSync(path.join(strayDir, "zz", "not-a-digest")))
        assert.isFalse(fs.existsSync(oldTemp))
        assert.isTrue(fs.existsSync(freshTemp), "a temp file that may still be written is kept")
        assert.strictEqual(report.strayFilesRemoved, 2)

        // A target below the leased bytes removes every unleased entry and says it could not reach the target.
        const tight = yield* StoreMaintenance.make(leased).gc({ targetSizeBytes: 10 })
        assert.isFalse(tight.reachedTarget)
        for (const d of keep) assert.isTrue(yield* leased.hasFile(d))
        assert.strictEqual((yield* Effect.forEach(old, (d) => leased.hasFile(d))).filter(Boolean).length, 0)
        assert.strictEqual((yield* StoreMaintenance.make(leased).check()).problems.length, 0)
      }))
  })

  describe("check", () => {
    it.scoped("detects a corrupted LMDB value and a corrupted large file; --repair removes them", () =>
      Effect.gen(function*() {
        const root = yield* tempDir()
        const store = yield* Store.make({ root, shardCount: 16 })
        const small = yield* store.putFile(bytes("precious bytes"))
        const large = yield* store.putFile(big(3))
        const dir = yield* store.putDirectory(Golden.v4Directory())
        assert.strictEqual((yield* StoreMaintenance.make(store).check()).problems.length, 0)

        const shard = (kind: string, hash: string) =>
          path.join(root, kind, (parseInt(hash.slice(0, 2), 16) >> 4).toString(16))
        yield* Effect.promise(() => corruptLmdbValue(shard("files", small.hash), small.hash))
        yield* Effect.promise(() => corruptLmdbValue(shard("directories", dir.hash), dir.hash))
        const largePath = path.join(root, "immutable", "files", large.hash.slice(0, 2), large.hash)
        fs.chmodSync(largePath, 0o644)
        const fd = fs.openSync(largePath, "r+")
        fs.writeSync(fd, Buffer.from([0x42]), 0, 1, 1000)
        fs.closeSync(fd)

        const found = yield* StoreMaintenance.make(store).check()
        assert.sameMembers(found.problems.map((p) => `${p.store}:${p.key.split("/").pop()}`), [
          `files:${small.hash}`,
          `directories:${dir.hash}`,
          `large-files:${large.hash}`
        ])
        const repaired = yield* StoreMaintenance.make(store).check({ repair: true })
        assert.strictEqual(repaired.repaired, 3)
        assert.strictEqual((yield* StoreMaintenance.make(store).check()).problems.length, 0)
        assert.isFalse(yield* store.hasFile(small))
        assert.isFalse(yield* store.hasFile(large))
      }))

    it.scoped("a corrupt entry is never served: a read removes it and reports it missing", () =>
      Effect.gen(function*() {
        const root = yield* tempDir()
        const store = yield* Store.make({ root, shardCount: 16 })
        const d = yield* store.putFile(bytes("will rot"))
        yield* Effect.promise(() =>
          corruptLmdbValue(path.join(root, "files", (parseInt(d.hash.slice(0, 2), 16) >> 4).toString(16)), d.hash)
        )
        const err = yield* Effect.flip(store.getFile(d))
        assert.strictEqual(err._tag, "MissingDigest")
        assert.isFalse(yield* store.hasFile(d))
        // And the producer's re-run heals it.
        yield* store.putFile(bytes("will rot"))
        assert.strictEqual(Buffer.from(yield* store.getFile(d)).toString(), "will rot")
      }))
  })
})

describe("skipped writes (a diagnostic)", () => {
  it.scoped("a write skipped because the store held the entry is remembered, and a NoProducer says so", () =>
    Effect.gen(function*() {
      const store = yield* tempStore()
      const dir = Either.getOrThrow(
        Directory.make({ files: [{ name: `f-${Date.now()}`, digest: Digest.empty, isExecutable: false }] })
      )
      const d = yield* store.putDirectory(dir)
      assert.isUndefined(Sharded.skippedWrite(d.hash), "written, not skipped")
      yield* store.putDirectory(dir)
      const skipped = Sharded.skippedWrite(d.hash)
      assert.isDefined(skipped)
      const at = new Date(skipped!).toISOString()
      const e = new NoProducer({ digest: Digest.format(d), consumer: "c", kind: "directory", skippedWriteAt: at })
      assert.include(e.message, `did not write it at ${at}`)
    }))
})

describe("snapshot, materialize, capture", () => {
  it.scoped("the golden tree on disk snapshots to V4, and materializes back with modes and symlinks", () =>
    Effect.gen(function*() {
      const store = yield* tempStore()
      const work = yield* tempDir()
      writeGoldenTree(work)
      const d = yield* store.snapshot(work)
      assert.strictEqual(Digest.format(d), Golden.v4)
      const out = yield* tempDir()
      yield* store.materialize(d, out)
      assert.strictEqual(fs.readFileSync(path.join(out, "src/in.txt"), "utf8"), "some input text\n")
      assert.strictEqual(fs.statSync(path.join(out, "a.sh")).mode & 0o111, 0o111)
      assert.strictEqual(fs.statSync(path.join(out, "src/in.txt")).mode & 0o111, 0)
      assert.strictEqual(fs.readlinkSync(path.join(out, "link")), "src/in.txt")
      // Idempotent over an existing tree, including entries that changed type.
      fs.rmSync(path.join(out, "a.sh"))
      fs.mkdirSync(path.join(out, "a.sh"))
      fs.writeFileSync(path.join(out, "src/in.txt"), "tampered")
      fs.rmSync(path.join(out, "link"))
      fs.writeFileSync(path.join(out, "link"), "not a link")
      yield* store.materialize(d, out)
      assert.strictEqual(Digest.format(yield* store.snapshot(out)), Golden.v4)
    }))

  it.scoped.prop(
    "snapshot → materialize → snapshot gives the same digest",
    [
      FastCheck.uniqueArray(
        FastCheck.tuple(
          FastCheck.array(FastCheck.constantFrom("a", "b", "c", "d", "é", "z z"), { minLength: 1, maxLength: 3 }),
          FastCheck.uint8Array({ maxLength: 64 }),
          FastCheck.boolean()
        ),
        { selector: ([p]) => p.join("/"), maxLength: 12 }
      )
    ],
    ([files]) =>
      Effect.gen(function*() {
        const store = yield* tempStore()
        const work = yield* tempDir()
        for (const [segments, content, exec] of files) {
          const p = path.join(work, ...segments)
          try {
            fs.mkdirSync(path.dirname(p), { recursive: true })
            fs.writeFileSync(p, content, { mode: exec ? 0o755 : 0o644 })
          } catch {
            // A path that is both a file and a directory in the random set: keep whichever came first.
          }
        }
        const d = yield* store.snapshot(work)
        const out = yield* tempDir()
        yield* store.materialize(d, out)
        assert.strictEqual(Digest.format(yield* store.snapshot(out)), Digest.format(d))
      }).pipe(Effect.scoped),
    { fastCheck: { numRuns: 25 } }
  )

  it.scoped("globs include and exclude, and prune directories", () =>
    Effect.gen(function*() {
      const store = yield* tempStore()
      const work = yield* tempDir()
      writeTree(work, {
        "src/a.ts": "a",
        "src/b.js": "b",
        "src/deep/c.ts": "c",
        "node_modules/x/y.ts": "y",
        "README": "r"
      })
      const d = yield* store.snapshot(work, ["src/**/*.ts", "!src/deep/**"])
      const listed = (yield* store.listTree(d)).map((e) => e.path)
      assert.deepStrictEqual(listed, ["src", "src/a.ts"])
    }))

  it.scoped("large files are hard-linked unless mutable or executable", () =>
    Effect.gen(function*() {
      const store = yield* tempStore()
      const work = yield* tempDir()
      writeTree(work, {
        "big.bin": big(5),
        "tool": { content: big(6).toString("latin1"), mode: 0o755 },
        "out/big2.bin": big(8)
      })
      const d = yield* store.snapshot(work)
      const out = yield* tempDir()
      yield* store.materialize(d, out, { mutablePaths: ["out"] })
      assert.strictEqual(fs.statSync(path.join(out, "big.bin")).nlink, 2)
      assert.strictEqual(fs.statSync(path.join(out, "tool")).nlink, 1)
      assert.strictEqual(fs.statSync(path.join(out, "tool")).mode & 0o777, 0o755)
      assert.strictEqual(fs.statSync(path.join(out, "out/big2.bin")).nlink, 1)
      assert.strictEqual(fs.statSync(path.join(out, "out/big2.bin")).mode & 0o200, 0o200)
      // Materializing again replaces the link, never writes through it into the store.
      yield* store.materialize(d, out, { mutablePaths: ["out"] })
      assert.strictEqual((yield* StoreMaintenance.make(store).check()).problems.length, 0)
      assert.strictEqual(Digest.format(yield* store.snapshot(out)), Digest.format(d))
    }))

  it.scoped("materialize fails with MissingDigest when a file is gone", () =>
    Effect.gen(function*() {
      const store = yield* tempStore()
      const work = yield* tempDir()
      writeTree(work, { "x.txt": "gone soon" })
      const d = yield* store.snapshot(work)
      const x = Digest.ofBytes(bytes("gone soon"))
      yield* StoreMaintenance.make(store).remove(x)
      const err = yield* Effect.flip(store.materialize(d, yield* tempDir()))
      assert.strictEqual(err._tag, "MissingDigest")
      assert.strictEqual(Digest.format((err as Digest.MissingDigest).digest), Digest.format(x))
    }))

  it.scoped("capture keeps declared outputs only, omits missing ones, keeps symlinks", () =>
    Effect.gen(function*() {
      const store = yield* tempStore()
      const sandbox = yield* tempDir()
      writeTree(sandbox, {
        "out.txt": "result",
        "gen/a.txt": "a",
        "gen/sub/b.txt": "b",
        "gen/link": { link: "a.txt" },
        "scratch.tmp": "not declared",
        "nested/dir/file.txt": "declared by path"
      })
      const { files, tree: d } = yield* store.capture(sandbox, {
        outputFiles: ["out.txt", "missing.txt", "nested/dir/file.txt", "gen/a.txt"],
        outputDirectories: ["gen", "missing-dir"]
      })
      // Each file captured, with its digest (what a runner offers write-back to rename into place).
      assert.deepStrictEqual(
        files.map(([abs, digest]) => [path.relative(sandbox, abs), Digest.format(digest)]).sort(),
        [["gen/a.txt", "a"], ["gen/sub/b.txt", "b"], ["nested/dir/file.txt", "declared by path"], ["out.txt", "result"]]
          .map(([p, text]) => [p!, Digest.format(Digest.ofBytes(bytes(text!)))])
      )
      const listed = (yield* store.listTree(d)).map((e) => `${e.type}:${e.path}`)
      assert.deepStrictEqual(listed, [
        "directory:gen",
        "file:gen/a.txt",
        "symlink:gen/link",
        "directory:gen/sub",
        "file:gen/sub/b.txt",
        "directory:nested",
        "directory:nested/dir",
        "file:nested/dir/file.txt",
        "file:out.txt"
      ])
    }))

  it.scoped("a merge committed behind is there for this process at once, and for others once written", () =>
    Effect.gen(function*() {
      const ws = yield* tempDir("kiln-ws-")
      writeTree(ws, { "src/a.txt": "a", "out/b.txt": "b" })
      const root = yield* tempDir("kiln-store-")
      const store = yield* Store.make({ root })
      const own = yield* store.snapshot(ws, ["src/**"])
      const dep = yield* store.snapshot(path.join(ws, "out"))
      const layers = [{ digest: own, at: [] }, { digest: dep, at: ["out"] }]
      const merged = yield* store.mergeTrees(layers, { behind: true })
      // This process reads it before its commit may have landed: listing, leasing, laying it out.
      assert.deepStrictEqual(
        (yield* store.listTree(merged)).map((e) => e.path).sort(),
        ["out", "out/b.txt", "src", "src/a.txt"]
      )
      assert.isTrue(yield* store.hasDirectory(merged))
      yield* store.ensureTree(merged, { lease: true })
      yield* store.written
      // Another process's view: a store of its own on the same directory, which has none of this one's memory.
      const other = yield* Effect.scoped(Effect.flatMap(Store.make({ root }), (s) => s.listTree(merged)))
      assert.strictEqual(other.length, 4)
      // The same digest as a merge that waits for its commit.
      assert.deepStrictEqual(yield* store.mergeTrees(layers), merged)
    }))

  it.scoped("snapshotMany gives each glob set the digest snapshot gives it, and one that fails fails alone", () =>
    Effect.gen(function*() {
      const ws = yield* tempDir("kiln-ws-")
      writeTree(ws, {
        "a/one.txt": "1",
        "a/two.txt": "2",
        "b/three.txt": "3",
        "b/deep/big.bin": big(7),
        "shared/x.txt": "x"
      })
      // A FIFO cannot be snapshotted: the glob set that reaches it fails, the others do not.
      fs.mkdirSync(path.join(ws, "bad"))
      spawnSync("mkfifo", [path.join(ws, "bad", "pipe")])
      const sets = [["a/**", "shared/**"], ["b/**"], ["bad/**"], ["a/*.txt", "!a/two.txt"], ["shared/**"]]
      const many = yield* tempStore()
      const results = yield* many.snapshotMany(ws, sets.map((globs) => ({ globs })))
      assert.strictEqual(results.length, sets.length)
      // Asked to, a snapshot says what it read: each file, with its stat and its hash.
      const [observed] = yield* many.snapshotMany(ws, [{ globs: ["a/**"], observe: true }])
      const seen = Either.getOrThrow(observed!).observations
      assert.deepStrictEqual(
        seen.map((o) => o.kind === "a" ? o : { kind: o.kind, abs: o.abs, evidence: o.evidence, ino: o.ino }).sort((
          x,
          y
        ) => x.abs < y.abs ? -1 : 1),
        ["one.txt", "two.txt"].map((name, i) => {
          const abs = path.join(ws, "a", name)
          return {
            kind: "f",
            abs,
            evidence: Digest.ofBytes(bytes(String(i + 1))).hash,
            ino: fs.statSync(abs, { bigint: true }).ino
          }
        })
      )
      assert.isTrue(Either.isLeft(results[2]!))
      if (Either.isLeft(results[2]!)) assert.include(results[2]!.left.message, "pipe")
      const one = yield* tempStore()
      for (const [i, globs] of sets.entries()) {
        if (i === 2) continue
        const alone = yield* one.snapshot(ws, globs)
        assert.deepStrictEqual(
          results[i],
          Either.right({ digest: alone, observations: [], wholeDirectories: [], unmatched: [] }),
          `globs ${globs.join(" ")}`
        )
        // Everything each tree holds was stored.
        assert.isTrue((yield* many.listTree(alone)).length > 0)
        yield* many.ensureTree(alone, { complete: true })
      }
    }))

  it.scoped("capture stores blobs with the outputs: small, empty and large ones, and the same tree", () =>
    Effect.gen(function*() {
      const store = yield* tempStore()
      const sandbox = yield* tempDir()
      writeTree(sandbox, { "out.txt": "result", "gen/a.txt": "a" })
      const outputs = { outputFiles: ["out.txt"], outputDirectories: ["gen"] }
      const blobs = [bytes("stdout\n"), new Uint8Array(0), big(3)]
      const { blobs: digests, tree } = yield* store.capture(sandbox, outputs, blobs)
      assert.deepStrictEqual(digests.map(Digest.format), blobs.map((b) => Digest.format(Digest.ofBytes(b))))
      for (const [i, d] of digests.entries()) {
        assert.deepStrictEqual(Buffer.from(yield* store.getFile(d)), Buffer.from(blobs[i]!))
      }
      assert.strictEqual(Digest.format(tree), Digest.format((yield* store.capture(sandbox, outputs)).tree))
      assert.deepStrictEqual((yield* StoreMaintenance.make(store).check()).problems, [])
    }))

  it.scoped("capture names an output file that the process created as a directory", () =>
    Effect.gen(function*() {
      const store = yield* tempStore()
      const sandbox = yield* tempDir()
      fs.mkdirSync(path.join(sandbox, "out.txt"))
      const err = yield* Effect.flip(store.capture(sandbox, { outputFiles: ["out.txt"], outputDirectories: [] }))
      assert.instanceOf(err, InvalidOutput)
      assert.include(err.message, "out.txt")
      assert.include(err.message, "directory")
    }))

  it.scoped("a bad declared output is the user's InvalidOutput naming it, not a StoreError", () =>
    Effect.gen(function*() {
      const store = yield* tempStore()
      const sandbox = yield* tempDir()
      fs.writeFileSync(path.join(sandbox, "gen"), "a file")
      fs.mkdirSync(path.join(sandbox, "dir"))
      fs.symlinkSync(sandbox, path.join(sandbox, "link"))
      const cases: ReadonlyArray<readonly [Parameters<typeof store.capture>[1], string, RegExp]> = [
        [
          { outputFiles: [], outputDirectories: ["gen"] },
          "gen/",
          /declared as a directory, but the process made a file/
        ],
        [
          { outputFiles: ["dir"], outputDirectories: [] },
          "dir",
          /declared as a file, but the process made a directory/
        ],
        [{ outputFiles: ["../up.txt"], outputDirectories: [] }, "../up.txt", /escapes the sandbox/],
        [{ outputFiles: ["/etc/hostname"], outputDirectories: [] }, "/etc/hostname", /escapes the sandbox/],
        [{ outputFiles: ["link/gen"], outputDirectories: [] }, "link/gen", /goes through a symlink \(`link`\)/],
        [{ outputFiles: ["gen/x"], outputDirectories: ["gen"] }, "gen/", /declared as a directory/],
        [{ outputFiles: ["."], outputDirectories: [] }, ".", /is empty/]
      ]
      for (const [outputs, output, problem] of cases) {
        const err = yield* Effect.flip(store.capture(sandbox, outputs))
        assert.instanceOf(err, InvalidOutput, err.message)
        if (!(err instanceof InvalidOutput)) continue
        assert.strictEqual(err.output, output)
        assert.match(err.problem, problem)
        assert.strictEqual(err.message, `output \`${output}\` ${err.problem}`)
      }
    }))

  it.scoped("capture refuses a declared output reached through a symlink", () =>
    Effect.gen(function*() {
      const store = yield* tempStore()
      const sandbox = yield* tempDir()
      const elsewhere = yield* tempDir()
      fs.writeFileSync(path.join(elsewhere, "secret"), "host file")
      fs.symlinkSync(elsewhere, path.join(sandbox, "out"))
      const err = yield* Effect.flip(store.capture(sandbox, { outputFiles: ["out/secret"], outputDirectories: [] }))
      assert.include(err.message, "goes through a symlink")
    }))

  it.scoped("snapshot of an unreadable directory is a one-line error naming it", () =>
    Effect.gen(function*() {
      const store = yield* tempStore()
      const err = yield* Effect.flip(store.snapshot("/nonexistent/kiln/dir"))
      assert.include(err.message, "/nonexistent/kiln/dir")
      assert.notInclude(err.message, "\n")
    }))
})
