/**
 * A workspace's `.bin` shims are taken as they read at `/mnt` (issue #36): what is a shim and what is not, the same
 * tree from checkouts at different paths, and a second session that reads no file, its index knowing what the store
 * took for each shim.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"
import * as Digest from "../../src/domain/Digest.js"
import * as Shims from "../../src/layers/store/Shims.js"
import type { HashProgress } from "../../src/layers/store/SnapshotSession.js"
import { settleTimes, tempDir, tempStore, writeTree } from "../utils/temp.js"

/** pnpm's shim of a command, naming the checkout `root`. */
const shim = (root: string) =>
  `#!/bin/sh\nbasedir=$(dirname "$0")\nexport NODE_PATH="${root}/node_modules/.pnpm/node_modules:${root}/x"\n` +
  `exec node "$basedir/../tool/cli.js" "$@"\n`

/** A workspace at `root` with shims, and files like them that are not shims, naming `named`. */
const workspaceAt = (root: string, named: string) =>
  writeTree(root, {
    "node_modules/.bin/tool": { content: shim(root), mode: 0o755 },
    "packages/a/node_modules/.bin/tool": { content: shim(root), mode: 0o755 },
    // Not a script: as it is.
    "node_modules/.bin/notes.txt": `see ${named}/README\n`,
    // A script outside a `.bin`, and in a `.bin` outside a `node_modules`: as they are.
    "node_modules/tool/cli.js": `#!/usr/bin/env node\n// ${named}/x\n`,
    "src/.bin/run": `#!/bin/sh\n${named}/x\n`,
    // npm's entry: a symlink.
    "node_modules/.bin/linked": { link: "../tool/cli.js" },
    "node_modules/.pnpm/node_modules/dep/index.js": "module.exports = 1\n"
  })

const recorder = () => {
  const hashed: Array<string> = []
  const progress: HashProgress = { hashed: (rel) => hashed.push(rel), settled: () => {} }
  return { progress, hashed }
}

