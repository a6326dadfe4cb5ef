/**
 * The sandboxer client against a real sandboxer process (dist/cli.js, built before the tests run), and the same
 * contract against the in-process implementation.
 *
 * Promised and asserted: materialize writes the tree; a missing blob is a typed MissingDigest and never restarts the
 * sandboxer; a sandboxer killed between requests is respawned once and the request succeeds; every engine process
 * gets its own socket; the sandboxer is gone when the layer's scope closes; a full disk (a tmpfs, as root) stays
 * `NoSpace`, across the sandboxer's protocol too.
 * Not promised: how fast a respawn is.
 */
import { assert, describe, it } from "@effect/vitest"
import { Context, Effect, Layer, Option } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"
import * as Digest from "../../src/domain/Digest.js"
import * as Sandboxer from "../../src/layers/sandboxer/Sandboxer.js"
import * as Store from "../../src/layers/store/Store.js"
import * as StoreMaintenance from "../../src/layers/store/StoreMaintenance.js"
import { isAlive } from "../../src/os/Proc.js"
import { tempDir, writeTree } from "../utils/temp.js"
import { isRoot, tmpfs } from "../utils/tmpfs.js"

const cli = path.resolve("dist/cli.js")

const layers = {
  process: (socketDir: string) => Sandboxer.layer({ command: [process.execPath, cli], socketDir }),
  inProcess: (_: string) => Sandboxer.layerInProcess
}

/** A store and a sandboxer of `kind` on it, in temp dirs (or in `dirs`, which may outlive the layers' scope). */
const setup = (kind: keyof typeof layers, dirs?: { readonly root: string; readonly socketDir: string }) =>
  Effect.gen(function*() {
    const root = dirs?.root ?? (yield* tempDir("kiln-sbx-"))
    const socketDir = dirs?.socketDir ?? (yield* tempDir("kiln-sock-"))
    const context = yield* Layer.build(
      layers[kind](socketDir).pipe(Layer.provideMerge(Store.layer({ root: path.join(root, "store") })))
    )
    const store = Context.get(context, Store.Store)
    const sandboxer = Context.get(context, Sandboxer.Sandboxer)
    return { root, socketDir, store, sandboxer }
  })

for (const kind of ["process", "inProcess"] as const) {
  describe(`Sandboxer (${kind})`, () => {
    it.scoped("materializes a tree", () =>
      Effect.gen(function*() {
        const { root, sandboxer, store } = yield* setup(kind)
        const work = path.join(root, "work")
        writeTree(work, { "a.sh": { content: "echo hi\n", mode: 0o755 }, "src/in.txt": "in" })
        const d = yield* store.snapshot(work)
        const dest = path.join(root, "sandbox")
        yield* sandboxer.materialize(d, dest)
        assert.strictEqual(fs.readFileSync(path.join(dest, "src/in.txt"), "utf8"), "in")
        assert.strictEqual(fs.statSync(path.join(dest, "a.sh")).mode & 0o100, 0o100)
      }))

    it.scoped("a missing blob is a MissingDigest naming it, and the sandboxer is not restarted", () =>
      Effect.gen(function*() {
        const { root, sandboxer, store } = yield* setup(kind)
        const work = path.join(root, "work")
        writeTree(work, { "gone.txt": "soon gone", "kept.txt": "kept" })
        const d = yield* store.snapshot(work)
        yield* sandboxer.materialize(d, path.join(root, "first"))
        const before = yield* sandboxer.pid
        const gone = Digest.ofBytes(Buffer.from("soon gone"))
        yield* StoreMaintenance.make(store).remove(gone)
        const err = yield* Effect.flip(sandboxer.materialize(d, path.join(root, "second")))
        assert.strictEqual(err._tag, "MissingDigest")
        assert.strictEqual(Digest.format((err as Digest.MissingDigest).digest), Digest.format(gone))
        assert.deepStrictEqual(yield* sandboxer.pid, before)
      }))

    it.scoped.skipIf(!isRoot)(
      "a full disk is a SandboxError that keeps the store's NoSpace",
      () =>
        Effect.gen(function*() {
          const { root, sandboxer, store } = yield* setup(kind)
          const work = path.join(root, "work")
          writeTree(work, { "big.bin": Buffer.alloc(1024 * 1024, "x") })
          const d = yield* store.snapshot(work)
          const disk = yield* tmpfs(path.join(root, "disk"), "256k")
          const err = yield* Effect.flip(sandboxer.materialize(d, path.join(disk, "sandbox")))
          assert.strictEqual(err._tag, "SandboxError")
          if (err._tag !== "SandboxError") return
          assert.strictEqual(err.reason, "Materialize")
          assert.strictEqual(err.cause?.reason, "NoSpace", err.message)
          assert.include(err.message, "ENOSPC")
        })
    )
  })
}

