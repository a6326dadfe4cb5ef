/**
 * Refilling a used sandbox: whatever the last process left, the sandbox ends up exactly as a fresh materialization
 * of the new tree (types, modes, bytes, link targets), and nothing outside it changes.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, FastCheck } from "effect"
import { spawnSync } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import type * as Store from "../../src/layers/store/Store.js"
import * as StoreMaintenance from "../../src/layers/store/StoreMaintenance.js"
import * as DirScan from "../../src/os/DirScan.js"
import * as Mounts from "../../src/os/mounts/Mounts.js"
import { tempDir, tempStore, writeTree } from "../utils/temp.js"

/** Everything under `root`: type, mode, and bytes or link target (and a file's link count), by relative path. */
const dump = (root: string, options: { readonly nlink: boolean } = { nlink: true }): Record<string, string> => {
  const out: Record<string, string> = {}
  const walk = (rel: string) => {
    for (const name of fs.readdirSync(path.join(root, rel)).sort()) {
      const r = rel === "" ? name : `${rel}/${name}`
      const p = path.join(root, r)
      const st = fs.lstatSync(p)
      const mode = `${(st.mode & 0o7777).toString(8)} ${st.uid}:${st.gid}`
      if (st.isDirectory()) {
        out[r] = `dir ${mode}`
        walk(r)
      } else if (st.isSymbolicLink()) {
        out[r] = `link ${st.uid}:${st.gid} -> ${fs.readlinkSync(p)}`
      } else {
        out[r] = `file ${mode} ${options.nlink ? st.nlink : ""} ${fs.readFileSync(p).toString("hex")}`
      }
    }
  }
  walk("")
  return out
}

type Spec = ReadonlyArray<readonly [ReadonlyArray<string>, string, "file" | "exec" | "link"]>

/** Stores a tree made of `spec` (a path that clashes with an earlier one is left out). */
const treeOf = (store: Store.Service, spec: Spec) =>
  Effect.gen(function*() {
    const src = yield* tempDir()
    for (const [segments, content, kind] of spec) {
      const p = path.join(src, ...segments)
      try {
        fs.mkdirSync(path.dirname(p), { recursive: true })
        if (kind === "link") fs.symlinkSync(content, p)
        else fs.writeFileSync(p, content, { mode: kind === "exec" ? 0o755 : 0o644 })
      } catch {
        // Both a file and a directory in the random set: the first one stays.
      }
    }
    return yield* store.snapshot(src)
  })

/** Stores a tree written from `files` (see `writeTree`). */
const storedTree = (store: Store.Service, files: Parameters<typeof writeTree>[1]) =>
  Effect.flatMap(tempDir(), (src) => {
    writeTree(src, files)
    return store.snapshot(src)
  })

/** Makes `keepDirs` as the runner's `prepare` does (not one that a file of the tree is in the way of). */
const prepare = (dir: string, keepDirs: ReadonlyArray<string>) => {
  for (const keep of keepDirs) {
    try {
      fs.mkdirSync(path.join(dir, keep), { recursive: true })
    } catch {
      // A file of the tree stands in the way.
    }
  }
}

/** What a fresh materialization, then `prepare`, leaves. */
const fresh = (store: Store.Service, digest: Parameters<Store.Service["materialize"]>[0], keepDirs: Array<string>) =>
  Effect.gen(function*() {
    const dir = yield* tempDir()
    yield* store.materialize(digest, dir)
    prepare(dir, keepDirs)
    return dump(dir)
  })

const segment = FastCheck.constantFrom("a", "b", "c")
const segments = FastCheck.array(segment, { minLength: 1, maxLength: 3 })
const spec: FastCheck.Arbitrary<Spec> = FastCheck.uniqueArray(
  FastCheck.tuple(
    segments,
    FastCheck.constantFrom("", "x", "y", "a longer line of text\n", "b"),
    FastCheck.constantFrom("file" as const, "file" as const, "exec" as const, "link" as const)
  ),
  { selector: ([p]) => p.join("/"), maxLength: 10 }
)

