/** The libc probe on this machine's own Node (Debian in CI: glibc), checked against what `ldd` says. */
import { assert, describe, it } from "@effect/vitest"
import { spawnSync } from "node:child_process"
import { libcOfSelf } from "../../src/os/Libc.js"

describe("libcOfSelf", () => {
  it("names the C library ldd finds for this Node", () => {
    const ldd = spawnSync("ldd", [process.execPath], { encoding: "utf8" })
    const expected = `${ldd.stdout}${ldd.stderr}`.includes("musl") ? "musl" : "glibc"
    assert.strictEqual(libcOfSelf(), expected)
  })
})
