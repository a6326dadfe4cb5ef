/**
 * Two checkouts of one pnpm workspace at different paths share keys (issue #36): pnpm's `.bin` shims name the
 * checkout's path, and the store takes them as they read at `/mnt`. A process that runs a shim gets a `NODE_PATH`
 * into its own sandbox, whether `node_modules` is mounted from the workspace (its `.bin` directories mounted from the
 * store over it) or written from the store. npm's `.bin` entries, symlinks, are what they are.
 *
 * The installs (pnpm 9 and 10, and npm) use the caches of `RealTrees.test.ts` (pnpm and `is-odd` from the npm registry the first time on a
 * machine); the command is a workspace package's own bin.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Either, Layer } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"
import { parse } from "../../src/domain/config/Config.js"
import * as Engine from "../../src/layers/engine/Engine.js"
import { REMEMBERED_TIMINGS } from "../../src/layers/engine/internal/memo/memoConsult.js"
import * as ProcessRunner from "../../src/layers/runner/ProcessRunner.js"
import type { HashProgress } from "../../src/layers/store/SnapshotSession.js"
import * as Store from "../../src/layers/store/Store.js"
import { npmInstall, pnpmInstall } from "../utils/installs.js"
import { stack } from "../utils/stack.js"
import { settleTimes, tempDir, writeTree } from "../utils/temp.js"

/** `tool`'s command prints the NODE_PATH it was given, and where it finds `is-number` (which only NODE_PATH reaches). */
const workspace = (manager: "pnpm" | "npm") => ({
  "package.json": JSON.stringify(
    manager === "pnpm" ? { name: "root", private: true } : { name: "root", private: true, workspaces: ["packages/*"] }
  ),
  ...(manager === "pnpm" ? { "pnpm-workspace.yaml": "packages:\n  - packages/*\n" } : {}),
  "packages/a/package.json": JSON.stringify({
    name: "a",
    version: "1.0.0",
    dependencies: { tool: manager === "pnpm" ? "workspace:*" : "1.0.0", "is-odd": "3.0.1" }
  }),
  "packages/tool/package.json": JSON.stringify({ name: "tool", version: "1.0.0", bin: { tool: "cli.js" } }),
  "packages/tool/cli.js": {
    content: "#!/usr/bin/env node\nconsole.log(process.env.NODE_PATH ?? '')\n" +
      "try { console.log(require.resolve('is-number')) } catch { console.log('no is-number') }\n",
    mode: 0o755
  }
})

const PATH = `${path.dirname(process.execPath)}:/usr/bin:/bin`

