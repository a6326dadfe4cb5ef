/**
 * Remote `Tree`s whose shape kiln could not lay out, end to end through the built CLI (nginx as Bazel's HTTP cache,
 * and the hostile REAPI server of `test/utils/hostile/`): a few kilobytes of shared directories that expand to 2^40
 * paths, a name longer than `NAME_MAX`, a path longer than `PATH_MAX`. An honest run fills the remote, the test
 * rewrites the stored `ActionResult` to name the crafted `Tree`, and a second machine with a fresh store and
 * workspace reads it: refused with a warning naming the process, which runs instead, its result replacing the entry.
 * A tree as wide but legitimate (a thousand directories sharing one child) is still used.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"
import * as Digest from "../../src/domain/Digest.js"
import * as Directory from "../../src/domain/Directory.js"
import * as Tree from "../../src/domain/Tree.js"
import * as Proto from "../../src/layers/remote/internal/proto.js"
import { type Remote, rewritableRemote as remoteOf } from "../utils/hostile/rewritable.js"
import { machine, namespace, sources } from "./workspace.js"

const extra = {
  mk: {
    argv: ["/bin/sh", "-c", "mkdir -p dir/sub && echo hello > dir/sub/h.txt"],
    inputs: ["in/a.txt"],
    outputs: ["dir/"],
    env: { PATH: "/usr/local/bin:/usr/bin:/bin" }
  }
}

/** Fills the remote with an honest run of `mk`, then points its entry's output directory at `tree`. */
const poisoned = (remote: Remote, tree: Tree.Tree) =>
  Effect.gen(function*() {
    const ns = namespace()
    const attacker = yield* machine(ns, { extra })
    const filled = yield* attacker.run([...remote.flags, "mk"])
    assert.strictEqual(filled.code, 0, filled.stderr)
    assert.strictEqual(filled.summary!.pendingUploads, 0, filled.stderr)
    const hash = filled.summary!.processes.find((p) => p.name === "mk")!.actionDigest.split("/")[0]!
    const honest = remote.actionResult(hash)
    assert.isDefined(honest, "the remote keeps mk's entry")
    const bytes = Tree.encode(tree)
    const digest = Digest.ofBytes(bytes)
    remote.putBlob(digest.hash, bytes)
    remote.setActionResult(
      hash,
      Proto.encode("ActionResult", {
        exit_code: 0,
        stdout_digest: honest!.stdout_digest,
        stderr_digest: honest!.stderr_digest,
        output_directories: [{ path: "dir", tree_digest: Proto.wire(digest) }]
      })
    )
    return ns
  })

/**
 * A second machine reads the crafted entry: refused with a warning naming `mk`, which runs instead; its honest result
 * replaces the entry, so a third machine gets that from the remote.
 */
const refusedThenReplaced = (remote: Remote, ns: string, why: RegExp) =>
  Effect.gen(function*() {
    const victim = yield* machine(ns, { extra })
    const r = yield* victim.run([...remote.flags, "mk"])
    assert.strictEqual(r.code, 0, r.stderr)
    assert.match(r.stderr, new RegExp(`remote cache entry for mk is unusable \\(.*${why.source}`), r.stderr)
    assert.match(r.stderr, /running it, and replacing the entry/)
    assert.strictEqual(sources(r.summary).mk, "ran", r.stderr)
    assert.strictEqual(r.summary!.pendingUploads, 0, JSON.stringify(r.summary))
    assert.strictEqual(fs.readFileSync(path.join(victim.ws, "dir/sub/h.txt"), "utf8"), "hello\n")
    const third = yield* machine(ns, { extra })
    const again = yield* third.run([...remote.flags, "mk"])
    assert.strictEqual(again.code, 0, again.stderr)
    assert.strictEqual(sources(again.summary).mk, "remote-cache", again.stderr)
    assert.notMatch(again.stderr, /unusable/)
    assert.strictEqual(fs.readFileSync(path.join(third.ws, "dir/sub/h.txt"), "utf8"), "hello\n")
  })

const fileF: Directory.Directory = {
  files: [{ name: "f", digest: Digest.empty, isExecutable: false }],
  directories: [],
  symlinks: []
}

/** `levels` directories, each holding the one below under every name of `names`, around a file `f`. */
const nested = (levels: number, names: ReadonlyArray<string>): Tree.Tree => {
  const children = new Map<string, Directory.Directory>()
  let dir = fileF
  for (let i = 0; i < levels; i++) {
    const digest = Directory.digestOf(dir)
    children.set(digest.hash, dir)
    dir = { files: [], directories: names.map((name) => ({ name, digest })), symlinks: [] }
  }
  return { root: dir, children }
}

