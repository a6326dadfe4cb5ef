/**
 * A package manager's bookkeeping files directly inside a `node_modules` directory are not inputs (issue #36): a
 * snapshot of `node_modules/**` is the same tree whatever they hold, while any other file there, and a file of the
 * same name outside `node_modules`, is an input. Checked without a session (every path read), in a session (the
 * directory taken whole and shared) and across sessions (the directory taken from its saved digest).
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"
import type * as Store from "../../src/layers/store/Store.js"
import { tempDir, tempStore, writeTree } from "../utils/temp.js"

const GLOBS = ["node_modules/**", "packages/*/node_modules/**", "src/**", "packages/b/**"]

/** Moves every time under `ws` away from "just now", so that no stat is racy when a session walks it. */
const settle = (ws: string) => {
  const past = new Date(Date.now() - 60_000)
  const visit = (p: string) => {
    if (fs.lstatSync(p).isDirectory()) { for (const n of fs.readdirSync(p)) visit(path.join(p, n)) }
    fs.utimesSync(p, past, past)
  }
  visit(ws)
}

const inSession = (store: Store.Service, ws: string) =>
  Effect.scoped(Effect.gen(function*() {
    const session = yield* store.snapshotSession(ws)
    const [taken] = yield* store.snapshotMany(ws, [{ globs: GLOBS, observe: true }], session)
    return yield* taken!
  }))

/** The digest of `ws` under GLOBS, each way a snapshot is taken; all three agree. */
const digestOf = (store: Store.Service, ws: string) =>
  Effect.gen(function*() {
    settle(ws)
    const plain = yield* store.snapshot(ws, GLOBS)
    const first = yield* inSession(store, ws)
    const again = yield* inSession(store, ws)
    assert.deepStrictEqual(first.digest, plain)
    assert.deepStrictEqual(again.digest, plain)
    assert.isFalse(
      first.observations.some((o) => o.abs.endsWith(".pnpm-workspace-state-v1.json")),
      "a bookkeeping file is observed"
    )
    return plain
  })

describe("package managers' bookkeeping files", () => {
  it.scoped("are not inputs directly inside node_modules, and are elsewhere", () =>
    Effect.gen(function*() {
      const ws = yield* tempDir("kiln-bookkeeping-")
      writeTree(ws, {
        "src/a.txt": "a\n",
        "src/.modules.yaml": "mine\n",
        "node_modules/p/index.js": "module.exports = 1\n",
        "node_modules/p/.package-lock.json": "{}\n",
        "node_modules/.pnpm-workspace-state-v1.json": "{\"lastValidatedTimestamp\":1}\n",
        "node_modules/.modules.yaml": "prunedAt: Mon, 01 Jan 2024 00:00:00 GMT\n",
        "node_modules/.package-lock.json": "{\"lockfileVersion\":3}\n",
        "packages/a/node_modules/.yarn-integrity": "{}\n",
        "packages/a/node_modules/q/index.js": "module.exports = 2\n"
      })
      const store = yield* tempStore()
      const before = yield* digestOf(store, ws)

      // Rewritten by a no-op install, and a new one written: the same inputs.
      writeTree(ws, {
        "node_modules/.pnpm-workspace-state-v1.json": "{\"lastValidatedTimestamp\":2}\n",
        "node_modules/.modules.yaml": "prunedAt: Tue, 02 Jan 2024 00:00:00 GMT\n",
        "node_modules/.yarn-state.yml": "# yarn\n",
        "packages/a/node_modules/.yarn-integrity": "{\"flags\":[]}\n"
      })
      assert.deepStrictEqual(yield* digestOf(store, ws), before)

      // A file of the same name deeper than node_modules itself, or outside it, is an input.
      writeTree(ws, { "node_modules/p/.package-lock.json": "{\"changed\":true}\n" })
      const nested = yield* digestOf(store, ws)
      assert.notDeepEqual(nested, before)
      writeTree(ws, { "src/.modules.yaml": "changed\n" })
      const outside = yield* digestOf(store, ws)
      assert.notDeepEqual(outside, nested)
      // Any other file of node_modules is an input.
      writeTree(ws, { "packages/a/node_modules/q/index.js": "module.exports = 3\n" })
      assert.notDeepEqual(yield* digestOf(store, ws), outside)
    }))

  it.scoped("tools' caches directly inside node_modules are not inputs either, however the globs take them", () =>
    Effect.gen(function*() {
      const ws = yield* tempDir("kiln-tool-caches-")
      writeTree(ws, {
        "src/a.txt": "a\n",
        "node_modules/p/index.js": "module.exports = 1\n",
        "packages/a/node_modules/q/index.js": "module.exports = 2\n",
        // A package of an npm workspace: no node_modules of its own but what a tool run in it leaves there.
        "packages/b/index.js": "export const b = 1\n"
      })
      const store = yield* tempStore()
      const before = yield* digestOf(store, ws)

      // What vitest, vite and find-cache-dir's users leave, in the root's, a package's and a bare package's.
      writeTree(ws, {
        "node_modules/.vite/vitest/results.json": "{\"version\":\"3.0.0\"}\n",
        "node_modules/.cache/babel-loader/x.json": "{}\n",
        "packages/a/node_modules/.vite/deps/_metadata.json": "{}\n",
        "packages/a/node_modules/.vite-temp/vite.config.ts.timestamp-1.mjs": "export default {}\n",
        "packages/b/node_modules/.vite/vitest/results.json": "{}\n",
        "packages/b/node_modules/.vitest/results.json": "{}\n"
      })
      assert.deepStrictEqual(yield* digestOf(store, ws), before)
      writeTree(ws, { "packages/b/node_modules/.vite/vitest/results.json": "{\"changed\":true}\n" })
      assert.deepStrictEqual(yield* digestOf(store, ws), before)

      // A directory of that name deeper than node_modules itself, or outside it, is an input.
      writeTree(ws, { "node_modules/p/.cache/data.json": "{}\n" })
      const nested = yield* digestOf(store, ws)
      assert.notDeepEqual(nested, before)
      writeTree(ws, { "src/.vite/x.txt": "x\n" })
      assert.notDeepEqual(yield* digestOf(store, ws), nested)
    }))
})
