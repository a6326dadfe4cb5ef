/**
 * The mount table is read again only when the kernel says it changed (src/os/mounts/Mounts.ts, through kiln's addon):
 * the addon the build makes must carry the call, say "unchanged" for a table nobody touched, and "changed" once after
 * each mount and unmount; and `mountUnder` must follow mounts made and removed between its calls.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { spawnSync } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import * as Mounts from "../../src/os/mounts/Mounts.js"
import * as NativeAddon from "../../src/os/native/Addon.js"
import { tempDir } from "../utils/temp.js"

const isRoot = process.getuid?.() === 0

const mountsChanged = (fd: number): unknown => {
  const changed = NativeAddon.exports()?.mountsChanged
  assert.strictEqual(typeof changed, "function", `built (${NativeAddon.ADDON_ENV})`)
  return (changed as (fd: number) => unknown)(fd)
}

/**
 * What the addon answers, in a mount namespace of its own (so that no other test's mount lands between two answers),
 * before and after a tmpfs is mounted at `at` and unmounted: twice untouched, twice after the mount, once after the
 * unmount.
 */
const answersInOwnNamespace = `
const m = { exports: {} }
process.dlopen(m, process.env.${NativeAddon.ADDON_ENV})
const fs = require("node:fs"), { execFileSync } = require("node:child_process")
const at = process.argv[1]
const fd = fs.openSync("/proc/self/mountinfo", "r")
const seen = [m.exports.mountsChanged(fd), m.exports.mountsChanged(fd)]
execFileSync("mount", ["-t", "tmpfs", "kiln-test", at])
seen.push(m.exports.mountsChanged(fd), m.exports.mountsChanged(fd))
execFileSync("umount", [at])
seen.push(m.exports.mountsChanged(fd))
console.log(JSON.stringify(seen))
`

/** `source` bind-mounted at `at` (both in this test's temp dirs), unmounted with the scope if it still is. */
const bindMount = (source: string, at: string) => {
  // Never outside the test's own temp dirs.
  assert.isTrue(at.startsWith(os.tmpdir() + path.sep), at)
  return Effect.acquireRelease(
    Effect.sync(() => {
      const mounted = spawnSync("mount", ["--bind", source, at], { encoding: "utf8" })
      assert.strictEqual(mounted.status, 0, `mount --bind failed: ${mounted.stderr}`)
      return { unmount: () => spawnSync("umount", [at], { encoding: "utf8" }).status === 0 }
    }),
    () => Effect.sync(() => void spawnSync("umount", [at]))
  )
}

describe("the mount table", () => {
  it("the addon carries the call; no descriptor reads as changed", () => {
    assert.strictEqual(mountsChanged(-1), true)
  })

  // Mounting takes root (as CI runs); elsewhere these are skipped, and say so.
  it.scoped.skipIf(!isRoot)(
    "untouched it reads as unchanged; a mount and an unmount each read as one change",
    () =>
      Effect.gen(function*() {
        const at = yield* tempDir()
        const addon = process.env[NativeAddon.ADDON_ENV]
        assert.isTrue(addon !== undefined && fs.existsSync(addon), `built (${NativeAddon.ADDON_ENV})`)
        // A private mount namespace: neither the tmpfs nor its unmount is seen outside the child.
        const child = spawnSync(
          "unshare",
          ["--mount", "--propagation", "private", process.execPath, "-e", answersInOwnNamespace, at],
          { encoding: "utf8" }
        )
        assert.strictEqual(child.status, 0, child.stderr)
        assert.deepStrictEqual(JSON.parse(child.stdout), [false, false, true, false, true])
      })
  )

  it.scoped.skipIf(!isRoot)(
    "mountUnder follows a mount made and removed between its calls",
    () =>
      Effect.gen(function*() {
        const dir = yield* tempDir()
        const source = yield* tempDir()
        const at = path.join(dir, "m")
        fs.mkdirSync(at)
        assert.isUndefined(Mounts.mountUnder(dir))
        assert.isUndefined(Mounts.mountUnder(dir))
        const mount = yield* bindMount(source, at)
        assert.strictEqual(Mounts.mountUnder(dir), at)
        assert.strictEqual(Mounts.mountUnder(dir), at)
        assert.isTrue(mount.unmount())
        assert.isUndefined(Mounts.mountUnder(dir))
      })
  )
})
