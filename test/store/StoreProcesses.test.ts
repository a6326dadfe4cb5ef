/**
 * The Store shared by several OS processes: real LMDB in temp dirs, real processes (the worker programs of
 * test/fixtures, built by test/globalSetup.ts) and real signals. Every process and directory a test starts is
 * released with its scope, the processes with SIGKILL, so a failing test leaves nothing behind.
 */
import { assert, describe, it } from "@effect/vitest"
import { Data, Deferred, type Duration, Effect, Exit, Fiber, Ref, Schedule, Scope } from "effect"
import { spawn } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import * as Digest from "../../src/domain/Digest.js"
import { registrySize } from "../../src/layers/store/internal/lmdb/envs.js"
import * as Store from "../../src/layers/store/Store.js"
import * as StoreMaintenance from "../../src/layers/store/StoreMaintenance.js"
import * as Proc from "../../src/os/Proc.js"
import { blob, type BlobSpec, writerSpecs } from "../fixtures/blobs.js"
import type * as LmdbWorker from "../fixtures/lmdbWorker.js"
import type * as StoreWorker from "../fixtures/storeWorker.js"

const fixturesDir = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..", "..", ".kiln-test", "fixtures")

const MiB = 1024 * 1024

class ProcessFailed extends Data.TaggedError("ProcessFailed")<{ readonly message: string }> {}

/** Fails with `ProcessFailed` saying what was awaited when `effect` takes longer than `duration`. */
const within = <A, E, R>(what: string, duration: Duration.DurationInput, effect: Effect.Effect<A, E, R>) =>
  Effect.timeoutFail(effect, {
    duration,
    onTimeout: () => new ProcessFailed({ message: `timed out waiting for ${what}` })
  })

const tempDir = Effect.acquireRelease(
  Effect.sync(() => fs.mkdtempSync(path.join(os.tmpdir(), "kiln-store-processes-"))),
  (dir) => Effect.sync(() => fs.rmSync(dir, { recursive: true, force: true }))
)

interface ExitInfo {
  readonly code: number | null
  readonly signal: NodeJS.Signals | null
}

interface Worker {
  readonly name: string
  readonly pid: number
  /** The first stdout line `<word>` or `<word> <rest>`, giving `<rest>`; fails if the worker fails or exits first. */
  readonly line: (word: string) => Effect.Effect<string, ProcessFailed>
  readonly hasLine: (word: string) => boolean
  readonly send: (line: string) => Effect.Effect<void>
  readonly closeStdin: Effect.Effect<void>
  readonly exited: Effect.Effect<ExitInfo>
  /** SIGKILL, then wait until the process is gone. */
  readonly kill: Effect.Effect<ExitInfo>
}

/**
 * Runs a worker program of test/fixtures; released with SIGKILL if it is still alive. With `unreaped`, its parent is
 * a shell that then becomes `sleep`, which never reaps it: once the worker dies it stays a zombie (and `pid`, and
 * what the release kills, is that parent's). Its stdin stays the pipe, through fd 3 (a shell's background job reads
 * /dev/null otherwise, and the worker exits at its end).
 */
