/**
 * Real trees take the whole-directory path as they are (issue #36): a `node_modules` with an empty directory (pnpm's
 * `.tmp`), a directory holding only empty ones, a dangling symlink and a pnpm-like symlink farm, and then the trees
 * a real pnpm install and a real npm-workspaces install make (several `node_modules` in one workspace). Each
 * directory taken whole is mounted into the sandbox as it is (nothing is copied into the store's shared trees), or
 * its large subdirectories are where the process may write into part of it (`writableInputs`), and it is one group in
 * the run memo, however many processes take it, rather than a record of each of its paths per process.
 *
 * A no-op install rewrites package managers' bookkeeping files in `node_modules` (pnpm 10's workspace state, with a
 * timestamp): they are not inputs, and the next run finds every process a cache hit. It renames a file of the same bytes
 * into place too (pnpm 10's `.pnpm/lock.yaml`), moving its directory's stat: the run memo reads those few paths again
 * and still holds, so the next run is its no-op. `kiln explain` then names the paths that changed inside a tree.
 *
 * The installs fetch pnpm and two small packages (`is-odd` and its `is-number`) from the npm registry the first time
 * on a machine, into caches under the system's temp directory kept for the next run.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Either, Layer } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"
import { parse } from "../../src/domain/config/Config.js"
import * as Engine from "../../src/layers/engine/Engine.js"
import { REMEMBERED_TIMINGS } from "../../src/layers/engine/internal/memo/memoConsult.js"
import * as RunMemo from "../../src/layers/engine/RunMemo.js"
import { caches, pnpmInstall } from "../utils/installs.js"
import { sh } from "../utils/pack.js"
import { stack } from "../utils/stack.js"
import { settleTimes, tempDir, writeTree } from "../utils/temp.js"

const PATH = "/usr/bin:/bin"

/** `a` read is-odd and is-number through its node_modules, and b, its workspace dependency. */
const assertReadAll = (ws: string) => {
  const said = fs.readFileSync(path.join(ws, "packages/a/out.txt"), "utf8")
  assert.match(said, /"name": "is-odd"/)
  assert.match(said, /"name": "is-number"/)
  assert.match(said, /module\.exports = 'b'\n$/)
}

/** The workspace's two packages: `a` depends on is-odd (from the registry) and on `b` (the workspace's, as `bSpec`). */
const twoPackages = (bSpec: string) => ({
  "packages/a/package.json": JSON.stringify({
    name: "a",
    version: "1.0.0",
    dependencies: { "is-odd": "3.0.1", b: bSpec }
  }),
  "packages/a/index.js": "module.exports = require('b')\n",
  "packages/b/package.json": JSON.stringify({ name: "b", version: "1.0.0" }),
  "packages/b/index.js": "module.exports = 'b'\n"
})

const runOn = (root: string, ws: string, processes: Record<string, unknown>, minFiles: number) =>
  Effect.flatMap(Engine.Engine, (engine) =>
    engine.run({
      workspace: ws,
      config: Either.getOrThrow(parse("kiln.json", JSON.stringify({ processes })))
    })).pipe(
      Effect.provide(
        Engine.layer.pipe(
          Layer.provideMerge(stack({ root, inProcess: true, runner: { sharedTreeMinFiles: minFiles } }))
        )
      )
    )

/** The store's shared trees: a directory taken whole that stands in is mounted from the workspace, never one of these. */
const treesIn = (root: string) => {
  const dir = path.join(root, "store", "immutable", "trees")
  return fs.existsSync(dir) ? fs.readdirSync(dir).filter((n) => /^[0-9a-f]{64}$/.test(n)) : []
}

/**
 * The run memo of `ws`: each directory of `wholes` (relative) is one group, and every process's entry refers to the
 * groups of the directories it takes, with no observation of its own under them.
 */
