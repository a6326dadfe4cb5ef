/**
 * Write-back against hostile trees and workspaces: an output tree that has a symlink where a directory is declared
 * (to `.`, `..`, an absolute directory), a workspace whose working directory or declared directory is a symlink, and
 * the temp files of kilns that died (or still run) beside outputs. Whatever is there, nothing outside the declared
 * output paths is listed, written or removed: the victims, all inside the test's temp dir, keep every file.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Either } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"
import type * as Digest from "../../src/domain/Digest.js"
import * as Directory from "../../src/domain/Directory.js"
import type * as Store from "../../src/layers/store/Store.js"
import * as OutputTemps from "../../src/layers/workspace/internal/outputTemps.js"
import { writeBack } from "../../src/layers/workspace/internal/writeBack.js"
import type { Destination } from "../../src/layers/workspace/Workspace.js"
import * as Proc from "../../src/os/Proc.js"
import { tempDir, tempStore, writeTree } from "../utils/temp.js"

/** An output tree: a string is a file, `{ link }` a symlink, an object a directory. */
type Spec = { readonly [name: string]: string | { readonly link: string } | Spec }

const put = (store: Store.Service, spec: Spec): Effect.Effect<Digest.Digest, unknown> =>
  Effect.gen(function*() {
    const files: Array<Directory.FileNode> = []
    const directories: Array<Directory.DirectoryNode> = []
    const symlinks: Array<Directory.SymlinkNode> = []
    for (const [name, v] of Object.entries(spec)) {
      if (typeof v === "string") {
        files.push({ name, digest: yield* store.putFile(Buffer.from(v)), isExecutable: false })
      } else if (typeof v.link === "string") symlinks.push({ name, target: v.link })
      else directories.push({ name, digest: yield* put(store, v as Spec) })
    }
    return yield* store.putDirectory(Either.getOrThrow(Directory.make({ files, directories, symlinks })))
  })

/** A temp root holding a workspace `ws/` and a victim directory `victim/` (two files) beside it. */
const setup = Effect.gen(function*() {
  const root = yield* tempDir("kiln-writeback-")
  const ws = path.join(root, "ws")
  const victim = path.join(root, "victim")
  writeTree(root, {
    "ws/keep.txt": "mine",
    "ws/out/stale.txt": "an earlier run's",
    "victim/important.txt": "keep",
    "victim/d/x": "keep",
    "beside.txt": "keep"
  })
  const store = yield* tempStore()
  const untouched = () => {
    assert.strictEqual(fs.readFileSync(path.join(victim, "important.txt"), "utf8"), "keep")
    assert.strictEqual(fs.readFileSync(path.join(victim, "d/x"), "utf8"), "keep")
    assert.strictEqual(fs.readFileSync(path.join(root, "beside.txt"), "utf8"), "keep")
    assert.strictEqual(fs.readFileSync(path.join(ws, "keep.txt"), "utf8"), "mine")
  }
  return { root, ws, victim, store, untouched }
})

const destination = (ws: string, over: Partial<Destination> = {}): Destination => ({
  workspace: ws,
  workingDirectory: "",
  declaredDirectories: ["out"],
  ...over
})

