/**
 * A tree's inotify watch (a standby's reason to skip a `node_modules`' `lstat`s) on real trees: it must say
 * "unchanged" while nothing changed, and "changed" for every change a path's stat would show: a file's bytes or mode,
 * an entry made, removed or renamed, a file written through a hard link outside the tree, the tree's directory
 * replaced from outside it, a mount made inside it; and it must refuse what it cannot watch wholly.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { execFileSync } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"
import * as TreeWatch from "../../src/os/native/TreeWatch.js"
import { tempDir, writeTree } from "../utils/temp.js"
import { isRoot, overlay, tmpfs } from "../utils/tmpfs.js"

/** The file systems `native/treeWatch.c` watches (by `statfs` magic, as `stat -f` prints it). */
const LOCAL = new Set(["ef53", "58465342", "9123683e", "1021994", "f2f52010"])
const watchable = (dir: string): boolean =>
  LOCAL.has(execFileSync("stat", ["-f", "-c", "%t", dir], { encoding: "utf8" }).trim().toLowerCase())

/** Every path under `dir/top` as a group lists it: names relative to `dir`, kinds `d`, `f`, `l`. */
const treeOf = (dir: string, top: string) => {
  const names: Array<string> = []
  let kinds = ""
  const walk = (rel: string) => {
    const st = fs.lstatSync(path.join(dir, rel))
    names.push(rel)
    kinds += st.isDirectory() ? "d" : st.isSymbolicLink() ? "l" : "f"
    if (st.isDirectory()) { for (const e of fs.readdirSync(path.join(dir, rel)).sort()) walk(`${rel}/${e}`) }
  }
  walk(top)
  const st = fs.lstatSync(path.join(dir, top))
  return { names: names.join("\0"), kinds, tops: [{ name: top, dev: st.dev, ino: st.ino }] }
}

/** A watched `node_modules` of a few packages in a workspace in a fresh temp dir, closed with the scope. */
const watchedTree = Effect.gen(function*() {
  const dir = path.join(yield* tempDir("kiln-treewatch-"), "ws")
  writeTree(dir, {
    "node_modules/a/package.json": "{}",
    "node_modules/a/index.js": "module.exports = 1\n",
    "node_modules/a/lib/util.js": "exports.u = 2\n",
    "node_modules/.bin/a": { link: "../a/index.js" },
    "node_modules/b/index.js": "module.exports = 3\n"
  })
  if (!watchable(dir)) return { dir, watch: undefined }
  const tree = treeOf(dir, "node_modules")
  const watch = TreeWatch.watch(`${dir}/`, tree.names, tree.kinds, tree.tops)
  if (watch !== undefined) yield* Effect.addFinalizer(() => Effect.sync(() => TreeWatch.close(watch)))
  return { dir, watch }
})

