/**
 * Directories taken whole, kept from one snapshot session to the next: a later session takes the directory from its
 * saved digest while every path holds, and sees any change (an edit of the same size, a file added, one removed),
 * and a store that removed anything since makes it walk again. A wrong reuse here would be a wrong cache hit.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"
import * as Digest from "../../src/domain/Digest.js"
import * as SavedWalk from "../../src/layers/store/internal/walks/savedWalk.js"
import * as WholeDirs from "../../src/layers/store/internal/walks/wholeDirs.js"
import type * as Observation from "../../src/layers/store/SnapshotObservation.js"
import type * as Store from "../../src/layers/store/Store.js"
import * as StoreMaintenance from "../../src/layers/store/StoreMaintenance.js"
import { settleTimes, tempDir, tempStore, writeTree } from "../utils/temp.js"

const GLOBS = ["node_modules/**", "src/**"]

/** A snapshot in a session of its own (closed, so saved, when it returns), with the directories it took whole. */
const snapshotInSession = (store: Store.Service, ws: string) =>
  Effect.scoped(Effect.gen(function*() {
    const session = yield* store.snapshotSession(ws)
    const [taken] = yield* store.snapshotMany(ws, [{ globs: GLOBS, observe: true }], session)
    return yield* taken!
  }))

/**
 * Each directory's saved walk, by the directory's path: in a file of its own (`<index>.wholes/<hash>.json`), or in one
 * of the packs of small directories' walks (`<index>.wholes/small-<hex digit>.pack`). `write` replaces its text where
 * it is.
 */
const savedWholes = (
  store: Store.Service
): Record<string, { digest: string; savedAtNs: string; text: string; packed: boolean; write: (t: string) => void }> => {
  const dir = path.join(store.options.root, "stat-index")
  const wholes = fs.readdirSync(dir).find((n) => n.endsWith(".wholes"))
  if (wholes === undefined) return {}
  const out: ReturnType<typeof savedWholes> = {}
  for (const n of fs.readdirSync(path.join(dir, wholes))) {
    const file = path.join(dir, wholes, n)
    if (WholeDirs.isPackName(n)) {
      const walks = WholeDirs.decodePack(fs.readFileSync(file, "utf8"))
      for (const [abs, text] of walks) {
        const saved = JSON.parse(text) as { digest: string; savedAtNs: string }
        out[abs] = {
          ...saved,
          text,
          packed: true,
          write: (t) => {
            const now = WholeDirs.decodePack(fs.readFileSync(file, "utf8"))
            now.set(abs, t)
            fs.writeFileSync(file, WholeDirs.encodePack(now))
          }
        }
      }
    } else {
      const text = fs.readFileSync(file, "utf8")
      const saved = JSON.parse(text) as { abs: string; digest: string; savedAtNs: string }
      out[saved.abs] = { ...saved, text, packed: false, write: (t) => fs.writeFileSync(file, t) }
    }
  }
  return out
}

/** The paths the workspace's stat index holds. */
const indexed = (store: Store.Service): Array<string> => {
  const dir = path.join(store.options.root, "stat-index")
  const file = fs.readdirSync(dir).find((n) => n.endsWith(".json"))!
  return Object.keys((JSON.parse(fs.readFileSync(path.join(dir, file), "utf8")) as { entries: object }).entries)
}

/** A snapshot in a session of its own, with how many files the session hashed. */
const countedSession = (store: Store.Service, ws: string, hashed: Array<number>) =>
  Effect.scoped(Effect.gen(function*() {
    const session = yield* store.snapshotSession(ws)
    const [taken] = yield* store.snapshotMany(ws, [{ globs: GLOBS, observe: true }], session)
    const snapshot = yield* taken!
    hashed.push(session.hashed)
    return snapshot
  }))

/** A settled workspace of 40 files in 4 packages under node_modules, and `src` (by default one file). */
const modulesWorkspace = (prefix: string, src: Record<string, string> = { "src/a.txt": "a\n" }) =>
  Effect.map(tempDir(prefix), (ws) => {
    const files: Record<string, string> = { ...src }
    for (let i = 0; i < 40; i++) files[`node_modules/p${i % 4}/f${i}.js`] = `${i}\n`
    writeTree(ws, files)
    settle(ws)
    return ws
  })