describe("writeBack", () => {
  it.scoped("a declared directory the result has as a symlink (to ., .., an absolute path) is refused", () =>
    Effect.gen(function*() {
      for (const target of [".", "..", "ABS"]) {
        const { store, untouched, victim, ws } = yield* setup
        const link = target === "ABS" ? victim : target
        const tree = yield* put(store, { out: { link }, "f.txt": "x" })
        const failed = yield* Effect.flip(writeBack(store, tree, destination(ws)))
        assert.strictEqual(failed._tag, "InvalidOutput", failed.message)
        assert.strictEqual(
          failed.message,
          `output \`out/\` is declared as a directory, but the result has a symlink to \`${link}\` there: kiln does ` +
            "not write or prune through it"
        )
        untouched()
        // Refused before anything was written.
        assert.isFalse(fs.existsSync(path.join(ws, "f.txt")))
        assert.isTrue(fs.existsSync(path.join(ws, "out/stale.txt")))
      }
    }))

  it.scoped("a declared directory that is a symlink in the workspace is replaced by a real one; its target is kept", () =>
    Effect.gen(function*() {
      const { store, untouched, victim, ws } = yield* setup
      fs.rmSync(path.join(ws, "out"), { recursive: true })
      fs.symlinkSync(victim, path.join(ws, "out"))
      fs.symlinkSync("..", path.join(ws, "up"))
      const tree = yield* put(store, { out: { "a.txt": "a", sub: { "b.txt": "b" } }, up: { "c.txt": "c" } })
      yield* writeBack(store, tree, destination(ws, { declaredDirectories: ["out", "up"] }))
      untouched()
      assert.isFalse(fs.lstatSync(path.join(ws, "out")).isSymbolicLink())
      assert.deepStrictEqual(fs.readdirSync(path.join(ws, "out")).sort(), ["a.txt", "sub"])
      assert.deepStrictEqual(fs.readdirSync(path.join(ws, "up")), ["c.txt"])
    }))

  it.scoped("a directory of the output made a symlink before its files are written is replaced, not written through", () =>
    Effect.gen(function*() {
      const { store, untouched, victim, ws } = yield* setup
      fs.symlinkSync(victim, path.join(ws, "out/sub"))
      fs.symlinkSync(victim, path.join(ws, "pkg"))
      const tree = yield* put(store, { out: { sub: { "important.txt": "overwritten" } }, pkg: { "f.txt": "f" } })
      yield* writeBack(store, tree, destination(ws))
      untouched()
      assert.strictEqual(fs.readFileSync(path.join(ws, "out/sub/important.txt"), "utf8"), "overwritten")
      assert.strictEqual(fs.readFileSync(path.join(ws, "pkg/f.txt"), "utf8"), "f")
      assert.isFalse(fs.existsSync(path.join(victim, "f.txt")))
    }))

  it.scoped("a working directory that is a symlink in the workspace is refused, naming it", () =>
    Effect.gen(function*() {
      const { store, untouched, victim, ws } = yield* setup
      fs.symlinkSync(victim, path.join(ws, "pkg"))
      fs.mkdirSync(path.join(victim, "out"))
      fs.writeFileSync(path.join(victim, "out/precious"), "keep")
      const tree = yield* put(store, { out: { "a.txt": "a" }, "f.txt": "f" })
      const failed = yield* Effect.flip(writeBack(store, tree, destination(ws, { workingDirectory: "pkg" })))
      assert.strictEqual(failed._tag, "InvalidOutput", failed.message)
      assert.match(failed.message, /^output `(out|f\.txt)` is written under `pkg`, which is a symlink in the workspace/)
      untouched()
      assert.deepStrictEqual(fs.readdirSync(path.join(victim, "out")), ["precious"])
      assert.isFalse(fs.existsSync(path.join(victim, "f.txt")))
    }))

  it.scoped("into directories it made, each file is written and said once; written again, nothing is rewritten", () =>
    Effect.gen(function*() {
      const { store, untouched, ws } = yield* setup
      fs.rmSync(path.join(ws, "out"), { recursive: true })
      const tree = yield* put(store, { out: { "a.txt": "a", sub: { "b.txt": "b" } }, "f.txt": "f" })
      const files = ["f.txt", "out/a.txt", "out/sub/b.txt"].map((rel) => path.join(ws, rel))
      const seenFiles = (seen: ReadonlyArray<{ readonly kind: string; readonly abs: string }>) =>
        seen.filter((o) => o.kind === "f").map((o) => o.abs).sort()
      const first = yield* writeBack(store, tree, destination(ws))
      untouched()
      assert.deepStrictEqual(files.map((f) => fs.readFileSync(f, "utf8")), ["f", "a", "b"])
      assert.deepStrictEqual(seenFiles(first), files)
      for (const o of first) {
        if (o.kind === "f") assert.strictEqual((o as { ino: bigint }).ino, fs.lstatSync(o.abs, { bigint: true }).ino)
      }
      // No temp file is left beside any of them.
      assert.deepStrictEqual(fs.readdirSync(path.join(ws, "out")).sort(), ["a.txt", "sub"])
      const inodes = files.map((f) => fs.lstatSync(f).ino)
      const again = yield* writeBack(store, tree, destination(ws))
      assert.deepStrictEqual(files.map((f) => fs.lstatSync(f).ino), inodes)
      assert.deepStrictEqual(seenFiles(again), files)
    }))

  it.scoped("a workspace (or working directory) that is not there yet is made, as before", () =>
    Effect.gen(function*() {
      const { root, store } = yield* setup
      const tree = yield* put(store, { out: { "a.txt": "a" }, "f.txt": "f" })
      for (const [ws, workingDirectory] of [[path.join(root, "new"), ""], [path.join(root, "new2"), "sub/dir"]]) {
        yield* writeBack(store, tree, destination(ws!, { workingDirectory: workingDirectory! }))
        assert.strictEqual(fs.readFileSync(path.join(ws!, workingDirectory!, "f.txt"), "utf8"), "f")
        assert.strictEqual(fs.readFileSync(path.join(ws!, workingDirectory!, "out/a.txt"), "utf8"), "a")
      }
    }))

  it.scoped("prune removes a dead kiln's temp file and leaves a live one's; asked to, so does the write beside outputs", () =>
    Effect.gen(function*() {
      const { store, ws } = yield* setup
      const me = Proc.self()
      const dead = (name: string) => `.${name}.kiln-${me.pid}-1-0`
      const live = (name: string) => `.${name}.kiln-${me.pid}-${me.startTime}-1`
      const old = (name: string) => `.${name}.kiln-${me.pid}-2` // Named before start times were: alive, kept.
      const planted = [dead("f.txt"), live("f.txt"), old("f.txt"), `out/${dead("a.txt")}`, `out/${live("a.txt")}`]
      for (const p of planted) fs.writeFileSync(path.join(ws, p), "partial")
      assert.isTrue(OutputTemps.isLiveTemp(live("f.txt")))
      assert.isFalse(OutputTemps.isLiveTemp(dead("f.txt")))
      const tree = yield* put(store, { out: { "a.txt": "a" }, "f.txt": "f" })
      yield* writeBack(store, tree, destination(ws))
      const there = (p: string) => fs.existsSync(path.join(ws, p))
      assert.deepStrictEqual(planted.map(there), [true, true, true, false, true], "without a sweep, only prune")
      assert.isFalse(there("out/stale.txt"))
      const sweep = new Set<string>()
      yield* writeBack(store, tree, destination(ws, { sweep }))
      assert.deepStrictEqual(planted.map(there), [false, true, true, false, true])
      assert.deepStrictEqual([...sweep].sort(), [ws, path.join(ws, "out")])
    }))
})
