/**
 * kiln's own process fixes glibc's mmap and trim thresholds through its addon (src/os/native/Malloc.ts): the addon the build
 * makes must carry the call, and under glibc it must take.
 */
import { assert, describe, it } from "@effect/vitest"
import { libcOfSelf } from "../../src/os/Libc.js"
import * as NativeAddon from "../../src/os/native/Addon.js"
import * as Malloc from "../../src/os/native/Malloc.js"

describe("Malloc.fixThresholds", () => {
  it("is in the addon the build makes, and takes under glibc", () => {
    assert.strictEqual(typeof NativeAddon.exports()?.fixThresholds, "function", `built (${NativeAddon.ADDON_ENV})`)
    assert.strictEqual(Malloc.fixThresholds(), libcOfSelf() === "glibc")
  })
})