describe.each(["http", "grpc"] as const)("hostile Tree shapes over %s", (kind) => {
  it.scoped("a 40-level Tree of shared directories (2^40 paths) is refused without being expanded", () =>
    Effect.gen(function*() {
      const remote = yield* remoteOf(kind)
      const bomb = nested(40, ["a", "b"])
      assert.isBelow(Tree.encode(bomb).length, 8192)
      const ns = yield* poisoned(remote, bomb)
      yield* refusedThenReplaced(remote, ns, /hold \d+ entries once expanded, more than 1000000/)
    }))

  it.scoped("a file name of 300 bytes in a Tree is refused", () =>
    Effect.gen(function*() {
      const remote = yield* remoteOf(kind)
      const tree: Tree.Tree = {
        root: {
          files: [{ name: "N".repeat(300), digest: Digest.empty, isExecutable: false }],
          directories: [],
          symlinks: []
        },
        children: new Map()
      }
      const ns = yield* poisoned(remote, tree)
      yield* refusedThenReplaced(remote, ns, /entry name `N+…` is 300 bytes long, more than 255/)
    }))

  it.scoped("17 levels of 250-byte names (a path over PATH_MAX) are refused", () =>
    Effect.gen(function*() {
      const remote = yield* remoteOf(kind)
      const ns = yield* poisoned(remote, nested(17, ["L".repeat(250)]))
      yield* refusedThenReplaced(
        remote,
        ns,
        /output directory `dir` holds a path 4272 bytes long, more than 4095/
      )
    }))
})

describe("remote Trees that hold", () => {
  it.scoped("a thousand directories sharing one child are used, and written back whole", () =>
    Effect.gen(function*() {
      const remote = yield* remoteOf("http")
      const names = Array.from({ length: 1000 }, (_, i) => `d${String(i).padStart(4, "0")}`)
      const ns = yield* poisoned(remote, nested(1, names))
      const reader = yield* machine(ns, { extra })
      const r = yield* reader.run([...remote.flags, "mk"])
      assert.strictEqual(r.code, 0, r.stderr)
      assert.strictEqual(sources(r.summary).mk, "remote-cache", r.stderr)
      assert.notMatch(r.stderr, /unusable/)
      assert.strictEqual(fs.readdirSync(path.join(reader.ws, "dir")).length, 1000)
      assert.strictEqual(fs.readFileSync(path.join(reader.ws, "dir/d0999/f"), "utf8"), "")
    }))
})

describe("a remote Tree whose path fits PATH_MAX only without the workspace's own path", () => {
  it.scoped("write-back refuses the hit; the process runs, and its result replaces the entry", () =>
    Effect.gen(function*() {
      // `dir/`, 15 names of 255 bytes and one of 251, with their slashes: 4,095 bytes, all that `MAX_PATH_BYTES` allows
      // below the working directory, and too long once the workspace's own path is in front.
      const names = [...Array.from({ length: 15 }, () => "P".repeat(255)), "Q".repeat(251)]
      const children = new Map<string, Directory.Directory>()
      let dir: Directory.Directory = Directory.empty
      for (const name of [...names].reverse()) {
        const digest = Directory.digestOf(dir)
        children.set(digest.hash, dir)
        dir = { files: [], directories: [{ name, digest }], symlinks: [] }
      }
      const remote = yield* remoteOf("http")
      const ns = yield* poisoned(remote, { root: dir, children })
      const victim = yield* machine(ns, { extra })
      const r = yield* victim.run([...remote.flags, "mk"])
      assert.strictEqual(r.code, 0, r.stderr)
      assert.notMatch(r.stderr, /unusable/)
      assert.match(r.stderr, /mk: its cached result cannot be written back \(.*ENAMETOOLONG\)\): running it/)
      assert.strictEqual(fs.readFileSync(path.join(victim.ws, "dir/sub/h.txt"), "utf8"), "hello\n")
      assert.deepStrictEqual(fs.readdirSync(path.join(victim.ws, "dir")), ["sub"])
      const third = yield* machine(ns, { extra })
      const again = yield* third.run([...remote.flags, "mk"])
      assert.strictEqual(again.code, 0, again.stderr)
      assert.strictEqual(sources(again.summary).mk, "remote-cache", again.stderr)
      assert.strictEqual(fs.readFileSync(path.join(third.ws, "dir/sub/h.txt"), "utf8"), "hello\n")
    }))
})