const nodeModulesOf = (store: Store.Service, root: Digest.Digest) =>
  Effect.map(store.getDirectory(root), (d) => d.directories.find((x) => x.name === "node_modules")!.digest)

/**
 * Moves the times of the workspace's node_modules away from "just now", and waits out the racy margin of the ctimes
 * that moving them set, so that no stat of it is racy when a session walks it (without the wait, a session right
 * after found them racy, depending on how fast the test ran).
 */
const settle = (ws: string) => settleTimes(path.join(ws, "node_modules"))

describe("whole directories across sessions", () => {
  it.scoped("the next session takes the directory as it was, and sees every kind of change", () =>
    Effect.gen(function*() {
      const ws = yield* modulesWorkspace("kiln-wholes-")
      const store = yield* tempStore()
      const first = yield* snapshotInSession(store, ws)
      assert.strictEqual(first.wholeDirectories.length, 2)
      assert.strictEqual(
        savedWholes(store)[path.join(ws, "node_modules")]!.digest,
        Digest.format(yield* nodeModulesOf(store, first.digest))
      )
      const again = yield* snapshotInSession(store, ws)
      assert.deepStrictEqual(again.digest, first.digest)
      assert.strictEqual(again.wholeDirectories.length, 2)
      assert.strictEqual(
        again.observations.filter((o) => o.kind === "f").length,
        first.observations.filter((o) => o.kind === "f").length
      )

      // The same size, another byte.
      fs.writeFileSync(path.join(ws, "node_modules/p1/f5.js"), "9\n")
      settle(ws)
      const edited = yield* snapshotInSession(store, ws)
      assert.notDeepEqual(yield* nodeModulesOf(store, edited.digest), yield* nodeModulesOf(store, first.digest))
      // Added, then removed: each is another tree, and removing it gives the first one back.
      fs.writeFileSync(path.join(ws, "node_modules/p2/new.js"), "new\n")
      settle(ws)
      const added = yield* snapshotInSession(store, ws)
      assert.notDeepEqual(added.digest, edited.digest)
      fs.unlinkSync(path.join(ws, "node_modules/p2/new.js"))
      settle(ws)
      assert.deepStrictEqual((yield* snapshotInSession(store, ws)).digest, edited.digest)
    }))

  it.scoped(
    "a file renamed into place with the same bytes (a no-op install) moves stats, not the tree: the next " +
      "session reads those paths again, not the directory",
    () =>
      Effect.gen(function*() {
        const ws = yield* modulesWorkspace("kiln-wholes-renamed-")
        const store = yield* tempStore()
        const first = yield* snapshotInSession(store, ws)
        const lock = path.join(ws, "node_modules/p1/f5.js")
        const inoOf = (s: Store.Snapshot) => s.observations.find((o) => o.abs === lock && o.kind === "f")
        fs.writeFileSync(`${lock}.tmp`, fs.readFileSync(lock))
        fs.renameSync(`${lock}.tmp`, lock)
        // Its directory and it, no longer racy; nothing else is touched.
        settleTimes(path.join(ws, "node_modules/p1"))
        const sessionOf = (hashed: Array<number>) => countedSession(store, ws, hashed)
        const hashed: Array<number> = []
        const again = yield* sessionOf(hashed)
        assert.deepStrictEqual(again.digest, first.digest)
        assert.strictEqual(again.wholeDirectories.length, 2)
        const seen = inoOf(again)
        assert.isDefined(seen)
        assert.strictEqual(seen!.kind === "f" && seen!.ino, BigInt(fs.statSync(lock).ino))
        // Saved anew with its new stat: the session after takes it as it is.
        const third = yield* sessionOf(hashed)
        assert.deepStrictEqual(third.digest, first.digest)
        assert.deepStrictEqual(hashed, [0, 0])
        // Another byte renamed into place is a change, however it came.
        fs.writeFileSync(`${lock}.tmp`, "x\n")
        fs.renameSync(`${lock}.tmp`, lock)
        settleTimes(path.join(ws, "node_modules/p1"))
        assert.notDeepEqual((yield* sessionOf(hashed)).digest, first.digest)
      })
  )

  it.scoped("a store that removed anything since the directory was saved makes the next session walk it again", () =>
    Effect.gen(function*() {
      const ws = yield* tempDir("kiln-wholes-gc-")
      writeTree(ws, { "src/a.txt": "a\n", "node_modules/p/f.js": "f\n", "node_modules/p/g.js": "g\n" })
      settle(ws)
      const store = yield* tempStore()
      const first = yield* snapshotInSession(store, ws)
      const f = (yield* store.listTree(first.digest)).find((e) => e.path === "node_modules/p/f.js")!.digest!
      yield* StoreMaintenance.make(store).remove(f)
      assert.isFalse(yield* store.hasFile(f))
      // Taken from the saved digest, the tree would name a blob the store no longer has.
      const again = yield* snapshotInSession(store, ws)
      assert.deepStrictEqual(again.digest, first.digest)
      assert.isTrue(yield* store.hasFile(f))
    }))
  it.scoped(
    "an edit rewrites only its own directory's saved walk, and the stat index keeps no file of a directory taken whole",
    () =>
      Effect.gen(function*() {
        const ws = yield* modulesWorkspace("kiln-wholes-apart-", { "src/a.txt": "a\n", "src/b.txt": "b\n" })
        settleTimes(path.join(ws, "src"))
        const store = yield* tempStore()
        const first = yield* snapshotInSession(store, ws)
        const before = savedWholes(store)
        assert.deepStrictEqual(Object.keys(before).sort(), [path.join(ws, "node_modules"), path.join(ws, "src")])
        // Their files are in their saved walks: the index would be read and written by every edit run.
        assert.deepStrictEqual(indexed(store).filter((p) => p.startsWith(ws + path.sep)), [])
        // node_modules (40 files) has a file of its own, src (2) is in a pack.
        assert.deepStrictEqual(
          [before[path.join(ws, "node_modules")]!.packed, before[path.join(ws, "src")]!.packed],
          [false, true]
        )
        const nodeModulesBytes = before[path.join(ws, "node_modules")]!.text

        fs.writeFileSync(path.join(ws, "src/a.txt"), "A\n")
        // Only the file edited: its neighbours keep the stats the saved walk has.
        settleTimes(path.join(ws, "src/a.txt"))
        const hashed: Array<number> = []
        const edited = yield* countedSession(store, ws, hashed)
        assert.notDeepEqual(edited.digest, first.digest)
        // src/ walked again: a.txt read, b.txt taken by its saved hash.
        assert.deepStrictEqual(hashed, [1])
        const after = savedWholes(store)
        assert.notStrictEqual(after[path.join(ws, "src")]!.savedAtNs, before[path.join(ws, "src")]!.savedAtNs)
        assert.strictEqual(
          after[path.join(ws, "node_modules")]!.savedAtNs,
          before[path.join(ws, "node_modules")]!.savedAtNs
        )
        assert.strictEqual(after[path.join(ws, "node_modules")]!.text, nodeModulesBytes)
        assert.deepStrictEqual(indexed(store).filter((p) => p.startsWith(ws + path.sep)), [])
      })
  )

  it.scoped("a directory that changed is walked again, taking each unchanged file by its saved hash, not its bytes", () =>
    Effect.gen(function*() {
      const ws = yield* modulesWorkspace("kiln-wholes-previous-")
      const store = yield* tempStore()
      const first = yield* snapshotInSession(store, ws)
      fs.writeFileSync(path.join(ws, "node_modules/p1/f5.js"), "9\n")
      settleTimes(path.join(ws, "node_modules/p1/f5.js"))
      const hashed: Array<number> = []
      const edited = yield* countedSession(store, ws, hashed)
      assert.notDeepEqual(yield* nodeModulesOf(store, edited.digest), yield* nodeModulesOf(store, first.digest))
      // The one file that changed, of 40, and the stat index held none of them.
      assert.deepStrictEqual(hashed, [1])
      // What it took is right: the tree is the one a store without any saved walk takes.
      const fresh = yield* tempStore()
      assert.deepStrictEqual((yield* snapshotInSession(fresh, ws)).digest, edited.digest)

      // A saved hash whose stat is within a tick of the walk's save is not vouched for by its stat: read again.
      const saved = savedWholes(store)[path.join(ws, "node_modules")]!
      const json = JSON.parse(saved.text) as { savedAtNs: string }
      json.savedAtNs = String(fs.statSync(path.join(ws, "node_modules/p2/f6.js"), { bigint: true }).mtimeNs)
      saved.write(JSON.stringify(json))
      fs.writeFileSync(path.join(ws, "node_modules/p3/f7.js"), "8\n")
      settleTimes(path.join(ws, "node_modules/p3/f7.js"))
      const again: Array<number> = []
      yield* countedSession(store, ws, again)
      assert.isAtLeast(again[0]!, 2)
    }))

  it.scoped("a glob over part of a directory taken whole takes its files by the saved walk's hashes too", () =>
    Effect.gen(function*() {
      const ws = yield* modulesWorkspace("kiln-wholes-part-")
      const store = yield* tempStore()
      yield* snapshotInSession(store, ws)
      const hashed: Array<number> = []
      yield* Effect.scoped(Effect.gen(function*() {
        const session = yield* store.snapshotSession(ws)
        const taken = yield* store.snapshotMany(ws, [{ globs: GLOBS }, { globs: ["node_modules/p1/*.js"] }], session)
        for (const t of taken) yield* t
        hashed.push(session.hashed)
      }))
      // Not in the stat index (see above), and not read again either.
      assert.deepStrictEqual(hashed, [0])
    }))

  it.scoped(
    "a saved walk the run's own check vouched for is taken without looking again; its check after a run still sees a change",
    () =>
      Effect.gen(function*() {
        const ws = yield* modulesWorkspace("kiln-wholes-vouched-")
        const store = yield* tempStore()
        const modules = path.join(ws, "node_modules")
        const walked = yield* snapshotInSession(store, ws)
        // A fresh walk has no saved walk to name; the next session takes the saved one as it was saved.
        assert.isUndefined(walked.wholeDirectories.find((w) => w.abs === modules)!.savedWalk)
        const reused = yield* snapshotInSession(store, ws)
        const savedWalk = reused.wholeDirectories.find((w) => w.abs === modules)!.savedWalk
        assert.isString(savedWalk)

        fs.writeFileSync(path.join(ws, "node_modules/p1/f5.js"), "9\n")
        settleTimes(path.join(ws, "node_modules/p1/f5.js"))
        const vouchedFor = yield* Effect.scoped(Effect.gen(function*() {
          const session = yield* store.snapshotSession(ws, { vouched: new Set([savedWalk!]) })
          const [taken] = yield* store.snapshotMany(ws, [{ globs: GLOBS, observe: true }], session)
          return yield* taken!
        }))
        // Taken as vouched for: what the check saw (a change after it is a change during the run)...
        assert.deepStrictEqual(vouchedFor.digest, walked.digest)
        // ...which the process's own check after it ran sees, so that no result of such a run is kept.
        assert.isFalse(vouchedFor.wholeDirectories.find((w) => w.abs === modules)!.unchanged())
        // Not vouched for, the session looks, and sees it.
        assert.notDeepEqual((yield* snapshotInSession(store, ws)).digest, walked.digest)
      })
  )

  it.scoped("a damaged saved walk is walked again, not trusted and not fatal", () =>
    Effect.gen(function*() {
      const ws = yield* tempDir("kiln-wholes-damaged-")
      writeTree(ws, { "src/a.txt": "a\n", "node_modules/p/f.js": "f\n", "node_modules/p/g.js": "g\n" })
      settle(ws)
      const store = yield* tempStore()
      const first = yield* snapshotInSession(store, ws)
      const saved = savedWholes(store)[path.join(ws, "node_modules")]!
      const json = JSON.parse(saved.text) as { kinds: string; ino: Array<unknown> }
      json.ino[json.kinds.indexOf("f")] = "an inode"
      saved.write(JSON.stringify(json))
      assert.deepStrictEqual((yield* snapshotInSession(store, ws)).digest, first.digest)
    }))

  it.scoped(
    "small directories share packs, each written once a session; one that grows leaves them; gc drops the gone",
    () =>
      Effect.gen(function*() {
        const ws = yield* tempDir("kiln-wholes-pack-")
        const packages = Array.from({ length: 12 }, (_, i) => `packages/p${i}/src`)
        writeTree(ws, Object.fromEntries(packages.flatMap((p) => [[`${p}/a.txt`, `${p} a\n`], [`${p}/b.txt`, "b\n"]])))
        for (const p of packages) settleTimes(path.join(ws, p))
        const store = yield* tempStore()
        const globs = packages.map((p) => ({ globs: [`${p}/**`], observe: true }))
        const session = () =>
          Effect.scoped(Effect.gen(function*() {
            const s = yield* store.snapshotSession(ws)
            const taken = yield* store.snapshotMany(ws, globs, s)
            const snapshots: Array<Store.Snapshot> = []
            for (const t of taken) snapshots.push(yield* t)
            return { snapshots, hashed: s.hashed }
          }))
        const first = yield* session()
        const wholesDir = () => {
          const dir = path.join(store.options.root, "stat-index")
          return path.join(dir, fs.readdirSync(dir).find((n) => n.endsWith(".wholes"))!)
        }
        // Twelve directories, no file of their own: a few packs, each named by the first digit of a path's hash.
        const packsMade = fs.readdirSync(wholesDir())
        assert.isTrue(packsMade.every(WholeDirs.isPackName), packsMade.join())
        assert.isAtMost(packsMade.length, Math.min(packages.length, WholeDirs.PACKS))
        const saved = savedWholes(store)
        assert.deepStrictEqual(Object.keys(saved).sort(), packages.map((p) => path.join(ws, p)).sort())
        // Taken back from the packs: nothing hashed again, the same digests.
        const again = yield* session()
        assert.strictEqual(again.hashed, 0)
        assert.deepStrictEqual(again.snapshots.map((s) => s.digest), first.snapshots.map((s) => s.digest))

        // One package grows past the packs' bound: its walk moves to a file of its own, the others stay packed.
        const grown = path.join(ws, packages[0]!)
        writeTree(
          ws,
          Object.fromEntries(Array.from({ length: 40 }, (_, i) => [`${packages[0]}/more${i}.txt`, `${i}\n`]))
        )
        settleTimes(grown)
        yield* session()
        const after = savedWholes(store)
        assert.isFalse(after[grown]!.packed)
        assert.strictEqual(Object.values(after).filter((w) => w.packed).length, packages.length - 1)
        const third = yield* session()
        assert.strictEqual(third.hashed, 0)

        // A pack that does not read as one is none: its directories are walked again, to the same digests.
        for (const n of fs.readdirSync(wholesDir()).filter(WholeDirs.isPackName)) {
          fs.writeFileSync(path.join(wholesDir(), n), "{\"v\":1,\"walks\":[")
        }
        const walked = yield* session()
        assert.strictEqual(walked.hashed, 2 * (packages.length - 1))
        assert.deepStrictEqual(walked.snapshots.map((s) => s.digest), third.snapshots.map((s) => s.digest))

        // A package removed: gc drops its walk from the pack and keeps the others'.
        fs.rmSync(path.join(ws, "packages/p5"), { recursive: true })
        yield* StoreMaintenance.make(store).gc()
        const kept = savedWholes(store)
        assert.isUndefined(kept[path.join(ws, packages[5]!)])
        assert.strictEqual(Object.values(kept).filter((w) => w.packed).length, packages.length - 2)
      })
  )

  it.scoped("a saved walk found under another directory's name is not taken for it", () =>
    Effect.gen(function*() {
      const ws = yield* tempDir("kiln-wholes-collide-")
      writeTree(ws, { "src/a.txt": "a\n", "node_modules/p/f.js": "f\n" })
      settle(ws)
      settleTimes(path.join(ws, "src"))
      const store = yield* tempStore()
      const first = yield* snapshotInSession(store, ws)
      const saved = savedWholes(store)
      // src's walk replaced by node_modules' (both in the pack): taken for src, it would put node_modules' tree there.
      saved[path.join(ws, "src")]!.write(saved[path.join(ws, "node_modules")]!.text)
      const again = yield* snapshotInSession(store, ws)
      assert.deepStrictEqual(again.digest, first.digest)
    }))
})

