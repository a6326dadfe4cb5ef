/**
 * REAPI golden digests (../shared/reference/golden-digests.md), cross-checked against Bazel 4.2.3's Java encoder and
 * Python protobuf. A mismatch here is a kiln bug, never a vector to update.
 */
import { assert, describe, it } from "@effect/vitest"
import { Either } from "effect"
import * as Action from "../../src/domain/Action.js"
import * as Digest from "../../src/domain/Digest.js"
import * as Directory from "../../src/domain/Directory.js"
import { Golden } from "../fixtures/golden.js"

const dir = (entries: Parameters<typeof Directory.make>[0]) => Either.getOrThrow(Directory.make(entries))

describe("golden digests", () => {
  it("blobs", () => {
    assert.strictEqual(Digest.format(Digest.ofBytes(Buffer.from("some input text\n"))), Golden.inTxt)
    assert.strictEqual(Digest.format(Digest.ofBytes(Buffer.from("echo hi\n"))), Golden.aSh)
  })

  it("V1: the empty directory is the empty digest", () => {
    assert.strictEqual(Directory.encode(Directory.empty).length, 0)
    assert.strictEqual(Digest.format(Directory.digestOf(Directory.empty)), Golden.v1)
    assert.strictEqual(Digest.format(Digest.empty), Golden.v1)
  })

  it("V2 and V3: a file, then the same file executable", () => {
    const inTxt = Digest.ofBytes(Buffer.from("some input text\n"))
    const v2 = dir({ files: [{ name: "in.txt", digest: inTxt, isExecutable: false }] })
    assert.strictEqual(Digest.format(Directory.digestOf(v2)), Golden.v2)
    const v3 = dir({ files: [{ name: "in.txt", digest: inTxt, isExecutable: true }] })
    assert.strictEqual(Digest.format(Directory.digestOf(v3)), Golden.v3)
  })

  it("V4: file, directory and symlink", () => {
    assert.strictEqual(Digest.format(Directory.digestOf(Golden.v4Directory())), Golden.v4)
  })

  it("CMD and ACT", () => {
    const command = Action.encodeCommand({
      arguments: ["/bin/sh", "-c", "cat src/in.txt > out.txt"],
      environmentVariables: { PATH: "/usr/bin:/bin" },
      outputFiles: ["out.txt"]
    })
    const cmd = Digest.ofBytes(command)
    assert.strictEqual(Digest.format(cmd), Golden.cmd)
    const action = Action.encodeAction({
      commandDigest: cmd,
      inputRootDigest: Directory.digestOf(Golden.v4Directory())
    })
    assert.strictEqual(Digest.format(Digest.ofBytes(action)), Golden.act)
  })

  it("decoding V4's bytes gives V4 back", () => {
    const bytes = Directory.encode(Golden.v4Directory())
    assert.deepStrictEqual(Either.getOrThrow(Directory.decode(bytes)), Golden.v4Directory())
  })
})