const assertGrouped = (root: string, ws: string, wholes: Record<string, ReadonlyArray<string>>) => {
  const memo = RunMemo.read(path.join(root, "store"), ws)
  assert.isDefined(memo, "no run memo")
  const dirs = new Set(Object.values(wholes).flat())
  assert.strictEqual(Object.keys(memo!.groups ?? {}).length, dirs.size, JSON.stringify(Object.keys(memo!.groups ?? {})))
  for (const [name, taken] of Object.entries(wholes)) {
    const inputs = memo!.processes[name]!.inputs
    const refs = inputs.filter((o) => o[1] === RunMemo.GROUP).map((o) => o[0]).sort()
    assert.deepStrictEqual(refs, taken.map((d) => `${d}/`).sort(), name)
    const under = inputs.filter((o) => o[1] !== RunMemo.GROUP && taken.some((d) => o[0].startsWith(`${d}/`)))
    assert.deepStrictEqual(under, [], name)
  }
}

/**
 * After a no-op install: a run finds every process a cache hit, and with `memoHolds` the run memo of `ws` still
 * holds for every process before it (what it observed holds the same names and bytes, so the run is the memo's
 * no-op: every process a hit it remembered, which took no time and looked nothing up).
 */
const assertNoChange = (
  root: string,
  ws: string,
  processes: Record<string, unknown>,
  minFiles: number,
  memoHolds: boolean
) =>
  Effect.gen(function*() {
    const names = Object.keys(processes)
    if (memoHolds) {
      const memo = RunMemo.read(path.join(root, "store"), ws)
      assert.isDefined(memo, "no run memo")
      const held = RunMemo.holding(memo!, ws, names, (n) => memo!.processes[n]!.key, () => [])
      assert.deepStrictEqual(Object.fromEntries(held.why), {})
    }
    const again = yield* runOn(root, ws, processes, minFiles)
    assert.strictEqual(again.cacheHits, names.length, JSON.stringify(again.processes))
    if (memoHolds) {
      for (const p of again.processes) assert.deepStrictEqual(p.timings, REMEMBERED_TIMINGS, p.name)
    }
    return again
  })

/** What `kiln explain` says of `name` in `ws`. */
const explainOn = (root: string, ws: string, processes: Record<string, unknown>, name: string) =>
  Effect.flatMap(Engine.Engine, (engine) =>
    engine.explain({
      workspace: ws,
      config: Either.getOrThrow(parse("kiln.json", JSON.stringify({ processes }))),
      name
    })).pipe(Effect.provide(Engine.layer.pipe(Layer.provideMerge(stack({ root, inProcess: true })))))