/** A saved walk's file as JSON, with the relative path of row `row` replaced by `rel`. */
const withPath = <J extends { self: number; paths: string }>(j: J, row: number, rel: string): J => {
  const paths = j.paths.split("\0")
  paths[j.self !== -1 && j.self < row ? row - 1 : row] = rel
  return { ...j, paths: paths.join("\0") }
}

describe("saved walks' file", () => {
  const dir = "/ws/node_modules"
  const stat = {
    dev: 2049n,
    ino: 18_446_744_073_709_551_557n,
    mode: 0o100644n,
    size: 9_007_199_254_740_993n,
    mtimeNs: 1_796_455_519_489_359_457n,
    ctimeNs: -1_500_000_000_123_456_789n
  }
  const observations: Array<Observation.SnapshotObservation> = [
    { kind: "d", abs: dir, evidence: ".bin/p", ...stat, mode: 0o40755n, ino: 7n },
    { kind: "f", abs: `${dir}/p/index.js`, evidence: "ab".repeat(32), ...stat },
    { kind: "f", abs: `${dir}/p/..x/é f.js`, evidence: "cd".repeat(32), ...stat, size: 0n, mtimeNs: 999_999_999n },
    {
      kind: "l",
      abs: `${dir}/.bin/p`,
      evidence: "../p/index.js",
      ...stat,
      dev: 2n ** 64n - 1n,
      ctimeNs: 2n ** 90n + 7n
    },
    { kind: "a", abs: `${dir}/gone` }
  ]
  const saved: SavedWalk.Saved = {
    abs: dir,
    generation: "g1",
    savedAtNs: "1796455519489359457",
    standsIn: true,
    digest: `${"ef".repeat(32)}/12`,
    observations
  }

  it("gives back exactly what was saved: bigints beyond 2^53, times before the epoch or past 2^53 s, each kind", () => {
    const text = SavedWalk.encode(saved)!
    assert.deepStrictEqual(SavedWalk.decode(text, dir), saved)
    // Another directory's file, or one of another format, is none.
    assert.isUndefined(SavedWalk.decode(text, "/ws/src"))
    assert.isUndefined(SavedWalk.decode(text.replace(`"v":${SavedWalk.FORMAT}`, `"v":3`), dir))
  })

  it("gives back a directory whose path holds `$`, one holding nothing, and rows without the directory's own", () => {
    for (const abs of ["/ws/$&/$$/$1/node_modules", "/"]) {
      const moved = observations.map((o) => ({
        ...o,
        abs: o.abs === dir ? abs : path.join(abs, path.relative(dir, o.abs))
      }))
      const text = SavedWalk.encode({ ...saved, abs, observations: moved })!
      assert.deepStrictEqual(SavedWalk.decode(text, abs), { ...saved, abs, observations: moved })
    }
    for (const some of [[], observations.slice(0, 1), observations.slice(1), observations.slice(4)]) {
      const text = SavedWalk.encode({ ...saved, observations: some })!
      assert.deepStrictEqual(SavedWalk.decode(text, dir), { ...saved, observations: some })
    }
  })

  it("saves nothing for a path it cannot say relative to the directory", () => {
    const outside = { ...observations[1]!, abs: "/ws/src/a.ts" }
    assert.isUndefined(SavedWalk.encode({ ...saved, observations: [outside] }))
    assert.isUndefined(SavedWalk.encode({ ...saved, observations: [{ ...outside, abs: `${dir}/p/../../src/a.ts` }] }))
    assert.isUndefined(SavedWalk.encode({ ...saved, observations: [{ ...outside, abs: `${dir}/p/a\0b` }] }))
    assert.isUndefined(
      SavedWalk.encode({ ...saved, observations: [{ ...(observations[3] as Observation.Present), evidence: "a\0b" }] })
    )
  })

  it("refuses a hostile or damaged file, never throws", () => {
    const json = JSON.parse(SavedWalk.encode(saved)!) as Record<string, unknown> & {
      self: number
      paths: string
      evidence: string
      ino: Array<unknown>
      mtimeSubNs: Array<unknown>
    }
    const variant = (f: (j: typeof json) => void) => {
      const j = structuredClone(json)
      f(j)
      return JSON.stringify(j)
    }
    const refused = [
      ...["/etc/passwd", "../outside", "p/../../outside", "", "p//index.js", "p/./index.js", "p/", "./p", ".", "p/\0x"]
        .map((rel) => JSON.stringify(withPath(json, 1, rel))),
      variant((j) => j.self = 7),
      variant((j) => j.self = -1),
      variant((j) => j.self = 0.5),
      variant((j) => j.paths = ""),
      variant((j) => j.evidence = `${j.evidence}\0`),
      variant((j) => (j as Record<string, unknown>).evidence = 1),
      variant((j) => j.abs = "/ws"),
      variant((j) => j.ino[1] = "an inode"),
      variant((j) => j.ino[1] = ""),
      variant((j) => j.ino[1] = 1.5),
      variant((j) => j.ino[1] = 2 ** 60),
      variant((j) => j.mtimeSubNs[1] = 1e9),
      variant((j) => j.ino.pop()),
      variant((j) => j.kinds = "dffxa"),
      variant((j) => delete (j as Record<string, unknown>).evidence),
      SavedWalk.encode(saved)!.slice(0, 200),
      "null",
      "[]"
    ]
    for (const text of refused) assert.isUndefined(SavedWalk.decode(text, dir), text.slice(0, 120))
  })

  it.scoped("a session takes back what it saved, and refuses a hostile, damaged or old-format file: walked again", () =>
    Effect.gen(function*() {
      // A name beyond ASCII: the file is read as UTF-8, not as the one byte a character of ASCII-only files.
      const ws = yield* modulesWorkspace("kiln-wholes-hostile-", {
        "src/a.txt": "a\n",
        "node_modules/p0/naïve é.js": "é\n"
      })
      const store = yield* tempStore()
      const modules = path.join(ws, "node_modules")
      const first = yield* snapshotInSession(store, ws)
      const walkedOf = (s: Store.Snapshot) => s.wholeDirectories.find((w) => w.abs === modules)!
      // Taken back from its file: the very observations the walk saved, stats and all.
      const again = yield* snapshotInSession(store, ws)
      assert.isString(walkedOf(again).savedWalk)
      assert.deepStrictEqual(walkedOf(again).observations, walkedOf(first).observations)
      assert.isTrue(walkedOf(again).observations.some((o) => o.abs.endsWith("naïve é.js")))

      type Json = Record<string, unknown> & { kinds: string; self: number; paths: string; ino: Array<unknown> }
      const edits: Array<[string, (j: Json, text: string) => string]> = [
        ["absolute", (j) => JSON.stringify(withPath(j, j.kinds.indexOf("f"), path.join(ws, "src/a.txt")))],
        ["climbing", (j) => JSON.stringify(withPath(j, j.kinds.indexOf("f"), "../src/a.txt"))],
        ["another's", (j) => (j.abs = path.join(ws, "src"), JSON.stringify(j))],
        ["not a number", (j) => (j.ino[j.kinds.indexOf("f")] = "an inode", JSON.stringify(j))],
        ["truncated", (_, text) => text.slice(0, text.length - 100)],
        // A whole and valid file of the format before, which took it from the same walk.
        ["format 3", (j) =>
          JSON.stringify({
            v: 3,
            abs: modules,
            generation: j.generation,
            savedAtNs: j.savedAtNs,
            standsIn: j.standsIn,
            digest: j.digest,
            paths: walkedOf(first).observations.map((o) =>
              o.kind === "a"
                ? ["a", o.abs]
                : [o.kind, o.abs, ...[o.dev, o.ino, o.mode, o.size, o.mtimeNs, o.ctimeNs].map(String), o.evidence]
            )
          })]
      ]
      for (const [what, edit] of edits) {
        const saved = savedWholes(store)[modules]!
        saved.write(edit(JSON.parse(saved.text) as Json, saved.text))
        const hashed: Array<number> = []
        const taken = yield* countedSession(store, ws, hashed)
        // Walked: each of its 41 files read again, none taken from the refused file.
        assert.deepStrictEqual([what, hashed[0], walkedOf(taken).savedWalk], [what, 41, undefined])
        assert.deepStrictEqual(taken.digest, first.digest)
      }
    }))
})
