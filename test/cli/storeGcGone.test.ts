/**
 * `kiln store gc` removes what the store and the engine keep for directories that are gone: a workspace's stat index,
 * the saved walks of its directories taken whole, and its run memo. A deleted checkout left megabytes behind for good
 * before; a workspace still there keeps all of it. End to end, through the built CLI, on one store shared by two
 * workspaces.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { spawnSync } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"
import { nodeModulesWorkspace } from "../utils/nodeModulesWorkspace.js"
import { cli, cliEnvIn } from "../utils/stack.js"
import { tempDir, writeTree } from "../utils/temp.js"

/** Every file under `dir`, relative to it. */
const filesUnder = (dir: string): Array<string> =>
  fs.existsSync(dir)
    ? fs.readdirSync(dir, { recursive: true, withFileTypes: true }).filter((e) => e.isFile()).map((e) =>
      path.relative(dir, path.join(e.parentPath, e.name))
    ).sort()
    : []

describe("kiln store gc and directories that are gone", () => {
  it.scoped("a deleted workspace's stat index, saved walks and run memo are removed; a live one's are kept", () =>
    Effect.gen(function*() {
      const root = yield* tempDir("kiln-gc-gone-")
      const env = cliEnvIn(root)
      const store = path.join(root, "store")
      const kiln = (cwd: string, args: ReadonlyArray<string>) => {
        const r = spawnSync(process.execPath, [cli, ...args], { cwd, encoding: "utf8", env })
        assert.strictEqual(r.status, 0, r.stderr)
        return r.stdout
      }
      const workspaces = ["kept", "deleted"].map((name) => {
        const ws = path.join(root, name)
        writeTree(ws, nodeModulesWorkspace(`${name}\n`))
        kiln(ws, ["run", "--progress", "none"])
        return ws
      })
      const records = () => [...filesUnder(path.join(store, "stat-index")), ...filesUnder(path.join(store, "engine"))]
      const before = records()
      // Each workspace: its stat index, the saved walks of its node_modules and src, its memo and its run records.
      const kinds = (files: ReadonlyArray<string>) =>
        [/^[^/]+\.json$/, /\.wholes\//, /^memo\/[^/]+\.json$/, /^runs\//].map((re) =>
          files.filter((f) => re.test(f)).length
        )
      assert.deepStrictEqual(kinds(before), [2, 4, 2, 2], before.join("\n"))
      const untouched = kiln(root, ["store", "gc", "--store-dir", store])
      assert.match(untouched, /and 0 records of directories that are gone \(0 B\)/)
      assert.deepStrictEqual(records(), before)

      fs.rmSync(workspaces[1]!, { recursive: true })
      const collected = kiln(root, ["store", "gc", "--store-dir", store])
      const after = records()
      assert.match(collected, /and [1-9]\d* records of directories that are gone \(\d/)
      assert.deepStrictEqual(kinds(after), [1, 2, 1, 1], after.join("\n"))
      // What is left is the live workspace's, and it still serves: a no-op is answered from its memo.
      const noop = spawnSync(process.execPath, [cli, "run", "--progress", "plain"], {
        cwd: workspaces[0],
        encoding: "utf8",
        env: { ...env, KILN_NOOP_DEBUG: "1" }
      })
      assert.strictEqual(noop.status, 0, noop.stderr)
      assert.include(noop.stderr, "kiln: no-op check: nothing changed")
    }))
})
