/**
 * Remote entries a cache writer crafted, end to end through the built CLI: nginx as Bazel's HTTP cache (the entry
 * rewritten on its disk) and the hostile REAPI server of `test/utils/hostile/` (an honest cache in memory, the entry
 * rewritten there). An honest run fills the remote, the test rewrites the stored `ActionResult` (and adds the `Tree`
 * it names), and a second machine with a fresh store and workspace reads it. Each crafted entry must
 * be refused with a warning naming the process, the process run instead, nothing outside the workspace touched, and
 * the entry replaced by the honest result.
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
import { tempDir } from "../utils/temp.js"
import { machine, namespace, sources, type Summary } from "./workspace.js"

const PATH = { PATH: "/usr/local/bin:/usr/bin:/bin" }

/** The processes these tests add to the shared workspace (`workspace.ts`'s `machine`). */
const extra = {
  mk: {
    argv: ["/bin/sh", "-c", "mkdir -p dir/sub && echo hello > dir/sub/h.txt"],
    inputs: ["in/a.txt"],
    outputs: ["dir/"],
    env: PATH
  },
  producer: { argv: ["/bin/sh", "-c", "echo generated > f.txt"], inputs: ["in/a.txt"], outputs: ["f.txt"], env: PATH },
  consumer: {
    argv: ["/bin/sh", "-c", "cat f.txt > copy.txt"],
    inputs: ["in/b.txt"],
    deps: ["producer"],
    outputs: ["copy.txt"],
    env: PATH
  }
}

const actionOf = (summary: Summary | undefined, name: string) => {
  const p = summary?.processes.find((x) => x.name === name)
  assert.isDefined(p, `no ${name} in the summary`)
  return p!.actionDigest.split("/")[0]!
}

/**
 * Fills the remote with an honest run of `names`, then rewrites `name`'s entry with `craft` (given the honest
 * `ActionResult` and the remote, where it may put blobs), and says the namespace the machines share.
 */
const poisoned = (
  remote: Remote,
  names: ReadonlyArray<string>,
  name: string,
  craft: (honest: Record<string, unknown>) => Record<string, unknown>,
  processes: Record<string, unknown> = extra
) =>
  Effect.gen(function*() {
    const ns = namespace()
    const attacker = yield* machine(ns, { extra: processes })
    const filled = yield* attacker.run([...remote.flags, ...names])
    assert.strictEqual(filled.code, 0, filled.stderr)
    assert.strictEqual(filled.summary!.pendingUploads, 0, filled.stderr)
    const hash = actionOf(filled.summary, name)
    const honest = remote.actionResult(hash)
    assert.isDefined(honest, `the remote keeps ${name}'s entry`)
    remote.setActionResult(hash, Proto.encode("ActionResult", craft(honest!)))
    return ns
  })

const logsOf = (honest: Record<string, unknown>) => ({
  exit_code: 0,
  stdout_digest: honest.stdout_digest,
  stderr_digest: honest.stderr_digest
})

/** A `Tree` put in the remote's CAS: its digest, for an `ActionResult` to name. */
const plantTree = (remote: Remote, tree: Tree.Tree) => {
  const bytes = Tree.encode(tree)
  const digest = Digest.ofBytes(bytes)
  remote.putBlob(digest.hash, bytes)
  return Proto.wire(digest)
}

/** A chain of `depth` nested directories `d` around an empty file `f`. */
const chain = (depth: number): Tree.Tree => {
  const children = new Map<string, Directory.Directory>()
  let dir: Directory.Directory = {
    files: [{ name: "f", digest: Digest.empty, isExecutable: false }],
    directories: [],
    symlinks: []
  }
  for (let i = 0; i < depth; i++) {
    const digest = Directory.digestOf(dir)
    children.set(digest.hash, dir)
    dir = { files: [], directories: [{ name: "d", digest }], symlinks: [] }
  }
  return { root: dir, children }
}

/**
 * A second machine reads the crafted entry: refused with a warning naming `name`, which runs instead; its honest
 * result replaces the entry, so a third machine gets that from the remote.
 */