describe("real trees take the whole-directory path as they are", () => {
  it.scopedLive("generated: an empty directory, only empty ones, a dangling link, a pnpm symlink farm, a .cache", () =>
    Effect.gen(function*() {
      const root = yield* tempDir("kiln-real-trees-")
      const ws = path.join(root, "ws")
      writeTree(ws, {
        "src/a.txt": "a\n",
        "node_modules/p/index.js": "module.exports = 1\n",
        "node_modules/.modules.yaml": "layoutVersion: 5\n",
        "node_modules/.pnpm/left-pad@1.3.0/node_modules/left-pad/index.js": "module.exports = 'pad'\n",
        "node_modules/.pnpm/left-pad@1.3.0/node_modules/dep": { link: "../../dep@2.0.0/node_modules/dep" },
        "node_modules/.pnpm/dep@2.0.0/node_modules/dep/index.js": "module.exports = 'dep'\n",
        "node_modules/left-pad": { link: ".pnpm/left-pad@1.3.0/node_modules/left-pad" },
        "node_modules/dangling": { link: "gone/index.js" },
        "node_modules/.cache/lint.json": "{}\n"
      })
      fs.mkdirSync(path.join(ws, "node_modules/.tmp"))
      fs.mkdirSync(path.join(ws, "node_modules/hollow/a/b"), { recursive: true })
      fs.mkdirSync(path.join(root, "sandboxes"))
      settleTimes(ws)
      const look = "test -d node_modules/.tmp && test -d node_modules/hollow/a/b && test -L node_modules/dangling && " +
        "cat node_modules/left-pad/index.js node_modules/left-pad/../dep/index.js"
      const processOf = (out: string, extra: Record<string, unknown> = {}) => ({
        argv: ["/bin/sh", "-c", `${look} > ${out}`],
        env: { PATH },
        inputs: ["src/**", "node_modules/**"],
        outputs: [out],
        ...extra
      })
      const processes = {
        one: processOf("one.txt"),
        two: processOf("two.txt"),
        // Its .cache is its own to write: node_modules is not shared whole, its .pnpm (3 files and symlinks) is.
        three: processOf("three.txt", { writableInputs: ["node_modules/.cache"] })
      }
      // node_modules holds 8 files and symlinks: shared; src, 1: written.
      const report = yield* runOn(root, ws, processes, 3)
      assert.strictEqual(report.failed, 0, JSON.stringify(report.processes))
      for (const out of ["one.txt", "two.txt", "three.txt"]) {
        assert.strictEqual(
          fs.readFileSync(path.join(ws, out), "utf8"),
          "module.exports = 'pad'\nmodule.exports = 'dep'\n"
        )
      }
      assert.deepStrictEqual(treesIn(root), [])
      // src/** takes src whole too.
      const taken = ["src", "node_modules"]
      assertGrouped(root, ws, { one: taken, two: taken, three: taken })
      const again = yield* runOn(root, ws, processes, 3)
      assert.strictEqual(again.cacheHits, 3)
    }))

  for (const pnpm of ["9", "10"]) {
    it.scopedLive(
      `a real pnpm ${pnpm} workspace install: its two node_modules are mounted as they are, one group each, and a ` +
        "no-op install changes nothing",
      () =>
        Effect.gen(function*() {
          const root = yield* tempDir("kiln-real-pnpm-")
          const ws = path.join(root, "ws")
          writeTree(ws, {
            "package.json": JSON.stringify({ name: "root", private: true }),
            "pnpm-workspace.yaml": "packages:\n  - packages/*\n",
            ...twoPackages("workspace:*")
          })
          fs.mkdirSync(path.join(root, "sandboxes"))
          const pnpmInstalled = pnpmInstall(ws, pnpm)
          const install = yield* pnpmInstalled
          assert.strictEqual(install.code, 0, install.both)
          assert.isTrue(fs.lstatSync(path.join(ws, "packages/a/node_modules/is-odd")).isSymbolicLink())
          assert.isTrue(fs.existsSync(path.join(ws, "node_modules/.pnpm")))
          settleTimes(ws)
          const processes = {
            a: {
              argv: [
                "/bin/sh",
                "-c",
                "cat node_modules/is-odd/package.json node_modules/is-odd/../is-number/package.json " +
                "node_modules/b/index.js > out.txt"
              ],
              env: { PATH },
              workingDirectory: "packages/a",
              inputs: [
                "node_modules/**",
                "packages/a/node_modules/**",
                "packages/a/package.json",
                "packages/a/index.js",
                "packages/b/index.js"
              ],
              outputs: ["out.txt"]
            }
          }
          // packages/a/node_modules holds two symlinks (is-odd, b): shared, as the root's is; packages/b, 1: written.
          const report = yield* runOn(root, ws, processes, 2)
          assert.strictEqual(report.failed, 0, JSON.stringify(report.processes))
          assertReadAll(ws)
          assert.deepStrictEqual(treesIn(root), [])
          assertGrouped(root, ws, { a: ["node_modules", "packages/a/node_modules"] })
          // pnpm 10 rewrites its workspace state with a new timestamp, and both rewrite `.modules.yaml`.
          const state = path.join(ws, "node_modules/.pnpm-workspace-state-v1.json")
          const stateBefore = pnpm === "10" ? fs.readFileSync(state, "utf8") : undefined
          const noop = yield* pnpmInstalled
          assert.strictEqual(noop.code, 0, noop.both)
          if (stateBefore !== undefined) assert.notStrictEqual(fs.readFileSync(state, "utf8"), stateBefore)
          // pnpm writes `.modules.yaml` (9) or `.pnpm/lock.yaml` (10) anew and renames it into place, with the same
          // bytes: the directory holding it has a new stat and the same names, and the memo still holds.
          const again = yield* assertNoChange(root, ws, processes, 2, true)
          assert.deepStrictEqual(yield* explainOn(root, ws, processes, "a"), [
            `a: would hit the cache (action ${again.processes[0]!.actionDigest})`,
            "  nothing changed since its last run"
          ])
          // A file of a package changed, and another package added: explain names those paths inside node_modules,
          // at most 20 of them, and counts the rest, rather than the directory alone or every path of it.
          const isOdd = path.join(ws, "node_modules/.pnpm/is-odd@3.0.1/node_modules/is-odd/index.js")
          fs.appendFileSync(isOdd, "// changed\n")
          writeTree(
            ws,
            Object.fromEntries(
              Array.from(
                { length: 25 },
                (_, i) => [`node_modules/.pnpm/zz@1.0.0/lib/f${String(i).padStart(2, "0")}.js`, ""]
              )
            )
          )
          const said = yield* explainOn(root, ws, processes, "a")
          assert.match(said[0]!, /^a: would run /)
          assert.deepStrictEqual(said.slice(2), [
            "  changed node_modules/.pnpm/is-odd@3.0.1/node_modules/is-odd/index.js",
            ...Array.from({ length: 19 }, (_, i) =>
              `  added   node_modules/.pnpm/zz@1.0.0/lib/f${String(i).padStart(2, "0")}.js`),
            "  … and 6 more paths changed under node_modules/"
          ])
        }),
      300_000
    )
  }

  it.scopedLive(
    "a real npm-workspaces install: its node_modules, with links to the workspace's packages",
    () =>
      Effect.gen(function*() {
        const root = yield* tempDir("kiln-real-npm-")
        const ws = path.join(root, "ws")
        writeTree(ws, {
          "package.json": JSON.stringify({ name: "root", private: true, workspaces: ["packages/*"] }),
          ...twoPackages("1.0.0")
        })
        fs.mkdirSync(path.join(root, "sandboxes"))
        const install = {
          args: ["install", "--prefer-offline", "--no-audit", "--no-fund", "--cache", path.join(caches, "npm")]
        }
        const first = yield* sh("npm", install.args, ws)
        assert.strictEqual(first.code, 0, first.both)
        assert.isTrue(fs.lstatSync(path.join(ws, "node_modules/b")).isSymbolicLink())
        settleTimes(ws)
        const processes = {
          a: {
            argv: [
              "/bin/sh",
              "-c",
              "cat ../../node_modules/is-odd/package.json ../../node_modules/is-number/package.json " +
              "../../node_modules/b/index.js > out.txt"
            ],
            env: { PATH },
            workingDirectory: "packages/a",
            inputs: ["node_modules/**", "packages/a/package.json", "packages/a/index.js", "packages/b/index.js"],
            outputs: ["out.txt"]
          }
        }
        const report = yield* runOn(root, ws, processes, 3)
        assert.strictEqual(report.failed, 0, JSON.stringify(report.processes))
        assertReadAll(ws)
        assert.deepStrictEqual(treesIn(root), [])
        assertGrouped(root, ws, { a: ["node_modules"] })
        const noop = yield* sh("npm", install.args, ws)
        assert.strictEqual(noop.code, 0, noop.both)
        yield* assertNoChange(root, ws, processes, 3, true)
        // `npm ci` installs everything afresh: nothing is as the memo saw it, and every key is as it was.
        const ci = yield* sh("npm", ["ci", ...install.args.slice(1)], ws)
        assert.strictEqual(ci.code, 0, ci.both)
        const afresh = yield* runOn(root, ws, processes, 3)
        assert.strictEqual(afresh.cacheHits, Object.keys(processes).length, JSON.stringify(afresh.processes))
      }),
    300_000
  )
})
