/**
 * The run memo's packed groups: a directory taken whole, packed in columns, holds exactly while every path of it is
 * as it was (by stat, or by content where its stat moved or was racy), and a damaged group is a changed one.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"
import * as MemoGroups from "../../src/layers/engine/internal/memo/memoGroups.js"
import * as RunMemo from "../../src/layers/engine/RunMemo.js"
import * as SnapshotObservation from "../../src/layers/store/SnapshotObservation.js"
import { tempDir } from "../utils/temp.js"

const see = (abs: string): SnapshotObservation.SnapshotObservation => {
  const st = fs.lstatSync(abs, { bigint: true, throwIfNoEntry: false })
  if (st === undefined) return { kind: "a", abs }
  if (st.isDirectory()) {
    return SnapshotObservation.present("d", abs, st, RunMemo.namesOf(fs.readdirSync(abs, { withFileTypes: true })))
  }
  if (st.isSymbolicLink()) return SnapshotObservation.present("l", abs, st, fs.readlinkSync(abs))
  return SnapshotObservation.present("f", abs, st, RunMemo.hashOf(fs.readFileSync(abs)))
}

/** A node_modules-like tree in a fresh workspace, and its group (nothing racy unless `racy` says so). */
const modules = (racy: (o: SnapshotObservation.SnapshotObservation) => boolean = () => false) =>
  Effect.gen(function*() {
    const ws = yield* tempDir()
    const dir = path.join(ws, "node_modules")
    fs.mkdirSync(path.join(dir, "a", "lib"), { recursive: true })
    fs.writeFileSync(path.join(dir, "a", "index.js"), "module.exports = 1\n")
    fs.writeFileSync(path.join(dir, "a", "lib", "x.js"), "x\n")
    fs.symlinkSync("a", path.join(dir, "b"))
    fs.mkdirSync(path.join(dir, ".tmp"))
    const abs = [dir, "a", "a/index.js", "a/lib", "a/lib/x.js", "b", ".tmp", "gone"].map((p) =>
      p === dir ? dir : path.join(dir, p)
    )
    const group = MemoGroups.pack(
      abs.map(see),
      (p) => RunMemo.relativeTo(ws, p),
      RunMemo.groupEvidenceOf,
      racy
    )
    return { ws, dir, group }
  })

const always = () => true
const never = () => false

describe("MemoGroups", () => {
  it.scoped("a packed group holds while its tree is as it was, and names the first path that is not", () =>
    Effect.gen(function*() {
      const { dir, group, ws } = yield* modules()
      assert.strictEqual(MemoGroups.sizeOf(group), 8)
      assert.strictEqual(MemoGroups.pathsOf(group)[2], "node_modules/a/index.js")
      assert.isUndefined(MemoGroups.firstChanged(ws, group, never))
      // Through JSON, as the memo keeps it.
      assert.isUndefined(MemoGroups.firstChanged(ws, JSON.parse(JSON.stringify(group)) as MemoGroups.Group, never))
      fs.writeFileSync(path.join(dir, "a", "lib", "x.js"), "y\n")
      assert.strictEqual(MemoGroups.firstChanged(ws, group, always), "node_modules/a/lib/x.js")
      fs.writeFileSync(path.join(dir, "gone"), "")
      assert.strictEqual(MemoGroups.firstChanged(ws, group, always), "node_modules")
    }))

  it.scoped("a path whose stat moved holds by its content, within the check's allowance, and never past a mode change", () =>
    Effect.gen(function*() {
      const { dir, group, ws } = yield* modules()
      const file = path.join(dir, "a", "index.js")
      fs.writeFileSync(file, "module.exports = 1\n")
      assert.strictEqual(MemoGroups.firstChanged(ws, group, never), "node_modules/a/index.js")
      assert.isUndefined(MemoGroups.firstChanged(ws, group, always))
      fs.chmodSync(file, 0o755)
      assert.strictEqual(MemoGroups.firstChanged(ws, group, always), "node_modules/a/index.js")
    }))

  it.scoped("a racy path holds only by its content, even at its recorded stat", () =>
    Effect.gen(function*() {
      const { group, ws } = yield* modules((o) => o.abs.endsWith("/x.js"))
      assert.deepStrictEqual(group.racy, [4])
      assert.strictEqual(MemoGroups.firstChanged(ws, group, never), "node_modules/a/lib/x.js")
      assert.isUndefined(MemoGroups.firstChanged(ws, group, always))
    }))

  it.scoped("a damaged group is a changed one, never thrown on", () =>
    Effect.gen(function*() {
      const { group, ws } = yield* modules()
      const damaged: ReadonlyArray<unknown> = [
        { ...group, kinds: group.kinds.slice(1) },
        { ...group, stats: group.stats.slice(64) },
        { ...group, stats: `${group.stats.slice(0, -1)}!` },
        { ...group, stats: [0, 0, 0, 0, 0, 0] },
        { ...group, paths: `${group.paths}\0extra` },
        { ...group, kinds: `x${group.kinds.slice(1)}` },
        { ...group, paths: 7 },
        { ...group, kinds: "", stats: "", paths: "", evidence: "" },
        null,
        "a string"
      ]
      for (const g of damaged) assert.strictEqual(MemoGroups.firstChanged(ws, g as MemoGroups.Group, always), "")
      // Evidence is read only where a stat moved: one that does not line up with the paths then changes the path.
      const shortEvidence = { ...group, evidence: group.evidence.replace("\0", "") }
      assert.isUndefined(MemoGroups.firstChanged(ws, shortEvidence, always))
      fs.writeFileSync(path.join(ws, "node_modules", "a", "index.js"), "module.exports = 1\n")
      assert.strictEqual(MemoGroups.firstChanged(ws, shortEvidence, always), "node_modules/a/index.js")
      assert.isUndefined(MemoGroups.firstChanged(ws, group, always))
    }))
})