/** What a process may do in its sandbox; an op that does not apply (no such path, say) is skipped. */
type Op =
  | { readonly op: "write"; readonly at: ReadonlyArray<string>; readonly content: string }
  | { readonly op: "remove"; readonly at: ReadonlyArray<string> }
  | { readonly op: "mkdir"; readonly at: ReadonlyArray<string> }
  | { readonly op: "chmod"; readonly at: ReadonlyArray<string>; readonly mode: number }
  | { readonly op: "chown"; readonly at: ReadonlyArray<string> }
  | { readonly op: "symlink"; readonly at: ReadonlyArray<string>; readonly target: string }
  | { readonly op: "hardlinkOut"; readonly at: ReadonlyArray<string> }
  | { readonly op: "hardlinkIn"; readonly at: ReadonlyArray<string>; readonly to: ReadonlyArray<string> }

/** A symlink target standing for the `outside` directory of the run. */
const OUTSIDE = "<outside>"

const op: FastCheck.Arbitrary<Op> = FastCheck.oneof(
  FastCheck.record({
    op: FastCheck.constant("write" as const),
    at: segments,
    content: FastCheck.constantFrom("x", "y", "zz", "")
  }),
  FastCheck.record({ op: FastCheck.constant("remove" as const), at: segments }),
  FastCheck.record({ op: FastCheck.constant("mkdir" as const), at: segments }),
  FastCheck.record({
    op: FastCheck.constant("chmod" as const),
    at: FastCheck.array(segment, { maxLength: 3 }),
    mode: FastCheck.constantFrom(0o444, 0o555, 0o700, 0o777, 0o4755, 0o2755, 0o1777)
  }),
  FastCheck.record({ op: FastCheck.constant("chown" as const), at: FastCheck.array(segment, { maxLength: 3 }) }),
  FastCheck.record({
    op: FastCheck.constant("symlink" as const),
    at: segments,
    // An absolute target out of the sandbox is `outside` (a temp directory the test watches), never a host path:
    // the ops write and chmod through their links, as root.
    target: FastCheck.constantFrom("a", "../b", OUTSIDE)
  }),
  FastCheck.record({ op: FastCheck.constant("hardlinkOut" as const), at: segments }),
  FastCheck.record({ op: FastCheck.constant("hardlinkIn" as const), at: segments, to: segments })
)

const apply = (root: string, outside: string, ops: ReadonlyArray<Op>) => {
  ops.forEach((o, i) => {
    const p = path.join(root, ...o.at)
    try {
      switch (o.op) {
        case "write":
          fs.mkdirSync(path.dirname(p), { recursive: true })
          fs.writeFileSync(p, o.content)
          break
        case "remove":
          fs.rmSync(p, { recursive: true, force: true })
          break
        case "mkdir":
          fs.mkdirSync(p, { recursive: true })
          break
        case "chmod":
          fs.chmodSync(p, o.mode)
          break
        case "chown":
          // Only root can give a file away (to nobody); elsewhere this throws and is skipped.
          fs.lchownSync(p, 65534, 65534)
          break
        case "symlink":
          fs.symlinkSync(o.target === OUTSIDE ? outside : o.target, p)
          break
        case "hardlinkOut":
          fs.linkSync(p, path.join(outside, `link${i}`))
          break
        case "hardlinkIn":
          fs.linkSync(p, path.join(root, ...o.to))
          break
      }
    } catch {
      // Not applicable here.
    }
  })
}

/** Refills `dir` as the runner does (its mode reset first, as the sandbox pool does), then `prepare`s it. */
const refillOver = (
  store: Store.Service,
  dir: string,
  digest: Parameters<Store.Service["materialize"]>[0],
  keepDirs: Array<string>
) =>
  Effect.suspend(() => {
    fs.chmodSync(dir, 0o755 & ~process.umask())
    return Effect.tap(
      store.materialize(digest, dir, { createDestination: false, reuse: true, keepDirs }),
      () => prepare(dir, keepDirs)
    )
  })