const processesFor = (manager: "pnpm" | "npm") => ({
  a: {
    argv: ["/bin/sh", "-c", `${manager === "pnpm" ? "" : "../../"}node_modules/.bin/tool > out.txt`],
    env: { PATH },
    workingDirectory: "packages/a",
    inputs: [
      "node_modules/**",
      ...(manager === "pnpm" ? ["packages/a/node_modules/**"] : []),
      "packages/tool/**",
      "packages/a/package.json"
    ],
    outputs: ["out.txt"]
  }
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

/** A checkout at `ws` (under `root`, with its own store), installed. */
const checkout = (root: string, ws: string, manager: "pnpm" | "npm", pnpm = "10") =>
  Effect.gen(function*() {
    writeTree(ws, workspace(manager))
    fs.mkdirSync(path.join(root, "sandboxes"), { recursive: true })
    const install = yield* (manager === "pnpm" ? pnpmInstall(ws, pnpm) : npmInstall(ws))
    assert.strictEqual(install.code, 0, install.both)
    settleTimes(ws)
  })

/** What `a`'s run said: its NODE_PATH and where it found is-number. */
const saidIn = (ws: string) => fs.readFileSync(path.join(ws, "packages/a/out.txt"), "utf8").split("\n")

describe("shims", () => {
  for (const pnpm of ["9", "10"]) {
    it.scopedLive(
      `two checkouts of a pnpm ${pnpm} workspace at different paths share keys, and a shim's NODE_PATH is in its sandbox`,
      () =>
        Effect.gen(function*() {
          const rootOne = yield* tempDir("kiln-shims-one-")
          const rootTwo = yield* tempDir("kiln-shims-two-")
          const one = path.join(rootOne, "ws")
          const two = path.join(rootTwo, "elsewhere", "checkout-two")
          yield* checkout(rootOne, one, "pnpm", pnpm)
          yield* checkout(rootTwo, two, "pnpm", pnpm)
          // As pnpm writes it: the checkout's own path.
          const shim = fs.readFileSync(path.join(one, "packages/a/node_modules/.bin/tool"), "utf8")
          assert.include(shim, `${fs.realpathSync(one)}/node_modules/.pnpm/node_modules`)
          const processes = processesFor("pnpm")
          // One mounts its node_modules from the workspace, the other writes them from the store.
          const ranOne = yield* runOn(rootOne, one, processes, 2)
          const ranTwo = yield* runOn(rootTwo, two, processes, 1_000_000)
          assert.strictEqual(ranOne.failed, 0, JSON.stringify(ranOne.processes))
          assert.strictEqual(ranTwo.failed, 0, JSON.stringify(ranTwo.processes))
          assert.strictEqual(ranOne.processes[0]!.actionDigest, ranTwo.processes[0]!.actionDigest)
          const pinned = ProcessRunner.execRoot() !== undefined
          for (const ws of [one, two]) {
            const [nodePath, isNumber] = saidIn(ws)
            assert.strictEqual(
              nodePath,
              // pnpm 9 lists the node_modules Node's own lookup goes through too, as they are at /mnt.
              pnpm === "9"
                ? "/mnt/packages/tool/node_modules:/mnt/packages/node_modules:/mnt/node_modules:/node_modules:" +
                  "/mnt/node_modules/.pnpm/node_modules"
                : "/mnt/node_modules/.pnpm/node_modules",
              ws
            )
            // Found through NODE_PATH, in the sandbox: where there is no /mnt, not at all (rather than in the workspace).
            if (pinned) {
              assert.match(isNumber!, /^\/mnt\/node_modules\/\.pnpm\/is-number@[^/]+\/node_modules\/is-number\//)
            } else assert.strictEqual(isNumber, "no is-number")
          }
          // The workspace's shims are as pnpm wrote them.
          assert.strictEqual(fs.readFileSync(path.join(one, "packages/a/node_modules/.bin/tool"), "utf8"), shim)

          // Nothing changed: the run memo's no-op, and, without it, a session that reads no file.
          const again = yield* runOn(rootOne, one, processes, 2)
          assert.strictEqual(again.cacheHits, 1)
          assert.deepStrictEqual(again.processes[0]!.timings, REMEMBERED_TIMINGS)
          const hashed: Array<string> = []
          const progress: HashProgress = { hashed: (rel) => hashed.push(rel), settled: () => {} }
          yield* Effect.scoped(Effect.gen(function*() {
            const store = yield* Store.make({ root: path.join(rootOne, "store") })
            const session = yield* store.snapshotSession(one, { progress })
            const taken = yield* store.snapshotMany(one, [
              { globs: processes.a.inputs },
              { globs: ["node_modules/**/.bin/*", "packages/a/node_modules/.bin/*"] }
            ], session)
            assert.isTrue(taken.every(Either.isRight))
          }))
          assert.deepStrictEqual(hashed, [])

          // A no-op install: the same keys, every process a hit.
          const noop = yield* pnpmInstall(one, pnpm)
          assert.strictEqual(noop.code, 0, noop.both)
          const afterInstall = yield* runOn(rootOne, one, processes, 2)
          assert.strictEqual(afterInstall.cacheHits, 1, JSON.stringify(afterInstall.processes))
          assert.deepStrictEqual(afterInstall.processes[0]!.timings, REMEMBERED_TIMINGS)
        }),
      300_000
    )
  }

  it.scopedLive("npm's .bin entries are symlinks, taken as they are", () =>
    Effect.gen(function*() {
      const root = yield* tempDir("kiln-shims-npm-")
      const ws = path.join(root, "ws")
      yield* checkout(root, ws, "npm")
      assert.strictEqual(fs.readlinkSync(path.join(ws, "node_modules/.bin/tool")), "../tool/cli.js")
      const processes = processesFor("npm")
      const ran = yield* runOn(root, ws, processes, 2)
      assert.strictEqual(ran.failed, 0, JSON.stringify(ran.processes))
      // npm sets no NODE_PATH; is-number is hoisted to the root's node_modules, where Node finds it.
      const [nodePath, isNumber] = saidIn(ws)
      assert.strictEqual(nodePath, "")
      if (ProcessRunner.execRoot() !== undefined) assert.match(isNumber!, /^\/mnt\/node_modules\/is-number\//)
      const entries = yield* Effect.scoped(Effect.gen(function*() {
        const store = yield* Store.make({ root: path.join(root, "store") })
        const session = yield* store.snapshotSession(ws)
        return yield* store.listTree(yield* store.snapshot(ws, ["node_modules/.bin/*"], session))
      }))
      assert.deepStrictEqual(
        entries.filter((e) => e.type !== "directory").map((e) => [e.path, e.type, e.target]),
        [["node_modules/.bin/tool", "symlink", "../tool/cli.js"]]
      )
    }), 300_000)
})
