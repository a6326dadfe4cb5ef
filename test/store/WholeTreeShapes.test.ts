/**
 * A directory taken whole (`node_modules/**`) is an input as it is on disk, whatever its shape: an empty directory
 * (pnpm's `node_modules/.tmp`), a directory holding only empty ones, a dangling symlink, a pnpm-like symlink farm
 * (`node_modules/<pkg> -> .pnpm/<pkg>@<v>/node_modules/<pkg>`). Its tree is then the directory itself (the same tree
 * as a snapshot of it without globs, with or without a session), so it stands in for its tree: the snapshot reports
 * it among its whole directories, which the engine mounts and records once. A glob over part of a tree still drops
 * the empty directories it leaves.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Either } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"
import type * as Digest from "../../src/domain/Digest.js"
import type * as Store from "../../src/layers/store/Store.js"
import { settleTimes, tempDir, tempStore, writeTree } from "../utils/temp.js"

const GLOBS = ["src/**", "node_modules/**"]

/** Each shape of a real `node_modules`, written into one (`nm`), beside a package file or two. */
const SHAPES: Record<string, (nm: string) => void> = {
  "an empty directory": (nm) => fs.mkdirSync(path.join(nm, ".tmp")),
  "a directory holding only empty directories": (nm) => fs.mkdirSync(path.join(nm, "hollow/a/b"), { recursive: true }),
  "a dangling symlink": (nm) => fs.symlinkSync("gone/index.js", path.join(nm, "dangling")),
  "a pnpm-like symlink farm": (nm) =>
    writeTree(nm, {
      ".pnpm/left-pad@1.3.0/node_modules/left-pad/index.js": "module.exports = 'pad'\n",
      ".pnpm/left-pad@1.3.0/node_modules/dep": { link: "../../dep@2.0.0/node_modules/dep" },
      ".pnpm/dep@2.0.0/node_modules/dep/index.js": "module.exports = 'dep'\n",
      "left-pad": { link: ".pnpm/left-pad@1.3.0/node_modules/left-pad" },
      ".modules.yaml": "layoutVersion: 5\n"
    })
}

const workspaceWith = (shape: (nm: string) => void) =>
  Effect.gen(function*() {
    const ws = yield* tempDir("kiln-whole-shapes-")
    writeTree(ws, { "src/a.txt": "a\n", "node_modules/p/index.js": "module.exports = 1\n" })
    shape(path.join(ws, "node_modules"))
    settleTimes(ws)
    return ws
  })

const snapshotIn = (store: Store.Service, ws: string, globs: ReadonlyArray<string>, session?: Store.SnapshotSession) =>
  Effect.flatMap(store.snapshotMany(ws, [{ globs, observe: true }], session), ([taken]) => taken!)

/** The digest of `name` in the root directory `root`. */
const childOf = (store: Store.Service, root: Digest.Digest, name: string) =>
  Effect.map(store.getDirectory(root), (d) => d.directories.find((x) => x.name === name)?.digest)