describe("Sandboxer (process)", () => {
  it.scoped("start launches it without waiting, and only a materialize counts as using it", () =>
    Effect.gen(function*() {
      const { root, sandboxer, store } = yield* setup("process")
      assert.isTrue(Option.isNone(yield* sandboxer.pid))
      yield* sandboxer.start
      assert.isTrue(Option.isSome(yield* sandboxer.pid), "a start launches it")
      assert.isFalse(yield* sandboxer.used, "a start alone is not a use")
      writeTree(path.join(root, "work"), { "x.txt": "x" })
      yield* sandboxer.materialize(yield* store.snapshot(path.join(root, "work")), path.join(root, "one"))
      assert.isTrue(yield* sandboxer.used)
    }))

  it.scoped("a sandboxer SIGKILLed between two requests is respawned and the request succeeds", () =>
    Effect.gen(function*() {
      const { root, sandboxer, store } = yield* setup("process")
      const work = path.join(root, "work")
      writeTree(work, { "x.txt": "x" })
      const d = yield* store.snapshot(work)
      yield* sandboxer.materialize(d, path.join(root, "one"))
      const first = Option.getOrThrow(yield* sandboxer.pid)
      process.kill(first, "SIGKILL")
      yield* sandboxer.materialize(d, path.join(root, "two"))
      const second = Option.getOrThrow(yield* sandboxer.pid)
      assert.notStrictEqual(second, first)
      assert.strictEqual(fs.readFileSync(path.join(root, "two/x.txt"), "utf8"), "x")
    }))

  it.scoped("two engines get two sandboxers on two sockets; closing the scope stops each", () =>
    Effect.gen(function*() {
      const dirs = {
        a: { root: yield* tempDir("kiln-sbx-"), socketDir: yield* tempDir("kiln-sock-") },
        b: { root: yield* tempDir("kiln-sbx-"), socketDir: yield* tempDir("kiln-sock-") }
      }
      const sockets = (socketDir: string) => fs.readdirSync(socketDir).filter((n) => n.endsWith(".sock"))
      const [pa, pb] = yield* Effect.scoped(Effect.gen(function*() {
        const a = yield* setup("process", dirs.a)
        const b = yield* setup("process", dirs.b)
        const work = path.join(a.root, "work")
        writeTree(work, { "x.txt": "x" })
        const d = yield* a.store.snapshot(work)
        yield* b.store.snapshot(work)
        yield* Effect.all([
          a.sandboxer.materialize(d, path.join(a.root, "out")),
          b.sandboxer.materialize(d, path.join(b.root, "out"))
        ], { concurrency: 2 })
        const pa = Option.getOrThrow(yield* a.sandboxer.pid)
        const pb = Option.getOrThrow(yield* b.sandboxer.pid)
        assert.notStrictEqual(pa, pb)
        assert.strictEqual(sockets(a.socketDir).length, 1)
        assert.strictEqual(sockets(b.socketDir).length, 1)
        assert.isTrue(isAlive(pa) && isAlive(pb))
        return [pa, pb] as const
      }))
      // Both scopes closed: both sandboxers have exited and taken their sockets with them.
      assert.isFalse(isAlive(pa), "engine a's sandboxer outlived its scope")
      assert.isFalse(isAlive(pb), "engine b's sandboxer outlived its scope")
      assert.deepStrictEqual(sockets(dirs.a.socketDir), [])
      assert.deepStrictEqual(sockets(dirs.b.socketDir), [])
    }))

  it.scoped("the sandboxer exits and removes its socket when the layer's scope closes", () =>
    Effect.gen(function*() {
      const socketDir = yield* tempDir("kiln-sock-")
      const root = yield* tempDir("kiln-sbx-")
      const pid = yield* Effect.scoped(
        Effect.gen(function*() {
          const ctx = yield* Layer.build(
            Sandboxer.layer({ command: [process.execPath, cli], socketDir }).pipe(
              Layer.provideMerge(Store.layer({ root: path.join(root, "store") }))
            )
          )
          const sandboxer = Context.get(ctx, Sandboxer.Sandboxer)
          yield* sandboxer.materialize(Digest.empty, path.join(root, "empty"))
          return Option.getOrThrow(yield* sandboxer.pid)
        })
      )
      assert.isFalse(isAlive(pid), "the sandboxer outlived its engine's scope")
      assert.deepStrictEqual(fs.readdirSync(socketDir).filter((n) => n.endsWith(".sock")), [])
    }))
})