const refusedThenReplaced = (remote: Remote, ns: string, names: ReadonlyArray<string>, name: string, why: RegExp) =>
  Effect.gen(function*() {
    const victim = yield* machine(ns, { extra })
    const r = yield* victim.run([...remote.flags, ...names])
    assert.strictEqual(r.code, 0, r.stderr)
    assert.match(r.stderr, new RegExp(`remote cache entry for ${name} is unusable \\(${why.source}`))
    assert.match(r.stderr, /running it, and replacing the entry/)
    assert.strictEqual(sources(r.summary)[name], "ran", r.stderr)
    assert.strictEqual(r.summary!.pendingUploads, 0, JSON.stringify(r.summary))
    assert.deepStrictEqual(r.summary!.remoteErrors, {}, JSON.stringify(r.summary))
    const third = yield* machine(ns, { extra })
    const again = yield* third.run([...remote.flags, ...names])
    assert.strictEqual(again.code, 0, again.stderr)
    assert.strictEqual(sources(again.summary)[name], "remote-cache", again.stderr)
    assert.notMatch(again.stderr, /unusable/)
    return victim
  })

describe.each(["http", "grpc"] as const)("hostile remote entries over %s", (kind) => {
  it.scoped("an output directory that is a symlink (C1) is refused; its target is untouched", () =>
    Effect.gen(function*() {
      const victimDir = yield* tempDir("kiln-c1-victim-")
      fs.mkdirSync(path.join(victimDir, "d"))
      fs.writeFileSync(path.join(victimDir, "important.txt"), "keep\n")
      fs.writeFileSync(path.join(victimDir, "d", "x"), "keep\n")
      const remote = yield* remoteOf(kind)
      const ns = yield* poisoned(remote, ["mk"], "mk", (honest) => ({
        ...logsOf(honest),
        output_directory_symlinks: [{ path: "dir", target: victimDir }]
      }))
      const victim = yield* refusedThenReplaced(remote, ns, ["mk"], "mk", /output directory `dir` is a symlink/)
      assert.deepStrictEqual(fs.readdirSync(victimDir).sort(), ["d", "important.txt"])
      assert.strictEqual(fs.readFileSync(path.join(victimDir, "d", "x"), "utf8"), "keep\n")
      assert.isTrue(fs.lstatSync(path.join(victim.ws, "dir")).isDirectory())
      assert.strictEqual(fs.readFileSync(path.join(victim.ws, "dir/sub/h.txt"), "utf8"), "hello\n")
    }))

  it.scoped("an absolute output symlink (C2) is refused; the consumer never reads the secret", () =>
    Effect.gen(function*() {
      const secretDir = yield* tempDir("kiln-c2-secret-")
      const secret = path.join(secretDir, "victim-secret.txt")
      fs.writeFileSync(secret, "VICTIM-PRIVATE-KEY\n")
      const names = ["consumer"]
      const remote = yield* remoteOf(kind)
      const ns = yield* poisoned(remote, names, "producer", (honest) => ({
        ...logsOf(honest),
        output_file_symlinks: [{ path: "f.txt", target: secret }]
      }))
      const victim = yield* refusedThenReplaced(
        remote,
        ns,
        names,
        "producer",
        /output symlink `f\.txt` -> `.*` leads out/
      )
      assert.strictEqual(fs.readFileSync(path.join(victim.ws, "copy.txt"), "utf8"), "generated\n")
      assert.isTrue(fs.lstatSync(path.join(victim.ws, "f.txt")).isFile())
    }))

  it.scoped("a relative output symlink that climbs out of the working directory is refused", () =>
    Effect.gen(function*() {
      const remote = yield* remoteOf(kind)
      const ns = yield* poisoned(remote, ["consumer"], "producer", (honest) => ({
        ...logsOf(honest),
        output_file_symlinks: [{ path: "f.txt", target: "../../../../../etc/passwd" }]
      }))
      const victim = yield* refusedThenReplaced(remote, ns, ["consumer"], "producer", /output symlink `f\.txt`/)
      assert.strictEqual(fs.readFileSync(path.join(victim.ws, "copy.txt"), "utf8"), "generated\n")
    }))

  it.scoped("a Tree holding a symlink that leads out of the working directory is refused", () =>
    Effect.gen(function*() {
      // `d -> ..` stays inside; `y -> d/../..` normalizes to `dir` lexically, but resolves above the working directory.
      const sub: Directory.Directory = {
        files: [],
        directories: [],
        symlinks: [{ name: "d", target: ".." }, { name: "y", target: "d/../.." }]
      }
      const subDigest = Directory.digestOf(sub)
      const tree: Tree.Tree = {
        root: { files: [], directories: [{ name: "sub", digest: subDigest }], symlinks: [] },
        children: new Map([[subDigest.hash, sub]])
      }
      const remote = yield* remoteOf(kind)
      const ns = yield* poisoned(remote, ["mk"], "mk", (honest) => ({
        ...logsOf(honest),
        output_directories: [{ path: "dir", tree_digest: plantTree(remote, tree) }]
      }))
      const victim = yield* refusedThenReplaced(
        remote,
        ns,
        ["mk"],
        "mk",
        /output symlink `dir\/sub\/y` -> `d\/\.\.\/\.\.`/
      )
      assert.isFalse(fs.existsSync(path.join(victim.ws, "dir/sub/y")))
    }))

  it.scoped("a Tree 20,000 directories deep (M1) is refused, and the run succeeds", () =>
    Effect.gen(function*() {
      const remote = yield* remoteOf(kind)
      const ns = yield* poisoned(remote, ["mk"], "mk", (honest) => ({
        ...logsOf(honest),
        output_directories: [{ path: "dir", tree_digest: plantTree(remote, chain(20_000)) }]
      }))
      const victim = yield* refusedThenReplaced(
        remote,
        ns,
        ["mk"],
        "mk",
        /output directory `dir` holds entries 20002 levels deep, more than 2048/
      )
      assert.strictEqual(fs.readFileSync(path.join(victim.ws, "dir/sub/h.txt"), "utf8"), "hello\n")
    }))
})

