/**
 * Outputs handed from a sandbox to write-back by rename: what is taken is exactly what a fresh write would have
 * made, and anything else is refused, leaving nothing behind.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"
import * as Digest from "../../src/domain/Digest.js"
import * as Handoff from "../../src/layers/sandbox/internal/handoff.js"
import * as SandboxDir from "../../src/layers/sandbox/internal/sandboxDir.js"
import * as Proc from "../../src/os/Proc.js"
import { tempDir } from "../utils/temp.js"

const setUp = Effect.gen(function*() {
  const root = yield* tempDir("kiln-handoff-")
  const sandboxes = path.join(root, "sandboxes")
  const sandbox = path.join(sandboxes, "a-sandbox")
  const workspace = path.join(root, "workspace")
  fs.mkdirSync(sandbox, { recursive: true })
  fs.mkdirSync(workspace)
  const owner = Proc.self()
  const handoff = Handoff.make(sandboxes, owner)
  yield* Effect.addFinalizer(() => Effect.sync(() => handoff.close()))
  /** A file the process made in its sandbox, and its digest. */
  const made = (name: string, content: string, mode = 0o600) => {
    const abs = path.join(sandbox, name)
    fs.writeFileSync(abs, content, { mode })
    return { abs, digest: Digest.ofBytes(Buffer.from(content)) }
  }
  return { sandboxes, sandbox, workspace, owner, handoff, made }
})

describe("Handoff", () => {
  it.scoped("a taken file is renamed into place with a fresh write's mode, and leaves the sandbox", () =>
    Effect.gen(function*() {
      const { handoff, made, workspace } = yield* setUp
      const out = made("out.txt", "bytes of the output\n")
      const ino = fs.statSync(out.abs).ino
      handoff.offer(out.abs, out.digest)
      assert.isFalse(fs.existsSync(out.abs))
      assert.strictEqual(handoff.held(), 1)
      const dest = path.join(workspace, ".out.txt.tmp")
      assert.isTrue(handoff.take(out.digest, dest, 0o755))
      const st = fs.statSync(dest)
      assert.strictEqual(st.ino, ino, "renamed, not copied")
      assert.strictEqual(st.mode & 0o7777, 0o755 & ~process.umask())
      assert.strictEqual(fs.readFileSync(dest, "utf8"), "bytes of the output\n")
      assert.strictEqual(handoff.held(), 0)
      // Taken once: the next writer of the same bytes writes them.
      assert.isFalse(handoff.take(out.digest, path.join(workspace, "again"), 0o644))
      assert.isFalse(fs.existsSync(path.join(workspace, "again")))
    }))

  it.scoped("bytes nobody offered are not there to take", () =>
    Effect.gen(function*() {
      const { handoff, workspace } = yield* setUp
      const dest = path.join(workspace, "x")
      assert.isFalse(handoff.take(Digest.ofBytes(Buffer.from("never made")), dest, 0o644))
      assert.isFalse(fs.existsSync(dest))
    }))

  it.scoped("a file written to after it was captured is refused, and nothing is left at the destination", () =>
    Effect.gen(function*() {
      const { handoff, made, workspace } = yield* setUp
      const out = made("out.txt", "captured bytes\n")
      // A straggler that escaped the process group still holds the file open.
      const fd = fs.openSync(out.abs, "r+")
      handoff.offer(out.abs, out.digest)
      fs.writeSync(fd, "CHANGED", 0)
      fs.closeSync(fd)
      const dest = path.join(workspace, "out.tmp")
      assert.isFalse(handoff.take(out.digest, dest, 0o644))
      assert.isFalse(fs.existsSync(dest))
    }))

  it.scoped("a file with another link (the process linked it elsewhere) is refused", () =>
    Effect.gen(function*() {
      const { handoff, made, sandbox, workspace } = yield* setUp
      const out = made("out.txt", "linked\n")
      fs.linkSync(out.abs, path.join(sandbox, "elsewhere"))
      handoff.offer(out.abs, out.digest)
      const dest = path.join(workspace, "out.tmp")
      assert.isFalse(handoff.take(out.digest, dest, 0o644))
      assert.isFalse(fs.existsSync(dest))
      assert.strictEqual(fs.readFileSync(path.join(sandbox, "elsewhere"), "utf8"), "linked\n")
    }))

  it.scoped("large files are not offered: writing them costs their bytes, not a new inode", () =>
    Effect.gen(function*() {
      const { handoff, made } = yield* setUp
      const out = made("big.bin", "x".repeat(600 * 1024))
      handoff.offer(out.abs, out.digest)
      assert.isTrue(fs.existsSync(out.abs))
      assert.strictEqual(handoff.held(), 0)
    }))

  it.scoped("what nobody took goes at close, in a directory named for its owner (so sweeps take it if it dies)", () =>
    Effect.gen(function*() {
      const { handoff, made, owner, sandboxes } = yield* setUp
      const a = made("a.txt", "a\n")
      const b = made("b.txt", "b\n")
      handoff.offer(a.abs, a.digest)
      handoff.offer(b.abs, b.digest)
      const dir = handoff.directory()!
      assert.strictEqual(path.dirname(dir), sandboxes)
      assert.deepStrictEqual(SandboxDir.ownerOfName(path.basename(dir)), owner)
      assert.strictEqual(fs.readdirSync(dir).length, 2)
      handoff.close()
      assert.isFalse(fs.existsSync(dir))
      assert.deepStrictEqual(fs.readdirSync(sandboxes), ["a-sandbox"])
    }))
})
