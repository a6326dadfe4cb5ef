/**
 * Real trees take the whole-directory path as they are (issue #36): a `node_modules` with an empty directory (pnpm's
 * `.tmp`), a directory holding only empty ones, a dangling symlink and a pnpm-like symlink farm, and then the trees
 * a real pnpm install and a real npm-workspaces install make (several `node_modules` in one workspace). Each
 * directory taken whole is mounted into the sandbox as it is (nothing is copied into the store's shared trees), or
 * its large subdirectories are where the process may write into part of it (`writableInputs`), and it is one group in
 * the run memo, however many processes take it, rather than a record of each of its paths per process.
 *
 * The installs fetch pnpm and two small packages (`is-odd` and its `is-number`) from the npm registry the first time
 * on a machine, into caches under the system's temp directory kept for the next run.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Either, Layer } from "effect"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { parse } from "../../src/domain/Config.js"
import * as Engine from "../../src/layers/engine/Engine.js"
import * as RunMemo from "../../src/layers/engine/RunMemo.js"
import { sh } from "../utils/pack.js"
import { stack } from "../utils/stack.js"
import { tempDir, writeTree } from "../utils/temp.js"

const PATH = "/usr/bin:/bin"

/** npm's and pnpm's caches and pnpm's package store, kept across runs so that only the first one downloads. */
const caches = path.join(os.tmpdir(), "kiln-test-installs")

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
 * Moves the times of everything under `dir` but symlinks away from "just now": a snapshot within a timestamp tick of
 * the install would find its stats racy, and a racy directory does not stand in for its session.
 */
const settle = (dir: string) => {
  // Half past a second: a whole-second mtime would be judged with the coarse file systems' wider racy margin.
  const past = new Date(Math.floor(Date.now() / 1000) * 1000 - 60_000 + 500)
  const visit = (p: string) => {
    const st = fs.lstatSync(p)
    if (st.isSymbolicLink()) return
    if (st.isDirectory()) { for (const n of fs.readdirSync(p)) visit(path.join(p, n)) }
    fs.utimesSync(p, past, past)
  }
  visit(dir)
  // Setting the times made every ctime "now": a walk within the racy margin (10 ms) of them would find them racy.
  // The condition is the clock itself, so it is waited out on the clock.
  const clear = Date.now() + 25
  while (Date.now() < clear) continue
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
      settle(ws)
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

  it.scopedLive(
    "a real pnpm workspace install: its two node_modules are mounted as they are, one group each",
    () =>
      Effect.gen(function*() {
        const root = yield* tempDir("kiln-real-pnpm-")
        const ws = path.join(root, "ws")
        writeTree(ws, {
          "package.json": JSON.stringify({ name: "root", private: true }),
          "pnpm-workspace.yaml": "packages:\n  - packages/*\n",
          "packages/a/package.json": JSON.stringify({
            name: "a",
            version: "1.0.0",
            dependencies: { "is-odd": "3.0.1", b: "workspace:*" }
          }),
          "packages/a/index.js": "module.exports = require('b')\n",
          "packages/b/package.json": JSON.stringify({ name: "b", version: "1.0.0" }),
          "packages/b/index.js": "module.exports = 'b'\n"
        })
        fs.mkdirSync(path.join(root, "sandboxes"))
        const install = yield* sh("npm", [
          "exec",
          "--yes",
          "--cache",
          path.join(caches, "npm"),
          "pnpm@9",
          "--",
          "install",
          "--prefer-offline",
          "--store-dir",
          path.join(caches, "pnpm-store"),
          "--cache-dir",
          path.join(caches, "pnpm-cache"),
          // Copies, not hard links into the store this machine's test runs share: another run's install (or its
          // `settle`) would change their ctime under this one's walk, which then finds them racy.
          "--package-import-method",
          "copy"
        ], ws)
        assert.strictEqual(install.code, 0, install.both)
        assert.isTrue(fs.lstatSync(path.join(ws, "packages/a/node_modules/is-odd")).isSymbolicLink())
        assert.isTrue(fs.existsSync(path.join(ws, "node_modules/.pnpm")))
        settle(ws)
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
        const said = fs.readFileSync(path.join(ws, "packages/a/out.txt"), "utf8")
        assert.match(said, /"name": "is-odd"/)
        assert.match(said, /"name": "is-number"/)
        assert.match(said, /module\.exports = 'b'\n$/)
        assert.deepStrictEqual(treesIn(root), [])
        assertGrouped(root, ws, { a: ["node_modules", "packages/a/node_modules"] })
      }),
    300_000
  )

  it.scopedLive(
    "a real npm-workspaces install: its node_modules, with links to the workspace's packages",
    () =>
      Effect.gen(function*() {
        const root = yield* tempDir("kiln-real-npm-")
        const ws = path.join(root, "ws")
        writeTree(ws, {
          "package.json": JSON.stringify({ name: "root", private: true, workspaces: ["packages/*"] }),
          "packages/a/package.json": JSON.stringify({
            name: "a",
            version: "1.0.0",
            dependencies: { "is-odd": "3.0.1", b: "1.0.0" }
          }),
          "packages/a/index.js": "module.exports = require('b')\n",
          "packages/b/package.json": JSON.stringify({ name: "b", version: "1.0.0" }),
          "packages/b/index.js": "module.exports = 'b'\n"
        })
        fs.mkdirSync(path.join(root, "sandboxes"))
        const install = yield* sh("npm", [
          "install",
          "--prefer-offline",
          "--no-audit",
          "--no-fund",
          "--cache",
          path.join(caches, "npm")
        ], ws)
        assert.strictEqual(install.code, 0, install.both)
        assert.isTrue(fs.lstatSync(path.join(ws, "node_modules/b")).isSymbolicLink())
        settle(ws)
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
        const said = fs.readFileSync(path.join(ws, "packages/a/out.txt"), "utf8")
        assert.match(said, /"name": "is-odd"/)
        assert.match(said, /"name": "is-number"/)
        assert.match(said, /module\.exports = 'b'\n$/)
        assert.deepStrictEqual(treesIn(root), [])
        assertGrouped(root, ws, { a: ["node_modules"] })
      }),
    300_000
  )
})