describe("Refill", () => {
  it.scoped.prop(
    "a used sandbox refilled holds exactly what a fresh one would, and nothing outside it changes",
    [spec, FastCheck.array(op, { maxLength: 8 }), spec, FastCheck.constantFrom([], ["out"], ["a/out", "b"])],
    ([before, ops, after, keepDirs]) =>
      Effect.gen(function*() {
        const store = yield* tempStore()
        const first = yield* treeOf(store, before)
        const second = yield* treeOf(store, after)
        // A directory of its own around the sandbox: a link to `../b` at its top resolves there, not in /tmp.
        const sandbox = path.join(yield* tempDir(), "sandbox")
        fs.mkdirSync(sandbox)
        const outside = yield* tempDir()
        yield* store.materialize(first, sandbox)
        apply(sandbox, outside, ops)
        // (Their link counts drop as the sandbox's links go.)
        const outsideBefore = dump(outside, { nlink: false })
        yield* refillOver(store, sandbox, second, [...keepDirs])
        assert.deepStrictEqual(dump(sandbox), yield* fresh(store, second, [...keepDirs]))
        assert.deepStrictEqual(dump(outside, { nlink: false }), outsideBefore)
      }).pipe(Effect.scoped),
    { fastCheck: { numRuns: 100 } }
  )

  it.scoped("reuses what is there: a directory beside a wanted one is renamed, files are rewritten in place", () =>
    Effect.gen(function*() {
      const store = yield* tempStore()
      const first = yield* storedTree(store, {
        "src/p1/f0.txt": "s p1 f0\n",
        "src/p1/f1.txt": "s p1 f1\n",
        "out/p0.txt": "zero\n"
      })
      const second = yield* storedTree(store, {
        "src/p2/f0.txt": "s p2 f0\n",
        "src/p2/f1.txt": "s p2 f1\n",
        "out/p0.txt": "zero\n"
      })
      const sandbox = yield* tempDir()
      yield* store.materialize(first, sandbox)
      fs.writeFileSync(path.join(sandbox, "out/p1.txt"), "the first process's output")
      const inode = (rel: string) => fs.lstatSync(path.join(sandbox, rel)).ino
      const before = { dir: inode("src/p1"), f0: inode("src/p1/f0.txt"), kept: inode("out/p0.txt") }
      const old = new Date(Date.now() - 3_600_000)
      fs.utimesSync(path.join(sandbox, "out/p0.txt"), old, old)
      const refilled = Date.now()
      yield* refillOver(store, sandbox, second, ["out"])
      assert.deepStrictEqual(dump(sandbox), yield* fresh(store, second, ["out"]))
      // The same inodes under the new names: nothing was made, only the output the tree does not hold was removed.
      assert.strictEqual(inode("src/p2"), before.dir)
      assert.strictEqual(inode("src/p2/f0.txt"), before.f0)
      assert.strictEqual(inode("out/p0.txt"), before.kept)
      // Kept, but with the times a file written now has.
      assert.isAtLeast(fs.statSync(path.join(sandbox, "out/p0.txt")).mtimeMs, refilled - 1000)
    }))

  it.scoped("never writes through a hard link: not into a file outside, nor into the store's own large files", () =>
    Effect.gen(function*() {
      const store = yield* tempStore()
      const big = Buffer.alloc(600 * 1024, 7)
      const first = yield* storedTree(store, { "big.bin": big, "in.txt": "in" })
      const second = yield* storedTree(store, { "big.bin": "small now", "in.txt": "changed", "new.txt": "new" })
      const sandbox = yield* tempDir()
      const outside = yield* tempDir()
      yield* store.materialize(first, sandbox)
      // The large file is a hard link to the store's copy; the process links its input out of the sandbox.
      assert.isAbove(fs.lstatSync(path.join(sandbox, "big.bin")).nlink, 1)
      fs.linkSync(path.join(sandbox, "in.txt"), path.join(outside, "in.txt"))
      yield* refillOver(store, sandbox, second, [])
      assert.deepStrictEqual(dump(sandbox), yield* fresh(store, second, []))
      assert.strictEqual(fs.readFileSync(path.join(outside, "in.txt"), "utf8"), "in")
      assert.deepStrictEqual((yield* StoreMaintenance.make(store).check()).problems, [])
      assert.deepStrictEqual(Buffer.from(yield* store.getFile((yield* store.listTree(first))[0]!.digest!)), big)
    }))

  it.scoped("what changed after the process ended is seen: nothing is written through a symlink put there", () =>
    Effect.gen(function*() {
      const store = yield* tempStore()
      const first = yield* storedTree(store, { "o/file.txt": "in", "o/sub/x": "x" })
      const second = yield* storedTree(store, { "o/file.txt": "new", "o/sub/x": "x", "o/sub/y": "y" })
      const sandbox = yield* tempDir()
      const outside = yield* tempDir()
      writeTree(outside, { "file.txt": "outside", "sub/x": "x" })
      yield* store.materialize(first, sandbox)
      // As a straggler might, once its process group is gone: a wanted directory becomes a symlink out of the
      // sandbox, and a file appears.
      fs.rmSync(path.join(sandbox, "o"), { recursive: true })
      fs.symlinkSync(outside, path.join(sandbox, "o"))
      fs.writeFileSync(path.join(sandbox, "late.txt"), "late")
      fs.chmodSync(outside, 0o700)
      const before = { ...dump(outside), mode: fs.statSync(outside).mode }
      yield* refillOver(store, sandbox, second, [])
      assert.deepStrictEqual(dump(sandbox), yield* fresh(store, second, []))
      assert.deepStrictEqual({ ...dump(outside), mode: fs.statSync(outside).mode }, before)
    }))

  it.scoped("a setgid directory and a umask without owner bits: still what a fresh sandbox gets", () =>
    Effect.gen(function*() {
      const store = yield* tempStore()
      const first = yield* storedTree(store, { "a/f": "f", "g": "same" })
      const second = yield* storedTree(store, { "a/f": "f", "a/b/h": "h", "g": "same" })
      const sandbox = yield* tempDir()
      yield* store.materialize(first, sandbox)
      // A new directory in `a` would inherit the bit if `a` kept it.
      fs.chmodSync(path.join(sandbox, "a"), 0o2755)
      yield* refillOver(store, sandbox, second, [])
      assert.deepStrictEqual(dump(sandbox), yield* fresh(store, second, []))
      const umask = process.umask(0o222)
      try {
        fs.chmodSync(path.join(sandbox, "g"), 0o444)
        yield* refillOver(store, sandbox, first, [])
        assert.deepStrictEqual(dump(sandbox), yield* fresh(store, first, []))
      } finally {
        process.umask(umask)
      }
    }))

  // Making a bind mount takes root (as CI runs); elsewhere the test is skipped, and says so.
  it.scoped.skipIf(process.getuid?.() !== 0)("a bind mount inside is seen", () =>
    Effect.gen(function*() {
      const dir = yield* tempDir()
      const outside = yield* tempDir()
      fs.mkdirSync(path.join(dir, "m m"))
      assert.isUndefined(Mounts.mountUnder(dir))
      const mounted = spawnSync("mount", ["--bind", outside, path.join(dir, "m m")], { encoding: "utf8" })
      assert.strictEqual(mounted.status, 0, `mount --bind failed: ${mounted.stderr}`)
      try {
        assert.strictEqual(Mounts.mountUnder(dir), path.join(dir, "m m"))
        assert.strictEqual(Mounts.mountUnder(path.join(dir, "m m")), path.join(dir, "m m"))
        assert.isUndefined(Mounts.mountUnder(path.join(dir, "m")))
      } finally {
        spawnSync("umount", [path.join(dir, "m m")])
      }
    }))

  it("scan lists without following symlinks, and gives up past its limit", () => {
    const root = fs.mkdtempSync(path.join(os.tmpdir(), "kiln-scan-"))
    try {
      writeTree(root, { "a/b/c.txt": "c", "l": { link: "/" }, "d.txt": "d" })
      assert.deepStrictEqual(
        Object.fromEntries(DirScan.scan(root, 10)!),
        { a: "dir", "a/b": "dir", "a/b/c.txt": "file", l: "other", "d.txt": "file" }
      )
      assert.isUndefined(DirScan.scan(root, 4))
    } finally {
      fs.rmSync(root, { recursive: true })
    }
  })
})
