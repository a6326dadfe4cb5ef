/**
 * The run memo's evidence (a stat per path, settled past its racy window) and the store's generation, which moves
 * on before anything is taken out of the store or replaced in it.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { spawnSync } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"
import * as Digest from "../../src/domain/Digest.js"
import * as RunMemo from "../../src/layers/engine/RunMemo.js"
import * as Generation from "../../src/layers/store/Generation.js"
import * as SnapshotObservation from "../../src/layers/store/SnapshotObservation.js"
import * as StoreMaintenance from "../../src/layers/store/StoreMaintenance.js"
import { eventually } from "../utils/child.js"
import { tempDir, tempStore } from "../utils/temp.js"

const seeFile = (abs: string): SnapshotObservation.Present =>
  SnapshotObservation.present("f", abs, fs.lstatSync(abs, { bigint: true }), RunMemo.hashOf(fs.readFileSync(abs)))

const seeDir = (abs: string): SnapshotObservation.Present =>
  SnapshotObservation.present(
    "d",
    abs,
    fs.lstatSync(abs, { bigint: true }),
    RunMemo.namesOf(fs.readdirSync(abs, { withFileTypes: true }))
  )

/**
 * Moves the modification time of what the test just wrote an hour back, so that a change made next shows in the stat
 * whatever the timestamp granularity (a write in the same tick keeps the mtime: the racy case).
 */
const backdate = (...paths: ReadonlyArray<string>) => {
  const hourAgo = new Date(Date.now() - 3600_000)
  for (const p of paths) fs.utimesSync(p, hourAgo, hourAgo)
}

/** A memo entry with placeholder digests, and a memo of this build holding `processes`. */
const entryOf = (over: Partial<RunMemo.Entry> = {}): RunMemo.Entry => ({
  key: "k",
  deps: {},
  action: "a",
  output: "o",
  stdout: "s",
  stderr: "e",
  inputs: [],
  outputs: [],
  ...over
})
const memoOf = (processes: Record<string, RunMemo.Entry>): RunMemo.Memo => ({
  v: RunMemo.FORMAT,
  build: RunMemo.buildId(),
  workspace: "/w",
  generation: "g",
  config: "",
  store: [],
  processes
})

/** A workspace with one input file and a memo of one process that read it, written to a store root. */
const oneInputMemo = Effect.gen(function*() {
  const ws = yield* tempDir()
  const root = yield* tempDir()
  fs.writeFileSync(path.join(ws, "in.txt"), "in\n")
  backdate(path.join(ws, "in.txt"))
  const memo = memoOf({ p: entryOf({ inputs: [RunMemo.obsOf(ws, seeFile(path.join(ws, "in.txt")))] }) })
  RunMemo.write(root, ws, memo)
  const holdsNow = (m: RunMemo.Memo) => RunMemo.holding(m, ws, ["p"], () => "k", () => []).valid.has("p")
  return { holdsNow, memo, root, ws }
})

