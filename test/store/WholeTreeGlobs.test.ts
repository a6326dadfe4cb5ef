/**
 * A workspace with a `node_modules` per package, as pnpm and yarn install it, declared as users write it
 * (`**` + `/node_modules/**`, or `packages/*` + `/node_modules/**`): each of those directories is taken whole, as
 * `node_modules/**` is. Its tree is the directory on disk (pnpm's empty `.tmp` included, tools' caches not) and it
 * stands in for its tree, so the engine mounts and records each once, rather than copying and recording every path
 * under it. So is each directory of `packages/*` + `/src/**`, as `src/**` is.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"
import type * as Store from "../../src/layers/store/Store.js"
import { settleTimes, tempDir, tempStore, writeTree } from "../utils/temp.js"

const workspace = Effect.gen(function*() {
  const ws = yield* tempDir("kiln-whole-globs-")
  writeTree(ws, {
    "package.json": "{}\n",
    "node_modules/.pnpm/dep@1.0.0/node_modules/dep/index.js": "module.exports = 'dep'\n",
    "node_modules/.modules.yaml": "layoutVersion: 5\n",
    "packages/a/src/a.ts": "export const a = 1\n",
    "packages/a/node_modules/dep": { link: "../../../node_modules/.pnpm/dep@1.0.0/node_modules/dep" },
    "packages/b/src/b.ts": "export const b = 1\n",
    "packages/b/node_modules/a": { link: "../../a" }
  })
  fs.mkdirSync(path.join(ws, "node_modules/.tmp"))
  fs.mkdirSync(path.join(ws, "packages/b/node_modules/.ignored"))
  // A tool's cache (see snapshotFilter.TOOL_CACHES): on disk, and not an input.
  writeTree(ws, { "packages/b/node_modules/.cache/babel-loader/x.json": "{}\n" })
  settleTimes(ws)
  return ws
})

const snapshotInSession = (store: Store.Service, ws: string, globs: ReadonlyArray<string>) =>
  Effect.scoped(Effect.flatMap(
    store.snapshotSession(ws),
    (session) => Effect.flatMap(store.snapshotMany(ws, [{ globs, observe: true }], session), ([taken]) => taken!)
  ))

describe("globs that take every node_modules of a workspace", () => {
  const cases: Record<string, { globs: ReadonlyArray<string>; whole: ReadonlyArray<string> }> = {
    "**/node_modules/**": {
      globs: ["packages/*/src/**", "**/node_modules/**"],
      whole: ["node_modules", "packages/a/node_modules", "packages/b/node_modules", "packages/a/src", "packages/b/src"]
    },
    "packages/*/node_modules/**": {
      globs: ["packages/*/src/**", "packages/*/node_modules/**"],
      whole: ["packages/a/node_modules", "packages/b/node_modules", "packages/a/src", "packages/b/src"]
    }
  }
  for (const [name, { globs, whole }] of Object.entries(cases)) {
    it.scoped(`${name}: each one is taken whole, empty directories included, and stands in for its tree`, () =>
      Effect.gen(function*() {
        const ws = yield* workspace
        const store = yield* tempStore()
        const taken = yield* snapshotInSession(store, ws, globs)
        assert.deepStrictEqual(taken.unmatched, [])
        assert.deepStrictEqual(
          taken.wholeDirectories.map((w) => path.relative(ws, w.abs)).sort(),
          [...whole].sort()
        )
        for (const dir of taken.wholeDirectories) {
          // The tree of each is the directory as it is on disk (bookkeeping and tools' caches aside), from a snapshot
          // with no globs.
          const copy = path.join(yield* tempDir("kiln-whole-globs-copy-"), "nm")
          fs.cpSync(dir.abs, copy, {
            recursive: true,
            verbatimSymlinks: true,
            filter: (p) => ![".modules.yaml", ".cache"].includes(path.basename(p))
          })
          assert.deepStrictEqual(dir.digest, yield* store.snapshot(copy), dir.abs)
          assert.isTrue(dir.unchanged())
        }
        const paths = (yield* store.listTree(taken.digest)).map((e) => e.path)
        assert.include(paths, "packages/b/node_modules/.ignored")
        assert.notInclude(paths, "packages/b/node_modules/.cache")
        assert.notInclude(paths, "package.json")
        // The next session takes the same trees, from the digests the first one saved.
        const again = yield* snapshotInSession(store, ws, globs)
        assert.deepStrictEqual(again.digest, taken.digest)
      }))
  }

  it.scoped("an exclude that reaches into them keeps them from being taken whole, and is honoured", () =>
    Effect.gen(function*() {
      const ws = yield* workspace
      fs.writeFileSync(path.join(ws, "packages/b/node_modules/.ignored/x.map"), "{}\n")
      settleTimes(ws)
      const store = yield* tempStore()
      const taken = yield* snapshotInSession(store, ws, ["**/node_modules/**", "!**/*.map"])
      assert.deepStrictEqual(taken.wholeDirectories, [])
      const paths = (yield* store.listTree(taken.digest)).map((e) => e.path)
      assert.notInclude(paths, "packages/b/node_modules/.ignored/x.map")
      assert.include(paths, "node_modules/.pnpm/dep@1.0.0/node_modules/dep/index.js")
    }))
})
