/**
 * `snapshotMany` says which include globs of each request match no file or symlink of its tree: the engine's "glob
 * matches nothing" comes from it. A glob counts when it matches inside a directory taken whole (walked this session,
 * taken from another request's walk, or from the last session's digest), and not for an empty directory, a directory
 * holding only empty ones, a directory itself, or a file an exclude took out.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Either } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"
import * as WholeDirs from "../../src/layers/store/internal/walks/wholeDirs.js"
import type * as Store from "../../src/layers/store/Store.js"
import { tempDir, tempStore, writeTree } from "../utils/temp.js"

/** Each request's globs, and the ones it must report as matching nothing. */
const REQUESTS: ReadonlyArray<{ readonly globs: ReadonlyArray<string>; readonly unmatched: ReadonlyArray<string> }> = [
  {
    globs: [
      "node_modules/**",
      "node_modules/p/*.js",
      "node_modules/q/*.js",
      "src/*.c",
      "!src/b.c",
      "src/b.c",
      "empty/**",
      "hollow/**",
      "lib",
      "link",
      "docs/*.md"
    ],
    unmatched: ["node_modules/q/*.js", "src/b.c", "empty/**", "hollow/**", "lib", "docs/*.md"]
  },
  // The same directory taken whole again: from the first request's walk, within one session.
  { globs: ["node_modules/**", "node_modules/p/*.md", "node_modules/p/*.ts"], unmatched: ["node_modules/p/*.ts"] },
  // Only inside the directory another glob of the request takes whole; and a glob that takes all.
  { globs: ["**", "node_modules/p/README.md"], unmatched: [] },
  { globs: ["empty/**"], unmatched: ["empty/**"] }
]

const workspace = Effect.gen(function*() {
  const ws = yield* tempDir("kiln-unmatched-")
  writeTree(ws, {
    "src/a.c": "a",
    "src/b.c": "b",
    "node_modules/p/index.js": "js",
    "node_modules/p/README.md": "md",
    "lib/x.txt": "x"
  })
  fs.mkdirSync(path.join(ws, "empty"))
  fs.mkdirSync(path.join(ws, "hollow/sub"), { recursive: true })
  fs.symlinkSync("src/a.c", path.join(ws, "link"))
  // Times away from "just now": the directory taken whole is then saved for the next session to take by its digest.
  const past = new Date(Date.now() - 60_000)
  const visit = (p: string) => {
    if (fs.lstatSync(p).isDirectory()) { for (const n of fs.readdirSync(p)) visit(path.join(p, n)) }
    fs.utimesSync(p, past, past)
  }
  visit(path.join(ws, "node_modules"))
  return ws
})

const unmatchedOf = (store: Store.Service, ws: string, session?: Store.SnapshotSession) =>
  Effect.map(
    store.snapshotMany(ws, REQUESTS.map((r) => ({ globs: r.globs, observe: true })), session),
    (results) => results.map((r) => Either.getOrThrow(r).unmatched)
  )

describe("snapshotMany: the include globs that matched nothing", () => {
  it.scoped("are reported per request, with or without a session, the directory taken whole or not", () =>
    Effect.gen(function*() {
      const ws = yield* workspace
      const store = yield* tempStore()
      const expected = REQUESTS.map((r) => r.unmatched)
      assert.deepStrictEqual(yield* unmatchedOf(store, ws), expected)
      const first = yield* Effect.scoped(Effect.flatMap(store.snapshotSession(ws), (s) => unmatchedOf(store, ws, s)))
      assert.deepStrictEqual(first, expected)
      // The next session takes node_modules by the digest the first one saved.
      const dir = path.join(store.options.root, "stat-index")
      const wholes = path.join(dir, fs.readdirSync(dir).find((n) => n.endsWith(".wholes"))!)
      // Each in a file of its own, or in the pack of small directories' walks.
      const saved = fs.readdirSync(wholes).flatMap((n) =>
        WholeDirs.isPackName(n)
          ? [...WholeDirs.decodePack(fs.readFileSync(path.join(wholes, n), "utf8")).keys()]
          : [(JSON.parse(fs.readFileSync(path.join(wholes, n), "utf8")) as { abs: string }).abs]
      )
      assert.include(saved, path.join(ws, "node_modules"))
      const second = yield* Effect.scoped(Effect.flatMap(store.snapshotSession(ws), (s) => unmatchedOf(store, ws, s)))
      assert.deepStrictEqual(second, expected)
    }))

  it.scoped("a directory taken whole counts once it holds a file", () =>
    Effect.gen(function*() {
      const ws = yield* workspace
      const store = yield* tempStore()
      fs.writeFileSync(path.join(ws, "hollow/sub/now.txt"), "here")
      const [taken] = yield* Effect.scoped(
        Effect.flatMap(store.snapshotSession(ws), (s) => store.snapshotMany(ws, [{ globs: ["hollow/**"] }], s))
      )
      assert.deepStrictEqual(Either.getOrThrow(taken!).unmatched, [])
    }))
})