describe("run memo evidence", () => {
  it.scoped("a path holds until it changes in any way a snapshot would see", () =>
    Effect.gen(function*() {
      const ws = yield* tempDir()
      fs.mkdirSync(path.join(ws, "src"))
      for (const f of ["a", "b", "c", "d"]) fs.writeFileSync(path.join(ws, "src", `${f}.txt`), `${f}\n`)
      backdate(...["a", "b", "c", "d"].map((f) => path.join(ws, "src", `${f}.txt`)), path.join(ws, "src"))
      const seen = [
        ...["a", "b", "c", "d"].map((f) => seeFile(path.join(ws, "src", `${f}.txt`))),
        seeDir(path.join(ws, "src"))
      ]
      const obs = seen.map((s) => RunMemo.obsOf(ws, s))
      assert.deepStrictEqual(obs.map((o) => o[0]), ["src/a.txt", "src/b.txt", "src/c.txt", "src/d.txt", "src"])
      assert.isTrue(obs.every((o) => RunMemo.holds(ws, o)))

      fs.writeFileSync(path.join(ws, "src", "a.txt"), "A\n") // same size, new bytes
      fs.chmodSync(path.join(ws, "src", "b.txt"), 0o755)
      fs.renameSync(path.join(ws, "src", "c.txt"), path.join(ws, "c.tmp")) // same bytes, another inode back
      fs.copyFileSync(path.join(ws, "c.tmp"), path.join(ws, "src", "c.txt"))
      // The directory's stat moved with the rename, but it lists the same names: it holds (c.txt itself does not).
      assert.deepStrictEqual(obs.map((o) => RunMemo.holds(ws, o)), [false, false, false, true, true])

      const absent = RunMemo.obsOf(ws, { kind: "a", abs: path.join(ws, "gen") })
      assert.deepStrictEqual(absent, ["gen", "a"])
      assert.isTrue(RunMemo.holds(ws, absent))
      fs.writeFileSync(path.join(ws, "gen"), "")
      assert.isFalse(RunMemo.holds(ws, absent))
      // Under a path that is now a file, a path is absent too.
      assert.isTrue(RunMemo.holds(ws, ["gen/x", "a"]))
    }))

  it.scoped("a directory holds until an entry is added, removed or renamed", () =>
    Effect.gen(function*() {
      const ws = yield* tempDir()
      fs.mkdirSync(path.join(ws, "d"))
      fs.writeFileSync(path.join(ws, "d", "x"), "x")
      for (
        const change of [
          () => fs.writeFileSync(path.join(ws, "d", "new"), ""),
          () => fs.rmSync(path.join(ws, "d", "new")),
          () => fs.renameSync(path.join(ws, "d", "x"), path.join(ws, "d", "y"))
        ]
      ) {
        backdate(path.join(ws, "d"))
        const o = RunMemo.obsOf(ws, seeDir(path.join(ws, "d")))
        assert.isTrue(RunMemo.holds(ws, o))
        change()
        assert.isFalse(RunMemo.holds(ws, o))
      }
    }))

  it.scoped("a directory that lost only recorded outputs still lists what its globs took: the outputs are restored", () =>
    Effect.gen(function*() {
      const ws = yield* tempDir()
      const pkg = path.join(ws, "pkg")
      fs.mkdirSync(path.join(pkg, "dist"), { recursive: true })
      fs.writeFileSync(path.join(pkg, "index.ts"), "export {}\n")
      fs.writeFileSync(path.join(pkg, "dist", "index.js"), "x\n")
      backdate(path.join(pkg, "index.ts"), path.join(pkg, "dist", "index.js"), pkg)
      const memo: RunMemo.Memo = {
        ...memoOf({
          build: entryOf({
            inputs: [RunMemo.obsOf(ws, seeDir(pkg)), RunMemo.obsOf(ws, seeFile(path.join(pkg, "index.ts")))],
            outputs: [RunMemo.obsOf(ws, seeFile(path.join(pkg, "dist", "index.js")))]
          })
        }),
        workspace: ws
      }
      const check = () => {
        const fresh = JSON.parse(JSON.stringify(memo)) as RunMemo.Memo
        const h = RunMemo.holding(fresh, ws, ["build"], () => "k", () => [])
        return h.valid.has("build") ? "valid" : h.restorable.has("build") ? "restorable" : h.why.get("build")
      }
      assert.strictEqual(check(), "valid")
      fs.rmSync(path.join(pkg, "dist"), { recursive: true })
      assert.strictEqual(check(), "restorable", "outputs deleted: written back without snapshotting the inputs")
      // The plain check (the CLI's per-path one) knows no outputs: there the directory changed.
      assert.isFalse(RunMemo.holds(ws, memo.processes.build!.inputs[0]!))
      fs.writeFileSync(path.join(pkg, "new.ts"), "")
      assert.strictEqual(check(), "pkg changed", "a name added is one a glob may take")
      fs.rmSync(path.join(pkg, "new.ts"))
      assert.strictEqual(check(), "restorable", "the same names again, at another stat")
      fs.rmSync(path.join(pkg, "index.ts"))
      assert.match(String(check()), /changed$/, "an input removed is a change, output or not")
    }))

  it.scoped("a directory may gain what its process's globs never take: its own outputs, and what it excludes", () =>
    Effect.gen(function*() {
      const ws = yield* tempDir()
      const pkg = path.join(ws, "pkg")
      fs.mkdirSync(pkg)
      fs.writeFileSync(path.join(pkg, "index.ts"), "export {}\n")
      backdate(path.join(pkg, "index.ts"), pkg)
      const key = JSON.stringify({ inputs: ["pkg/**", "!pkg/.cache/**"], outputs: ["pkg/dist/"] })
      const memo: RunMemo.Memo = {
        ...memoOf({
          build: entryOf({
            key,
            inputs: [RunMemo.obsOf(ws, seeDir(pkg)), RunMemo.obsOf(ws, seeFile(path.join(pkg, "index.ts")))]
          })
        }),
        workspace: ws
      }
      const check = () => {
        const fresh = JSON.parse(JSON.stringify(memo)) as RunMemo.Memo
        const h = RunMemo.holding(fresh, ws, ["build"], () => key, () => [])
        return h.valid.has("build") ? "valid" : h.why.get("build")
      }
      // What the run itself made in a directory it listed: the next run is the memo's.
      fs.mkdirSync(path.join(pkg, "dist"))
      assert.strictEqual(check(), "valid")
      fs.mkdirSync(path.join(pkg, ".cache"))
      assert.strictEqual(check(), "valid")
      fs.writeFileSync(path.join(pkg, "extra.ts"), "")
      assert.strictEqual(check(), "pkg changed")
      fs.rmSync(path.join(pkg, "extra.ts"))
      // Its own output removed again: the directory lists what it listed.
      fs.rmSync(path.join(pkg, "dist"), { recursive: true })
      assert.strictEqual(check(), "valid")
      // Another entry whose globs exclude nothing: the same directory gaining `dist` is a change for it.
      const other = { ...memo.processes.build!, key: JSON.stringify({ inputs: ["pkg/**"] }) }
      fs.mkdirSync(path.join(pkg, "dist"))
      const h = RunMemo.holding({ ...memoOf({ other }), workspace: ws }, ws, ["other"], () => other.key, () => [])
      assert.strictEqual(h.why.get("other"), "pkg changed")
    }))

  // The one real wait of these tests: a racy window is kernel time (a file's ctime cannot be set), so it has to pass.
  const settle = (seen: ReadonlyArray<RunMemo.Seen>) =>
    eventually(
      "the racy window passes",
      () => seen.every((s) => s.kind === "a" || !RunMemo.isRacy(s, BigInt(Date.now()) * 1_000_000n)),
      "5 seconds"
    )

  it.scoped("a racy observation is kept with its evidence, and holds only while the content matches it", () =>
    Effect.gen(function*() {
      const ws = yield* tempDir()
      const file = path.join(ws, "f")
      fs.writeFileSync(file, "one\n")
      // Its mtime a moment ahead: racy however long a loaded machine takes to get to the check.
      const ahead = new Date(Date.now() + 1500)
      fs.utimesSync(file, ahead, ahead)
      fs.mkdirSync(path.join(ws, "d"))
      fs.writeFileSync(path.join(ws, "d", "x"), "")
      const [f, d] = [seeFile(file), seeDir(path.join(ws, "d"))]
      assert.isTrue(RunMemo.isRacy(f, BigInt(Date.now()) * 1_000_000n))
      assert.isTrue(RunMemo.confirm(f, false), "its content is what was seen: it holds now, racy or not")
      const [fo, dobs] = [RunMemo.obsOf(ws, f, true), RunMemo.obsOf(ws, d, true)]
      assert.strictEqual(fo.length, 9)
      assert.isTrue(RunMemo.holds(ws, fo))
      assert.isTrue(RunMemo.holds(ws, dobs))
      // The same stat with other evidence: what a change within the same tick would leave (the stat cannot show it).
      const withEvidence = (o: RunMemo.Obs, evidence: string): RunMemo.Obs => [o[0], o[1], ...o.slice(2, 8), evidence]
      assert.isFalse(RunMemo.holds(ws, withEvidence(fo, RunMemo.hashOf("two\n"))))
      // A directory always keeps its names; racy, it is marked so after them, and its listing is read again.
      assert.deepStrictEqual(dobs.slice(8), ["x", 1])
      assert.isFalse(RunMemo.holds(ws, [...withEvidence(dobs, "x/y"), 1]))
      // Without evidence (not racy), the stat alone decides.
      assert.strictEqual(RunMemo.obsOf(ws, f).length, 8)
    }))

  it.scopedLive("a racy observation is confirmed only after its window, and only if its content is unchanged", () =>
    Effect.gen(function*() {
      const ws = yield* tempDir()
      const file = path.join(ws, "f")
      fs.writeFileSync(file, "one\n")
      // Its mtime a moment ahead: racy however long this machine takes to get to the check (its own 10 ms margin
      // alone passed before the check on a loaded machine).
      const ahead = new Date(Date.now() + 1500)
      fs.utimesSync(file, ahead, ahead)
      const seen = seeFile(file)
      const now = BigInt(Date.now()) * 1_000_000n
      assert.isTrue(RunMemo.isRacy(seen, now))
      assert.isFalse(RunMemo.confirm(seen), "still inside its window")
      yield* settle([seen])
      assert.isTrue(RunMemo.confirm(seen))
      // The same bytes rewritten: the stat moved, so the old observation is not confirmed (nor would it hold).
      fs.writeFileSync(file, "one\n")
      yield* settle([seeFile(file)])
      assert.isFalse(RunMemo.confirm(seen))
      // Evidence that does not match the content is not confirmed.
      assert.isFalse(RunMemo.confirm({ ...seeFile(file), evidence: RunMemo.hashOf("two\n") }))
    }))
})