describe("a directory taken whole, of each shape a real node_modules has", () => {
  for (const [shape, write] of Object.entries(SHAPES)) {
    it.scoped(`${shape}: its tree is the directory on disk, and it stands in for it`, () =>
      Effect.gen(function*() {
        const ws = yield* workspaceWith(write)
        const nm = path.join(ws, "node_modules")
        const store = yield* tempStore()
        // The directory as it is: a snapshot of it with no globs drops nothing, of a copy without pnpm's
        // bookkeeping (`.modules.yaml`), which is no input.
        const copy = path.join(yield* tempDir("kiln-whole-shapes-copy-"), "nm")
        fs.cpSync(nm, copy, {
          recursive: true,
          verbatimSymlinks: true,
          filter: (p) => path.basename(p) !== ".modules.yaml"
        })
        const onDisk = yield* store.snapshot(copy)
        const taken = yield* Effect.scoped(
          Effect.flatMap(store.snapshotSession(ws), (session) => snapshotIn(store, ws, GLOBS, session))
        )
        assert.deepStrictEqual(yield* childOf(store, taken.digest, "node_modules"), onDisk)
        assert.deepStrictEqual(taken.unmatched, [])
        const whole = taken.wholeDirectories.find((w) => w.abs === nm)
        assert.isDefined(whole, `node_modules does not stand in for its tree: ${shape}`)
        assert.deepStrictEqual(whole!.digest, onDisk)
        assert.isTrue(whole!.unchanged())
        // Without a session, and in the next session (from the digest the first one saved), the same tree.
        assert.deepStrictEqual((yield* snapshotIn(store, ws, GLOBS)).digest, taken.digest)
        const again = yield* Effect.scoped(
          Effect.flatMap(store.snapshotSession(ws), (session) => snapshotIn(store, ws, GLOBS, session))
        )
        assert.deepStrictEqual(again.digest, taken.digest)
        assert.deepStrictEqual(again.wholeDirectories.map((w) => w.abs), taken.wholeDirectories.map((w) => w.abs))
        // Written out, it is the directory again, entry for entry.
        const out = path.join(yield* tempDir("kiln-whole-shapes-out-"), "nm")
        yield* store.materialize(onDisk, out)
        assert.deepStrictEqual(listing(out), listing(nm).filter((e) => !e.startsWith(".modules.yaml ")))
      }))
  }

  it.scoped("a glob over part of a tree drops the empty directories it leaves, as before", () =>
    Effect.gen(function*() {
      const ws = yield* workspaceWith(SHAPES["a directory holding only empty directories"]!)
      fs.mkdirSync(path.join(ws, "src/empty"))
      const store = yield* tempStore()
      const partial = yield* Effect.scoped(Effect.flatMap(
        store.snapshotSession(ws),
        (session) => snapshotIn(store, ws, ["src/*.txt", "node_modules/p/*.js", "node_modules/hollow/**/*.js"], session)
      ))
      const paths = (yield* store.listTree(partial.digest)).map((e) => `${e.path}${e.type === "directory" ? "/" : ""}`)
      assert.deepStrictEqual(paths.sort(), [
        "node_modules/",
        "node_modules/p/",
        "node_modules/p/index.js",
        "src/",
        "src/a.txt"
      ])
      assert.deepStrictEqual(partial.unmatched, ["node_modules/hollow/**/*.js"])
    }))

  it.scoped("a directory taken whole that holds only empty directories still matches nothing", () =>
    Effect.gen(function*() {
      const ws = yield* workspaceWith(() => {})
      fs.mkdirSync(path.join(ws, "hollow/a/b"), { recursive: true })
      settleTimes(ws)
      const store = yield* tempStore()
      const globs = ["src/**", "hollow/**"]
      const [alone] = yield* store.snapshotMany(ws, [{ globs }])
      assert.deepStrictEqual(Either.getOrThrow(alone!).unmatched, ["hollow/**"])
      const [inSession] = yield* Effect.scoped(
        Effect.flatMap(store.snapshotSession(ws), (session) => store.snapshotMany(ws, [{ globs }], session))
      )
      assert.deepStrictEqual(Either.getOrThrow(inSession!).unmatched, ["hollow/**"])
    }))
})

/** Every entry under `dir` with its kind (a symlink's target, a file's bytes), relative to it, sorted. */
const listing = (dir: string): Array<string> => {
  const out: Array<string> = []
  const visit = (rel: string) => {
    for (const e of fs.readdirSync(path.join(dir, rel), { withFileTypes: true })) {
      const r = rel === "" ? e.name : `${rel}/${e.name}`
      const abs = path.join(dir, r)
      if (e.isSymbolicLink()) out.push(`${r} -> ${fs.readlinkSync(abs)}`)
      else if (e.isDirectory()) {
        out.push(`${r}/`)
        visit(r)
      } else out.push(`${r} ${fs.readFileSync(abs, "utf8")}`)
    }
  }
  visit("")
  return out.sort()
}