describe("remote entries that hold", () => {
  it.scoped("a Tree just under the depth limit is used, and written back whole", () =>
    Effect.gen(function*() {
      // 2,000 levels of `d/` stay under PATH_MAX even below the test's temp directory.
      const depth = 2000
      const remote = yield* remoteOf("http")
      const ns = yield* poisoned(remote, ["mk"], "mk", (honest) => ({
        ...logsOf(honest),
        output_directories: [{ path: "dir", tree_digest: plantTree(remote, chain(depth)) }]
      }))
      const reader = yield* machine(ns, { extra })
      const r = yield* reader.run([...remote.flags, "mk"])
      assert.strictEqual(r.code, 0, r.stderr)
      assert.strictEqual(sources(r.summary).mk, "remote-cache", r.stderr)
      assert.notMatch(r.stderr, /unusable/)
      const leaf = path.join(reader.ws, "dir", ...Array.from({ length: depth }, () => "d"), "f")
      assert.strictEqual(fs.readFileSync(leaf, "utf8"), "")
    }))

  it.scoped("`outputSymlinks: any` takes an absolute symlink from the remote, under a key of its own", () =>
    Effect.gen(function*() {
      const remote = yield* remoteOf("grpc")
      const allowed = { ...extra, producer: { ...extra.producer, outputSymlinks: "any" } }
      const ns = yield* poisoned(remote, ["producer"], "producer", (honest) => ({
        ...logsOf(honest),
        output_file_symlinks: [{ path: "f.txt", target: "/etc/hostname" }]
      }), allowed)
      const reader = yield* machine(ns, { extra: allowed })
      const r = yield* reader.run([...remote.flags, "producer"])
      assert.strictEqual(r.code, 0, r.stderr)
      assert.strictEqual(sources(r.summary).producer, "remote-cache", r.stderr)
      assert.strictEqual(fs.readlinkSync(path.join(reader.ws, "f.txt")), "/etc/hostname")
      // The allowance is in the key: a `contained` process never looks that entry up.
      const strict = yield* machine(ns, { extra })
      const s = yield* strict.run([...remote.flags, "producer"])
      assert.strictEqual(s.code, 0, s.stderr)
      assert.notStrictEqual(actionOf(s.summary, "producer"), actionOf(r.summary, "producer"))
      assert.strictEqual(sources(s.summary).producer, "ran")
      assert.notMatch(s.stderr, /unusable/)
    }))
})