describe("shims", () => {
  it("a file directly in a .bin directly in a node_modules may be one", () => {
    assert.isTrue(Shims.isShimPath("node_modules/.bin/tsc"))
    assert.isTrue(Shims.isShimPath("/home/u/p/node_modules/.pnpm/a@1/node_modules/a/node_modules/.bin/tsc"))
    assert.isFalse(Shims.isShimPath("node_modules/.bin"))
    assert.isFalse(Shims.isShimPath("node_modules/.bin/sub/tsc"))
    assert.isFalse(Shims.isShimPath("src/.bin/tsc"))
    assert.isFalse(Shims.isShimPath("my_node_modules/.bin/tsc"))
    assert.isFalse(Shims.isShimPath("node_modules/x.bin/tsc"))
    assert.isFalse(Shims.isShimPath(".bin/tsc"))
  })

  it("a script naming the root is taken at /mnt; one that does not, a non-script or a large one is not", () => {
    const roots = Shims.rootsFrom(["/home/u/p"])
    assert.strictEqual(
      Shims.normalize(Buffer.from("#!/bin/sh\nexport NODE_PATH=\"/home/u/p/a:/home/u/p/b\"\n"), roots)?.toString(),
      "#!/bin/sh\nexport NODE_PATH=\"/mnt/a:/mnt/b\"\n"
    )
    assert.isUndefined(Shims.normalize(Buffer.from("#!/bin/sh\nexec /home/u/other\n"), roots))
    // The root without its slash (a sibling directory's prefix) is not the root.
    assert.isUndefined(Shims.normalize(Buffer.from("#!/bin/sh\n/home/u/pp/x\n"), roots))
    assert.isUndefined(Shims.normalize(Buffer.from("echo /home/u/p/x\n"), roots))
    assert.isUndefined(Shims.normalize(Buffer.from(`#!/bin/sh\n/home/u/p/\n${"#".repeat(Shims.MAX_BYTES)}`), roots))
    // pnpm 9 lists the node_modules of every directory above the workspace too: those but `/`'s are not at /mnt.
    const nine = (list: string) => Buffer.from(`#!/bin/sh\nexport NODE_PATH="${list}"\n`)
    assert.deepStrictEqual(
      Shims.normalize(
        nine(
          "/home/u/p/a/node_modules:/home/u/p/node_modules:/home/u/node_modules:/home/node_modules:/node_modules:" +
            "/home/u/p/node_modules/.pnpm/node_modules:$NODE_PATH"
        ),
        roots
      ),
      nine("/mnt/a/node_modules:/mnt/node_modules:/node_modules:/mnt/node_modules/.pnpm/node_modules:$NODE_PATH")
    )
    assert.deepStrictEqual(
      Shims.normalize(nine("/home/u/node_modules:/home/u/p/x:/home/node_modules"), roots),
      nine("/mnt/x")
    )
    // Another directory's node_modules, or one above named otherwise, stays.
    assert.deepStrictEqual(
      Shims.normalize(nine("/home/u/p/x:/home/v/node_modules:/home/u/node_modules/y:/home/u/node_modulesz"), roots),
      nine("/mnt/x:/home/v/node_modules:/home/u/node_modules/y:/home/u/node_modulesz")
    )
    // Bytes that are not UTF-8 stay as they were.
    const odd = Buffer.concat([
      Buffer.from("#!/bin/sh\n/home/u/p/x "),
      Buffer.from([0xff, 0xfe, 0x80]),
      Buffer.from("\n")
    ])
    assert.deepStrictEqual(
      Shims.normalize(odd, roots),
      Buffer.concat([Buffer.from("#!/bin/sh\n/mnt/x "), Buffer.from([0xff, 0xfe, 0x80]), Buffer.from("\n")])
    )
  })

  it.scoped("a checkout reached through a symlink: both of its paths are taken at /mnt", () =>
    Effect.gen(function*() {
      const dir = yield* tempDir()
      fs.mkdirSync(path.join(dir, "real"))
      fs.symlinkSync("real", path.join(dir, "link"))
      const real = fs.realpathSync(path.join(dir, "real"))
      const roots = Shims.rootsOf(path.join(dir, "link"))
      assert.deepStrictEqual(
        Shims.normalize(Buffer.from(`#!/bin/sh\n${real}/a ${dir}/link/b\n`), roots)?.toString(),
        "#!/bin/sh\n/mnt/a /mnt/b\n"
      )
    }))

  it.scoped("two checkouts at different paths have one tree; a second session reads no file", () =>
    Effect.gen(function*() {
      const store = yield* tempStore()
      const one = path.join(yield* tempDir(), "one")
      const two = path.join(yield* tempDir(), "deeper", "checkout-two")
      // Files that are not shims name the first checkout in both: as they are, the same in both.
      workspaceAt(one, one)
      workspaceAt(two, one)
      settleTimes(one)
      settleTimes(two)
      // Whole (node_modules/**), and not (a glob of the .bin's files, which the stat index alone serves).
      const requests = [
        { globs: ["node_modules/**", "packages/a/node_modules/**", "src/**"] },
        { globs: ["node_modules/.bin/*", "packages/*/node_modules/.bin/*"] }
      ]
      const take = (ws: string, progress?: HashProgress) =>
        Effect.scoped(Effect.gen(function*() {
          const session = yield* store.snapshotSession(ws, progress === undefined ? {} : { progress })
          const taken = yield* store.snapshotMany(ws, requests, session)
          return taken.map((t) => {
            assert.strictEqual(t._tag, "Right")
            return Digest.format(t._tag === "Right" ? t.right.digest : Digest.empty)
          })
        }))
      const first = yield* take(one)
      assert.deepStrictEqual(yield* take(two), first)
      // The store holds the shims as they read at /mnt, the rest as it is.
      const [digest] = yield* Effect.scoped(Effect.gen(function*() {
        const session = yield* store.snapshotSession(one)
        return (yield* store.snapshotMany(one, requests, session)).map((t) =>
          t._tag === "Right" ? t.right.digest : Digest.empty
        )
      }))
      const entries = yield* store.listTree(digest!)
      const contentOf = (rel: string) =>
        Effect.map(store.getFile(entries.find((e) => e.path === rel)!.digest!), (b) => Buffer.from(b).toString())
      assert.strictEqual(yield* contentOf("node_modules/.bin/tool"), shim("/mnt"))
      assert.strictEqual(yield* contentOf("packages/a/node_modules/.bin/tool"), shim("/mnt"))
      assert.strictEqual(yield* contentOf("node_modules/.bin/notes.txt"), `see ${one}/README\n`)
      assert.strictEqual(yield* contentOf("node_modules/tool/cli.js"), `#!/usr/bin/env node\n// ${one}/x\n`)
      assert.strictEqual(yield* contentOf("src/.bin/run"), `#!/bin/sh\n${one}/x\n`)
      assert.strictEqual(entries.find((e) => e.path === "node_modules/.bin/linked")?.target, "../tool/cli.js")
      assert.isTrue(entries.find((e) => e.path === "node_modules/.bin/tool")!.isExecutable)
      // The workspace is as it was.
      assert.strictEqual(fs.readFileSync(path.join(one, "node_modules/.bin/tool"), "utf8"), shim(one))
      // Again, from the index: nothing read, the same trees.
      const warm = recorder()
      assert.deepStrictEqual(yield* take(one, warm.progress), first)
      assert.deepStrictEqual(warm.hashed, [])
      // An edit of a shim is seen.
      fs.appendFileSync(path.join(one, "node_modules/.bin/tool"), "# edited\n")
      const edited = recorder()
      const after = yield* take(one, edited.progress)
      assert.notStrictEqual(after[0], first[0])
      assert.notStrictEqual(after[1], first[1])
      // Only it, read by each snapshot (changed just now, the index cannot vouch for it).
      assert.deepStrictEqual([...new Set(edited.hashed)], ["node_modules/.bin/tool"])
    }))
})