const spawnWorker = (
  name: string,
  program: "storeWorker" | "lmdbWorker",
  command: StoreWorker.Command | LmdbWorker.Command,
  options: { readonly unreaped?: boolean } = {}
): Effect.Effect<Worker, never, Scope.Scope> =>
  Effect.acquireRelease(
    Effect.sync((): Worker => {
      const argv = [path.join(fixturesDir, `${program}.mjs`), JSON.stringify(command)]
      const proc = options.unreaped === true
        ? spawn("sh", ["-c", `exec 3<&0; "$0" "$@" <&3 3<&- & exec sleep 600 3<&-`, process.execPath, ...argv], {
          stdio: "pipe"
        })
        : spawn(process.execPath, argv, { stdio: ["pipe", "pipe", "pipe"] })
      const lines: Array<string> = []
      let pending = ""
      let stderr = ""
      let exit: ExitInfo | undefined
      const listeners = new Set<() => void>()
      const notify = () => listeners.forEach((f) => f())
      proc.stdout.setEncoding("utf8")
      proc.stdout.on("data", (chunk: string) => {
        const parts = (pending + chunk).split("\n")
        pending = parts.pop()!
        lines.push(...parts)
        notify()
      })
      proc.stderr.setEncoding("utf8")
      proc.stderr.on("data", (chunk: string) => (stderr = (stderr + chunk).slice(-4000)))
      // Writing to a dead worker's stdin must not take the test process down.
      proc.stdin.on("error", () => {})
      proc.on("error", (e) => (stderr += `\nspawn failed: ${e.message}`))
      proc.on("close", (code, signal) => {
        exit = { code, signal }
        notify()
      })
      const find = (word: string) => {
        for (const l of lines) {
          if (l === word) return ""
          if (l.startsWith(word + " ")) return l.slice(word.length + 1)
        }
        return undefined
      }
      const describe = () =>
        `${name} (pid ${proc.pid}): stdout ${JSON.stringify(lines.slice(-5))}, stderr ${JSON.stringify(stderr)}`
      const waitFor = <A, E>(check: () => Exit.Exit<A, E> | undefined) =>
        Effect.async<A, E>((resume) => {
          const listener = () => {
            const result = check()
            if (result === undefined) return
            listeners.delete(listener)
            resume(result)
          }
          listeners.add(listener)
          listener()
          return Effect.sync(() => listeners.delete(listener))
        })
      const exited = waitFor<ExitInfo, never>(() => exit === undefined ? undefined : Exit.succeed(exit))
      return {
        name,
        pid: proc.pid!,
        line: (word) =>
          waitFor<string, ProcessFailed>(() => {
            const found = find(word)
            if (found !== undefined) return Exit.succeed(found)
            const failure = find("FAIL")
            if (failure !== undefined) {
              return Exit.fail(new ProcessFailed({ message: `${name} failed: ${failure}; ${describe()}` }))
            }
            if (exit !== undefined) {
              return Exit.fail(
                new ProcessFailed({ message: `${name} exited (${JSON.stringify(exit)}) before ${word}; ${describe()}` })
              )
            }
            return undefined
          }),
        hasLine: (word) => find(word) !== undefined,
        send: (line) => Effect.sync(() => void proc.stdin.write(line + "\n")),
        closeStdin: Effect.sync(() => void proc.stdin.end()),
        exited,
        kill: Effect.suspend(() => {
          if (exit === undefined) proc.kill("SIGKILL")
          return exited
        })
      }
    }),
    (worker) =>
      // Finalizers are uninterruptible: the timeout needs an interruptible region to fire.
      Effect.interruptible(worker.kill).pipe(Effect.timeout("10 seconds"), Effect.ignore)
  )

/** The test store's options; every process opening one store passes the same ones. */
const storeOptions = (root: string, overrides: Partial<Store.Options> = {}): Partial<Store.Options> => ({
  root,
  shardCount: 4,
  filesMapSize: 512 * MiB,
  directoriesMapSize: 64 * MiB,
  actionsMapSize: 64 * MiB,
  ...overrides
})

/** Reads every blob back through `store`, comparing bytes; returns how many distinct blobs there were. */
const assertAllPresent = (store: Store.Service, specs: ReadonlyArray<BlobSpec>) =>
  Effect.gen(function*() {
    const seen = new Set<string>()
    for (const spec of specs) {
      const expected = blob(spec)
      const digest = Digest.ofBytes(expected)
      if (seen.has(digest.hash)) continue
      seen.add(digest.hash)
      const bytes = yield* store.getFile(digest)
      assert.isTrue(Buffer.from(bytes).equals(expected), `blob ${spec.seed}:${spec.index} has other bytes`)
    }
    return seen.size
  })

