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

const mountsChanged = (fd: number): unknown => {
  const changed = NativeAddon.exports()?.mountsChanged
  assert.strictEqual(typeof changed, "function", `built (${NativeAddon.ADDON_ENV})`)
  return (changed as (fd: number) => unknown)(fd)
}

/** An open /proc/self/mountinfo, closed with the scope. */
const mountTable = Effect.acquireRelease(
  Effect.sync(() => fs.openSync("/proc/self/mountinfo", "r")),
  (fd) => Effect.sync(() => fs.closeSync(fd))
)

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
  it.scoped("unchanged reads as unchanged; a descriptor that is not open reads as changed", () =>
    Effect.gen(function*() {
      const fd = yield* mountTable
      assert.strictEqual(mountsChanged(fd), false)
      assert.strictEqual(mountsChanged(fd), false)
      assert.strictEqual(mountsChanged(-1), true)
    }))

  // Mounting takes root (as CI runs); elsewhere the test is skipped, and says so.
  it.scoped.skipIf(process.getuid?.() !== 0)(
    "a mount and an unmount each read as one change, and mountUnder follows",
    () =>
      Effect.gen(function*() {
        const fd = yield* mountTable
        const dir = yield* tempDir()
        const source = yield* tempDir()
        const at = path.join(dir, "m")
        fs.mkdirSync(at)
        assert.isUndefined(Mounts.mountUnder(dir))
        assert.isUndefined(Mounts.mountUnder(dir))
        assert.strictEqual(mountsChanged(fd), false)
        const mount = yield* bindMount(source, at)
        assert.strictEqual(mountsChanged(fd), true)
        assert.strictEqual(mountsChanged(fd), false)
        assert.strictEqual(Mounts.mountUnder(dir), at)
        assert.strictEqual(Mounts.mountUnder(dir), at)
        assert.isTrue(mount.unmount())
        assert.strictEqual(mountsChanged(fd), true)
        assert.isUndefined(Mounts.mountUnder(dir))
      })
  )
})