describe("TreeWatch", () => {
  it.scoped("says unchanged while nothing changes, reads included", () =>
    Effect.gen(function*() {
      const { dir, watch } = yield* watchedTree
      if (!watchable(dir)) return
      assert.isDefined(watch, "a tree on a local file system is watched")
      fs.readFileSync(path.join(dir, "node_modules/a/index.js"))
      fs.readdirSync(path.join(dir, "node_modules/a/lib"))
      fs.lstatSync(path.join(dir, "node_modules/.bin/a"))
      assert.isTrue(TreeWatch.unchanged(watch!))
      assert.isTrue(TreeWatch.unchanged(watch!))
    }))

  const changes: ReadonlyArray<readonly [string, (dir: string) => void]> = [
    ["a file's bytes", (dir) => fs.appendFileSync(path.join(dir, "node_modules/a/lib/util.js"), "x")],
    ["a file's mode", (dir) => fs.chmodSync(path.join(dir, "node_modules/b/index.js"), 0o755)],
    ["a file's times", (dir) => fs.utimesSync(path.join(dir, "node_modules/a/index.js"), 1, 1)],
    ["an entry made", (dir) => fs.writeFileSync(path.join(dir, "node_modules/a/lib/new.js"), "")],
    ["an entry removed", (dir) => fs.unlinkSync(path.join(dir, "node_modules/.bin/a"))],
    ["a directory renamed", (dir) => fs.renameSync(path.join(dir, "node_modules/b"), path.join(dir, "b-moved"))],
    ["a link retargeted", (dir) => {
      fs.unlinkSync(path.join(dir, "node_modules/.bin/a"))
      fs.symlinkSync("../b/index.js", path.join(dir, "node_modules/.bin/a"))
    }],
    // Its inode is watched: a change through a link in a directory the tree does not hold is seen too.
    ["a file written through a hard link outside the tree", (dir) => {
      fs.linkSync(path.join(dir, "node_modules/a/index.js"), path.join(dir, "outside.js"))
      fs.appendFileSync(path.join(dir, "outside.js"), "// changed\n")
    }],
    // Nothing watched moves (the workspace above the tree is not watched): only the top's own stat, compared at each
    // answer, can tell that the path now leads to another tree.
    ["the workspace replaced by a copy", (dir) => {
      fs.renameSync(dir, `${dir}.old`)
      fs.cpSync(`${dir}.old`, dir, { recursive: true, verbatimSymlinks: true })
    }]
  ]
  for (const [what, change] of changes) {
    it.scoped(`says changed after ${what}`, () =>
      Effect.gen(function*() {
        const { dir, watch } = yield* watchedTree
        if (!watchable(dir)) return
        assert.isDefined(watch)
        assert.isTrue(TreeWatch.unchanged(watch!))
        change(dir)
        assert.isFalse(TreeWatch.unchanged(watch!))
      }))
  }

  it.scoped.skipIf(!isRoot)("says changed after a mount inside the tree", () =>
    Effect.gen(function*() {
      const { dir, watch } = yield* watchedTree
      if (!watchable(dir)) return
      assert.isDefined(watch)
      yield* tmpfs(path.join(dir, "node_modules/a/lib"), "64k")
      assert.isFalse(TreeWatch.unchanged(watch!))
    }))

  // An overlay's files are its lower layer's: a change made there reaches no inode inotify watches through the overlay.
  it.scoped.skipIf(!isRoot)(
    "refuses a tree on an overlay mounted in a workspace on a local file system",
    () =>
      Effect.gen(function*() {
        const dir = yield* tempDir("kiln-treewatch-")
        if (!watchable(dir)) return
        writeTree(dir, { "lower/a/index.js": "1", "ws/kiln.json": "{}" })
        fs.mkdirSync(path.join(dir, "ws/node_modules"))
        yield* overlay(path.join(dir, "ws/node_modules"), path.join(dir, "lower"))
        const tree = treeOf(path.join(dir, "ws"), "node_modules")
        assert.strictEqual(tree.kinds, "ddf", "the overlay shows the lower layer")
        assert.isUndefined(TreeWatch.watch(`${dir}/ws/`, tree.names, tree.kinds, tree.tops))
      })
  )

  it.scoped("counts every tree's watches against one budget for the process", () =>
    Effect.gen(function*() {
      const dir = yield* tempDir("kiln-treewatch-")
      if (!watchable(dir)) return
      writeTree(dir, { "t/f": "1" })
      const limit = Number(fs.readFileSync("/proc/sys/fs/inotify/max_user_watches", "utf8"))
      const budget = Math.min(32_768, Math.floor(limit / 8))
      // The same file named again is one watch to the kernel, and counted as many here: the budget is kiln's own.
      const treeOfSize = (n: number) => ({
        names: ["t", ...Array.from({ length: n - 1 }, () => "t/f")].join("\0"),
        kinds: `d${"f".repeat(n - 1)}`
      })
      const large = treeOfSize(budget - 10)
      const small = treeOfSize(20)
      const tops = [{
        name: "t",
        dev: fs.lstatSync(path.join(dir, "t")).dev,
        ino: fs.lstatSync(path.join(dir, "t")).ino
      }]
      const first = TreeWatch.watch(`${dir}/`, large.names, large.kinds, tops)
      assert.isDefined(first)
      assert.isUndefined(TreeWatch.watch(`${dir}/`, small.names, small.kinds, tops), "over what is left")
      TreeWatch.close(first!)
      const second = TreeWatch.watch(`${dir}/`, small.names, small.kinds, tops)
      assert.isDefined(second, "what the first held is given back when it is closed")
      TreeWatch.close(second!)
    }))

  it.scoped("refuses a tree it cannot watch wholly: a path gone, of another kind, or past the cap", () =>
    Effect.gen(function*() {
      const dir = yield* tempDir("kiln-treewatch-")
      if (!watchable(dir)) return
      writeTree(dir, { "t/f": "1", "t/d/g": "2" })
      const tree = treeOf(dir, "t")
      const made = TreeWatch.watch(`${dir}/`, tree.names, tree.kinds, tree.tops)
      assert.isDefined(made)
      TreeWatch.close(made!)
      // A directory recorded where a file is now, and a path that is gone.
      assert.isUndefined(TreeWatch.watch(`${dir}/`, tree.names, tree.kinds.replace("f", "d"), tree.tops))
      assert.isUndefined(TreeWatch.watch(`${dir}/`, `${tree.names}\0t/absent`, `${tree.kinds}f`, tree.tops))
      // More names than kinds, or fewer.
      assert.isUndefined(TreeWatch.watch(`${dir}/`, `${tree.names}\0t/f`, tree.kinds, tree.tops))
      assert.isUndefined(TreeWatch.watch(`${dir}/`, tree.names, `${tree.kinds}f`, tree.tops))
      // More watches than the cap allows (an eighth of the user's limit, at most 32,768).
      const many = Array.from({ length: 33_000 }, () => "t/f").join("\0")
      assert.isUndefined(TreeWatch.watch(`${dir}/`, many, "f".repeat(33_000), tree.tops))
    }))
})