describe("store generation", () => {
  const bytes = (s: string) => new TextEncoder().encode(s)

  it.scoped("moves on before a removal, never when the store grows or an action-cache entry is replaced", () =>
    Effect.gen(function*() {
      const store = yield* tempStore()
      const root = store.options.root
      const start = Generation.read(root)
      const digest = yield* store.putFile(bytes("hello\n"))
      const action = Digest.ofBytes(bytes("an action"))
      yield* store.putActionResult(action, bytes("{}"))
      assert.strictEqual(Generation.read(root), start, "adding leaves it")

      yield* store.putActionResult(action, bytes("{\"other\": 1}"))
      assert.strictEqual(Generation.read(root), start, "replacing an entry leaves it")

      assert.isFalse(yield* StoreMaintenance.make(store).remove(Digest.ofBytes(bytes("never stored"))))
      const removed = yield* StoreMaintenance.make(store).remove(digest)
      assert.isTrue(removed)
      assert.notStrictEqual(Generation.read(root), start, "a removal moves it")
    }))

  it.scoped("moves on when gc removes anything, and a memo made before no longer holds", () =>
    Effect.gen(function*() {
      // Leases that end as they are given: everything is collectable at once.
      const store = yield* tempStore({ leaseTimeMs: 0 })
      const root = store.options.root
      yield* store.putFile(bytes("soon collected\n"))
      const memo: RunMemo.Memo = {
        v: RunMemo.FORMAT,
        build: RunMemo.buildId(),
        workspace: "/w",
        generation: Generation.read(root),
        config: "",
        store: Generation.fingerprint(root),
        processes: {}
      }
      assert.isAbove(memo.store.length, 0)
      assert.isUndefined(RunMemo.storeHolds(root, memo))
      const report = yield* StoreMaintenance.make(store).gc({ targetSizeBytes: 0 })
      assert.isAbove(report.removedEntries, 0)
      assert.match(RunMemo.storeHolds(root, memo) ?? "", /the store has changed/)
    }))

  it.scoped("a store file that shrank or was replaced means the memo does not hold", () =>
    Effect.gen(function*() {
      const store = yield* tempStore()
      const root = store.options.root
      yield* store.putFile(bytes("x\n"))
      const files = Generation.fingerprint(root)
      const memo: RunMemo.Memo = {
        v: RunMemo.FORMAT,
        build: RunMemo.buildId(),
        workspace: "/w",
        generation: Generation.read(root),
        config: "",
        store: files.map(([rel, dev, ino, size]) => [rel, dev, ino, size + 4096]),
        processes: {}
      }
      assert.match(RunMemo.storeHolds(root, memo) ?? "", /store file .*data\.mdb has changed/)
      assert.isUndefined(RunMemo.storeHolds(root, { ...memo, store: files }))
    }))

  it.scoped("what the CLI's check found is handed to the engine once, and only for the file it read", () =>
    Effect.gen(function*() {
      const { holdsNow, memo, root, ws } = yield* oneInputMemo

      // The check reads and checks; the file changes before the engine looks: the engine takes the check's answer
      // (the memo it writes keeps the old evidence, so the next run sees the change).
      const checked = RunMemo.read(root, ws, true)!
      assert.isTrue(holdsNow(checked))
      fs.writeFileSync(path.join(ws, "in.txt"), "changed\n")
      const taken = RunMemo.read(root, ws)!
      assert.strictEqual(taken, checked)
      assert.isTrue(holdsNow(taken))
      // Taken once: any later read (a library running the engine again) reads and checks afresh.
      const again = RunMemo.read(root, ws)!
      assert.notStrictEqual(again, checked)
      assert.isFalse(holdsNow(again))

      // A memo file rewritten after the check (another run finished meanwhile) is read afresh.
      const second = RunMemo.read(root, ws, true)!
      holdsNow(second)
      RunMemo.write(root, ws, memo)
      const fresh = RunMemo.read(root, ws)!
      assert.notStrictEqual(fresh, second)
      assert.isFalse(holdsNow(fresh))
    }))

  it.scoped("a check's parse is kept for the next check in the process (a standby's), never what the check found", () =>
    Effect.gen(function*() {
      const { holdsNow, root, ws } = yield* oneInputMemo

      // A standby's rehearsal (or a no-op it answered): a check, then its handover dropped.
      const first = RunMemo.read(root, ws, true)!
      assert.isTrue(holdsNow(first))
      RunMemo.forgetHandover()
      // The next check takes the same parse (the same processes object: no second JSON.parse), checked afresh: the
      // change made since is seen, where the first check's evidence said the input held.
      fs.writeFileSync(path.join(ws, "in.txt"), "changed\n")
      const second = RunMemo.read(root, ws, true)!
      assert.notStrictEqual(second, first)
      assert.strictEqual(second.processes, first.processes)
      assert.isFalse(holdsNow(second))
      RunMemo.forgetHandover()

      // The memo rewritten (another run recorded): parsed again.
      RunMemo.write(root, ws, memoOf({ p: entryOf({ key: "other" }) }))
      const third = RunMemo.read(root, ws, true)!
      assert.notStrictEqual(third.processes, second.processes)
      assert.strictEqual(third.processes.p!.key, "other")

      // The engine's read (no handover to take here) drops the kept parse: a run never holds a memo it replaced.
      RunMemo.forgetHandover()
      RunMemo.read(root, ws)
      const fourth = RunMemo.read(root, ws, true)!
      assert.notStrictEqual(fourth.processes, third.processes)
    }))

  it("a second question about the same names of the same config object gets the first answer", () => {
    const memo = memoOf({
      a: entryOf({ key: "ka", output: "o-ka" }),
      b: entryOf({ key: "kb", output: "o-kb", deps: { a: "o-ka" } })
    })
    const config = { processes: { a: {}, b: { deps: ["a"] } } }
    const depsOf = (n: string) => n === "b" ? ["a"] : []
    const asked = RunMemo.holding(memo, "/nowhere", ["a", "b"], (n) => `k${n}`, depsOf, { config })
    assert.deepStrictEqual([...asked.valid.keys()], ["a", "b"])
    // Same object, same names: the answer is the first one, not worked out again (here it would differ).
    const again = RunMemo.holding(memo, "/nowhere", ["a", "b"], () => "changed", depsOf, { config })
    assert.strictEqual(again, asked)
    // Another config object, other names, or no config: worked out afresh.
    const other = RunMemo.holding(memo, "/nowhere", ["a", "b"], () => "changed", depsOf, { config: { ...config } })
    assert.deepStrictEqual([...other.why.values()], ["its config changed", "its config changed"])
    const fewer = RunMemo.holding(memo, "/nowhere", ["a"], () => "changed", depsOf, { config })
    assert.strictEqual(fewer.valid.size, 0)
    assert.strictEqual(RunMemo.holding(memo, "/nowhere", ["a", "b"], () => "changed", depsOf).valid.size, 0)
  })
})