const assertClean = (store: Store.Service, expectedEntries: number) =>
  Effect.gen(function*() {
    const report = yield* StoreMaintenance.make(store).check()
    assert.deepStrictEqual(report.problems, [])
    assert.strictEqual(report.checked, expectedEntries)
  })

describe("Store shared by OS processes", () => {
  it.live("4 writers and 2 readers at once: every blob written is there, and check is clean", () =>
    Effect.scoped(Effect.gen(function*() {
      const dir = yield* tempDir
      const options = storeOptions(path.join(dir, "store"))
      const writers = 4
      const count = 2000
      const shared = 200
      const progress = Array.from({ length: writers }, (_, w) => path.join(dir, `progress-${w}.txt`))
      const writerProcs = yield* Effect.forEach(progress, (file, w) =>
        spawnWorker(`writer ${w}`, "storeWorker", {
          mode: "write",
          store: options,
          writer: w,
          count,
          shared,
          chunk: 100,
          progress: file,
          waitForGo: true
        }))
      const follower = yield* spawnWorker("follower", "storeWorker", { mode: "follow", store: options, progress })
      const prober = yield* spawnWorker("prober", "storeWorker", {
        mode: "probe",
        store: options,
        writers,
        count,
        shared
      })
      const all = [...writerProcs, follower, prober]
      // They create the store together, too.
      yield* within("every worker to open the store", "60 seconds", Effect.forEach(all, (w) => w.line("READY")))
      const store = yield* Store.make(options)
      // Every writer starts at once, with the readers already reading.
      yield* Effect.forEach(writerProcs, (w) => w.send("GO"))
      const written = yield* within(
        "the writers",
        "90 seconds",
        Effect.forEach(writerProcs, (w) => Effect.map(w.line("DONE"), (json) => JSON.parse(json)), {
          concurrency: "unbounded"
        })
      )
      for (const w of written) assert.strictEqual(w.written, count)
      yield* Effect.forEach([follower, prober], (r) => r.closeStdin)
      const followed = JSON.parse(yield* within("the follower", "60 seconds", follower.line("DONE")))
      const probed = JSON.parse(yield* within("the prober", "60 seconds", prober.line("DONE")))

      const specs = Array.from({ length: writers }, (_, w) => writerSpecs(w, count, shared)).flat()
      const distinct = writers * (count - shared) + shared
      // The follower read every blob as soon as a writer reported it committed, and the prober found blobs (at the
      // latest in its last pass, once every writer was done).
      assert.strictEqual(followed.reads, distinct)
      assert.isAbove(followed.passes, 1)
      assert.isAbove(probed.hits, 0)
      assert.strictEqual(yield* assertAllPresent(store, specs), distinct)
      yield* assertClean(store, distinct)
      assert.strictEqual((yield* StoreMaintenance.make(store).stats).files.entries, distinct)
      for (const w of all) assert.deepStrictEqual(yield* w.exited, { code: 0, signal: null })
    })))

  it.live(
    "two Stores in one process (one through a symlink) share environments; closing one while the other and another process write is safe",
    () =>
      Effect.scoped(Effect.gen(function*() {
        const dir = yield* tempDir
        const root = path.join(dir, "store")
        const link = path.join(dir, "link")
        const options = storeOptions(root)
        const envsPerStore = 3 * options.shardCount! + 1 // and one for action locks
        const before = registrySize()

        const scopeA = yield* Scope.make()
        yield* Effect.addFinalizer(() => Scope.close(scopeA, Exit.void))
        const storeA = yield* Scope.extend(Store.make(options), scopeA)
        // Shards open on first use: the stats read every one.
        yield* StoreMaintenance.make(storeA).stats
        assert.strictEqual(registrySize(), before + envsPerStore)
        const specsA = writerSpecs(32, 200, 0)
        yield* storeA.putFiles(specsA.map((s) => blob(s)))

        fs.symlinkSync(root, link)
        const specsB = writerSpecs(31, 1500, 0)
        const specsP = writerSpecs(30, 1500, 0)
        const other = yield* spawnWorker("other process", "storeWorker", {
          mode: "write",
          store: { ...options, root: link },
          writer: 30,
          count: 1500,
          shared: 0,
          chunk: 50,
          waitForGo: true
        })

        yield* Effect.scoped(Effect.gen(function*() {
          const storeB = yield* Store.make({ ...options, root: link })
          yield* StoreMaintenance.make(storeB).stats
          // Same environments: the count does not double.
          assert.strictEqual(registrySize(), before + envsPerStore)
          // A write through one is seen through the other.
          const d = yield* storeA.putFile(Buffer.from("written through A"))
          assert.strictEqual(Buffer.from(yield* storeB.getFile(d)).toString(), "written through A")

          yield* within("the other process to open the store", "60 seconds", other.line("READY"))
          yield* other.send("GO")
          yield* within("the other process to start writing", "60 seconds", other.line("WRITING"))

          // B writes batch after batch; A's scope is released after B's first batch, and B goes on for at least
          // 10 more batches after that.
          const started = yield* Deferred.make<void>()
          const closedA = yield* Ref.make(false)
          const afterClose = yield* Ref.make(0)
          const writerB = yield* Effect.fork(Effect.gen(function*() {
            for (let i = 0; i < specsB.length; i += 50) {
              yield* storeB.putFiles(specsB.slice(i, i + 50).map((s) => blob(s)))
              yield* Deferred.succeed(started, undefined)
              if (yield* Ref.get(closedA)) yield* Ref.update(afterClose, (n) => n + 1)
            }
          }))
          yield* within("B's first batch", "60 seconds", Deferred.await(started))
          yield* Scope.close(scopeA, Exit.void)
          yield* Ref.set(closedA, true)
          // B still holds every environment.
          assert.strictEqual(registrySize(), before + envsPerStore)
          yield* within("B's writes", "60 seconds", Fiber.join(writerB))
          assert.isAtLeast(yield* Ref.get(afterClose), 10)
          const done = JSON.parse(yield* within("the other process", "60 seconds", other.line("DONE")))
          assert.strictEqual(done.written, 1500)

          const distinct = yield* assertAllPresent(storeB, [...specsA, ...specsB, ...specsP])
          assert.strictEqual(distinct, 200 + 1500 + 1500)
          yield* assertClean(storeB, distinct + 1)
        }))
        // The last user closed them.
        assert.strictEqual(registrySize(), before)
        assert.deepStrictEqual(yield* other.exited, { code: 0, signal: null })
      }))
  )

  it.live("reader slots left by SIGKILLed processes are reclaimed when the reader table is full", () =>
    Effect.scoped(Effect.gen(function*() {
      const dir = yield* tempDir
      const maxReaders = 8
      // One shard per kind: the files environment is the one whose reader table gets filled.
      const options = storeOptions(path.join(dir, "store"), { shardCount: 1, maxReaders })
      // This process keeps the environments open throughout, so LMDB never re-initialises the lock file: only a
      // reader check can free the dead processes' slots.
      const store = yield* Store.make(options)
      const parentSpec = { seed: 40, index: 0 }
      const parentDigest = yield* store.putFile(blob(parentSpec))
      yield* store.getFile(parentDigest)
      const initial = (yield* StoreMaintenance.make(store).stats).readers
      assert.strictEqual(initial.maxPerEnvironment, maxReaders)
      assert.strictEqual(initial.stale, 0)

      const filesEnv = path.join(options.root!, "files", "0")
      const holderCommand: LmdbWorker.Command = {
        mode: "hold-reader",
        path: filesEnv,
        mapSize: options.filesMapSize!,
        maxReaders
      }
      // This process holds one slot of the files environment; the holders take the others.
      const holders = yield* Effect.forEach(
        Array.from({ length: maxReaders - 1 }, (_, i) => i),
        (i) => spawnWorker(`reader ${i}`, "lmdbWorker", holderCommand)
      )
      yield* within("the readers", "60 seconds", Effect.forEach(holders, (h) => h.line("HOLDING")))
      // The table is full: one more reader is refused.
      const extra = yield* spawnWorker("one reader too many", "lmdbWorker", holderCommand)
      const refused = yield* within(
        "the reader to be refused a slot",
        "60 seconds",
        Effect.raceFirst(Effect.as(extra.line("FULL"), "FULL"), Effect.as(extra.line("HOLDING"), "HOLDING"))
      )
      assert.strictEqual(refused, "FULL")

      yield* Effect.forEach(holders, (h) => h.kill)
      const stale = (yield* StoreMaintenance.make(store).stats).readers
      assert.strictEqual(stale.stale, maxReaders - 1)
      assert.strictEqual(stale.inUse, initial.inUse + maxReaders - 1)

      // A fresh process reads and writes, its slots found by clearing the dead ones.
      const fresh = yield* spawnWorker("fresh process", "storeWorker", {
        mode: "write",
        store: options,
        writer: 41,
        count: 100,
        shared: 0,
        chunk: 25,
        mustRead: [parentSpec]
      })
      const done = JSON.parse(yield* within("the fresh process", "60 seconds", fresh.line("DONE")))
      assert.strictEqual(done.written, 100)
      assert.deepStrictEqual(yield* fresh.exited, { code: 0, signal: null })

      const after = (yield* StoreMaintenance.make(store).stats).readers
      assert.strictEqual(after.stale, 0)
      assert.strictEqual(after.inUse, initial.inUse)
      // And this process still reads and writes.
      assert.strictEqual(yield* assertAllPresent(store, [parentSpec, ...writerSpecs(41, 100, 0)]), 101)
      yield* store.putFile(Buffer.from("after the reclaim"))
      yield* assertClean(store, 102)
    })))

  it.live("the reader slot of a zombie (killed, never reaped) counts as stale, not in use", () =>
    Effect.scoped(Effect.gen(function*() {
      const dir = yield* tempDir
      const options = storeOptions(path.join(dir, "store"), { shardCount: 1, maxReaders: 8 })
      const store = yield* Store.make(options)
      yield* store.getFile(yield* store.putFile(blob({ seed: 50, index: 0 })))
      const holder = yield* spawnWorker("zombie reader", "lmdbWorker", {
        mode: "hold-reader",
        path: path.join(options.root!, "files", "0"),
        mapSize: options.filesMapSize!,
        maxReaders: 8
      }, { unreaped: true })
      const pid = Number(yield* within("the reader", "60 seconds", holder.line("HOLDING")))
      // Killed only once its parent is `sleep`: the shell might still reap it before its exec.
      yield* within(
        "the shell to exec sleep",
        "10 seconds",
        Effect.repeat(Effect.sync(() => fs.readFileSync(`/proc/${holder.pid}/comm`, "utf8")), {
          until: (comm) => comm === "sleep\n",
          schedule: Schedule.spaced("10 millis")
        })
      )
      const before = (yield* StoreMaintenance.make(store).stats).readers
      assert.strictEqual(before.stale, 0)
      process.kill(pid, "SIGKILL")
      yield* within(
        "the reader to become a zombie",
        "10 seconds",
        Effect.repeat(Effect.sync(() => Proc.statOf(pid)?.state), {
          until: (s) => s === "Z",
          schedule: Schedule.spaced("10 millis")
        })
      )
      const after = (yield* StoreMaintenance.make(store).stats).readers
      assert.strictEqual(after.stale, 1, "the zombie's slot was taken for one in use")
      assert.strictEqual(after.inUse, before.inUse)
    })))

  it.live("a writer SIGKILLed inside a write transaction does not wedge another process's write", () =>
    Effect.scoped(Effect.gen(function*() {
      const dir = yield* tempDir
      const options = storeOptions(path.join(dir, "store"), { shardCount: 1 })
      const store = yield* Store.make(options)
      const before = writerSpecs(50, 20, 0)
      yield* store.putFiles(before.map((s) => blob(s)))

      // A process with the store open, waiting to write.
      const writer = yield* spawnWorker("writer", "storeWorker", {
        mode: "write",
        store: options,
        writer: 51,
        count: 50,
        shared: 0,
        chunk: 50,
        waitForGo: true
      })
      yield* within("the writer to open the store", "60 seconds", writer.line("READY"))

      const marker = path.join(dir, "locked")
      const locker = yield* spawnWorker("lock holder", "lmdbWorker", {
        mode: "hold-write-lock",
        path: path.join(options.root!, "files", "0"),
        mapSize: options.filesMapSize!,
        maxReaders: Store.defaultOptions(options).maxReaders,
        puts: 1000,
        marker
      })
      yield* within("the lock holder to enter its write transaction", "60 seconds", locker.line("LOCKED"))
      assert.isTrue(fs.existsSync(marker))

      // The writer's write queues behind the held lock; a process that starts now queues in opening the store
      // (lmdb-js opens its databases in a write transaction).
      yield* writer.send("GO")
      yield* within("the writer to start writing", "60 seconds", writer.line("WRITING"))
      const latecomer = yield* spawnWorker("latecomer", "storeWorker", {
        mode: "write",
        store: options,
        writer: 53,
        count: 50,
        shared: 0,
        chunk: 50
      })
      yield* within("the latecomer to start", "60 seconds", latecomer.line("OPENING"))
      assert.isFalse(writer.hasLine("DONE"), "the writer committed while another process held the write lock")

      const killed = yield* locker.kill
      assert.strictEqual(killed.signal, "SIGKILL")
      const done = yield* within(
        "the writers' writes after the kill",
        "20 seconds",
        Effect.forEach([writer, latecomer], (w) => Effect.map(w.line("DONE"), (json) => JSON.parse(json)), {
          concurrency: "unbounded"
        })
      )
      assert.deepStrictEqual(done.map((d) => d.written), [50, 50])
      // This process's next write goes through too.
      const after = writerSpecs(52, 20, 0)
      yield* within("this process's write after the kill", "20 seconds", store.putFiles(after.map((s) => blob(s))))

      const committed = [...before, ...writerSpecs(51, 50, 0), ...writerSpecs(53, 50, 0), ...after]
      assert.strictEqual(yield* assertAllPresent(store, committed), 140)
      // The killed transaction's 1,000 puts were rolled back: check finds only what was committed.
      yield* assertClean(store, 140)
      for (const w of [writer, latecomer]) assert.deepStrictEqual(yield* w.exited, { code: 0, signal: null })
    })))

  // Before environments were created whole and renamed into place, six processes creating one store at once failed
  // about one round in fifteen with MDB_PROBLEM (mdb_page_touch no parent) while creating the named databases.
  it.live("six processes creating one fresh store at once all open it and write", () =>
    Effect.scoped(Effect.gen(function*() {
      const dir = yield* tempDir
      for (let round = 0; round < 6; round++) {
        const root = path.join(dir, `store-${round}`)
        const workers = yield* Effect.forEach(
          Array.from({ length: 6 }, (_, i) => i),
          (writer) =>
            spawnWorker(`round ${round} writer ${writer}`, "storeWorker", {
              mode: "write",
              store: storeOptions(root, { shardCount: 16 }),
              writer,
              count: 4,
              shared: 2,
              chunk: 4
            })
        )
        for (const w of workers) yield* within(`${w.name} to finish`, "60 seconds", w.line("DONE"))
        for (const w of workers) assert.deepStrictEqual(yield* w.exited, { code: 0, signal: null })
        const store = yield* Store.make(storeOptions(root, { shardCount: 16 }))
        const report = yield* StoreMaintenance.make(store).check()
        assert.deepStrictEqual(report.problems, [])
        assert.strictEqual(yield* assertAllPresent(store, [0, 1, 2, 3, 4, 5].flatMap((w) => writerSpecs(w, 4, 2))), 14)
      }
    })))
})
