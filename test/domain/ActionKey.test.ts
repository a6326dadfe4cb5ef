/**
 * The action key's platform properties, do_not_cache and exec root: what a remote executor matches workers by is in
 * the key, sorted, a process cached `never` says so in its Action, and where it runs is in the salt.
 */
import { assert, describe, it } from "@effect/vitest"
import { actionDigest, actionMessages } from "../../src/domain/ActionKey.js"
import * as Digest from "../../src/domain/Digest.js"
import { readFields } from "../../src/domain/internal/protobuf.js"
import { Process } from "../../src/domain/Process.js"

const base = { argv: ["true"] as [string], inputDigest: Digest.empty }

describe("ActionKey", () => {
  it("platform properties enter the key, in the Action and the Command, sorted by name", () => {
    const plain = new Process(base)
    const linux = new Process({ ...base, platform: { "container-image": "docker://x", OSFamily: "linux" } })
    const same = new Process({ ...base, platform: { OSFamily: "linux", "container-image": "docker://x" } })
    assert.notStrictEqual(actionDigest(linux).hash, actionDigest(plain).hash)
    assert.deepStrictEqual(actionDigest(linux), actionDigest(same))
    const { action, command } = actionMessages(linux)
    const platformOf = (bytes: Uint8Array, field: number) => {
      const f = readFields(bytes).find((x) => x.field === field)
      assert.isDefined(f)
      return readFields((f as { bytes: Uint8Array }).bytes).map((p) =>
        readFields((p as { bytes: Uint8Array }).bytes).map((x) =>
          Buffer.from((x as { bytes: Uint8Array }).bytes).toString()
        )
      )
    }
    const sorted = [["OSFamily", "linux"], ["container-image", "docker://x"]]
    assert.deepStrictEqual(platformOf(action, 10), sorted)
    assert.deepStrictEqual(platformOf(command, 5), sorted)
    // No properties: no platform field at all (an empty one would change every existing key).
    assert.isUndefined(readFields(actionMessages(plain).action).find((x) => x.field === 10))
  })

  it("a process cached `never` is do_not_cache; `remote: false` is not part of the key", () => {
    const never = new Process({ ...base, cache: "never" })
    assert.isDefined(readFields(actionMessages(never).action).find((x) => x.field === 7))
    assert.deepStrictEqual(actionDigest(new Process({ ...base, remote: false })), actionDigest(new Process(base)))
  })

  it("the exec root is in the salt; without one, the salt is what it was before there was one", () => {
    const plain = new Process(base)
    const pinned = new Process({ ...base, execRoot: "/mnt" })
    assert.notStrictEqual(actionDigest(pinned).hash, actionDigest(plain).hash)
    assert.deepStrictEqual(actionDigest(new Process({ ...base, execRoot: "/mnt" })), actionDigest(pinned))
    const saltOf = (proc: Process) =>
      Buffer.from(
        (readFields(actionMessages(proc).action).find((x) => x.field === 9) as { bytes: Uint8Array }).bytes
      ).toString()
    assert.strictEqual(saltOf(plain), `["kiln-action-cache-v1",[]]`)
    assert.strictEqual(saltOf(pinned), `["kiln-action-cache-v1",[],{"execRoot":"/mnt"}]`)
  })
})