describe("run memo journal", () => {
  const entry = (action: string): RunMemo.Entry => ({
    key: "k",
    deps: {},
    action,
    output: "o",
    stdout: "s",
    stderr: "e",
    inputs: [],
    outputs: []
  })
  const base = (processes: Record<string, RunMemo.Entry>): RunMemo.Memo => ({
    v: RunMemo.FORMAT,
    build: RunMemo.buildId(),
    workspace: "/w",
    generation: "g1",
    config: "c1",
    store: [],
    processes
  })
  const line = (set: Record<string, RunMemo.Entry>, drop: Array<string> = [], over = { generation: "g1" }) => ({
    v: RunMemo.FORMAT,
    build: RunMemo.buildId(),
    generation: over.generation,
    config: "c1",
    store: [["files/0/data.mdb", "1", "2", 3]] as RunMemo.Memo["store"],
    set,
    drop
  })

  it.scoped("a run's few changes are appended, applied in order over the memo, and a rewrite starts afresh", () =>
    Effect.gen(function*() {
      const ws = yield* tempDir()
      const root = yield* tempDir()
      const file = RunMemo.fileOf(root, ws)
      assert.isFalse(RunMemo.append(root, ws, line({ p: entry("a2") })), "no memo to append to")
      RunMemo.write(root, ws, base({ p: entry("a1"), q: entry("b1"), r: entry("c1") }))
      const written = fs.statSync(file)
      assert.isTrue(RunMemo.append(root, ws, line({ p: entry("a2") }, ["q"])))
      assert.isTrue(RunMemo.append(root, ws, line({ q: entry("b3") })))
      // A line cut short (a crash while appending), and one over another generation: both skipped.
      fs.appendFileSync(RunMemo.journalOf(file), "{\"v\":")
      assert.isTrue(RunMemo.append(root, ws, line({ r: entry("stale") }, [], { generation: "g0" })))
      assert.strictEqual(fs.statSync(file).mtimeMs, written.mtimeMs, "the memo itself is not rewritten")
      const read = RunMemo.read(root, ws)!
      assert.deepStrictEqual(
        Object.fromEntries(Object.entries(read.processes).map(([n, e]) => [n, e.action])),
        { p: "a2", q: "b3", r: "c1" }
      )
      assert.deepStrictEqual(read.store, [["files/0/data.mdb", "1", "2", 3]])
      // A whole rewrite takes the journal's place.
      RunMemo.write(root, ws, base({ p: entry("a4") }))
      assert.isFalse(fs.existsSync(RunMemo.journalOf(file)))
      assert.deepStrictEqual(Object.keys(RunMemo.read(root, ws)!.processes), ["p"])
    }))

  it.scoped("a journal that would grow past its bound is not appended to: the caller rewrites the memo", () =>
    Effect.gen(function*() {
      const ws = yield* tempDir()
      const root = yield* tempDir()
      RunMemo.write(root, ws, base({}))
      const big = { p: { ...entry("a"), key: "x".repeat(RunMemo.JOURNAL_MAX_BYTES / 2) } }
      assert.isTrue(RunMemo.append(root, ws, line(big)))
      assert.isFalse(RunMemo.append(root, ws, line(big)))
    }))

  it.scoped("a memo found under another workspace's name is not used, and the config is compared whole or by hash", () =>
    Effect.gen(function*() {
      const ws = yield* tempDir()
      const other = yield* tempDir()
      const root = yield* tempDir()
      RunMemo.write(root, ws, { ...base({ p: entry("a1") }), configText: "{}" })
      assert.strictEqual(RunMemo.read(root, ws)!.workspace, path.resolve(ws))
      // As if the two names were the same: the memo says whose it is.
      fs.mkdirSync(path.dirname(RunMemo.fileOf(root, other)), { recursive: true })
      fs.copyFileSync(RunMemo.fileOf(root, ws), RunMemo.fileOf(root, other))
      assert.isUndefined(RunMemo.read(root, other))
      const kept = RunMemo.read(root, ws)!
      assert.isTrue(RunMemo.configHolds(kept, "{}"))
      assert.isFalse(RunMemo.configHolds(kept, "{} "))
      const { configText: _, ...withoutText } = kept
      const hashed = { ...withoutText, config: RunMemo.hashOf("{}") }
      assert.isTrue(RunMemo.configHolds(hashed, "{}"))
      assert.isFalse(RunMemo.configHolds(hashed, "{} "))
    }))
})

describe("a run memo planted as a link, a FIFO or a device", () => {
  it.scoped("is no memo, found at once", () =>
    Effect.gen(function*() {
      const store = yield* tempDir()
      const ws = yield* tempDir()
      const file = RunMemo.fileOf(store, ws)
      fs.mkdirSync(path.dirname(file), { recursive: true })
      spawnSync("mkfifo", [file])
      assert.isUndefined(RunMemo.read(store, ws))
      fs.rmSync(file)
      fs.symlinkSync("/dev/zero", file)
      assert.isUndefined(RunMemo.read(store, ws))
    }))
})
