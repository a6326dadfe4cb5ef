/**
 * A tmpfs mounted for a test (root only): the full-disk tests' small file systems (and an overlay, for the tree
 * watch's). It is mounted only at a directory inside the system's temp dir (never over anything a test did not make:
 * a test once chmodded /etc as root), and unmounted when the scope closes.
 */
import * as Effect from "effect/Effect"
import type * as Scope from "effect/Scope"
import { execFileSync, spawnSync } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"

/** Whether this process may mount (the tests that need a tmpfs skip otherwise). */
export const isRoot = process.getuid?.() === 0

/** Throws unless `dir` is strictly inside the system's temp dir (made here if missing). */
const insideTempDir = (dir: string): void => {
  fs.mkdirSync(dir, { recursive: true })
  const inside = path.relative(fs.realpathSync(os.tmpdir()), fs.realpathSync(dir))
  if (inside === "" || inside.startsWith("..") || path.isAbsolute(inside)) {
    throw new Error(`refusing to mount a tmpfs at ${dir}: not inside the system's temp dir`)
  }
}

/**
 * A tmpfs of `size` (`256k`, `4m`) at `dir`; `mode` its root's mode (e.g. `0700`: kiln refuses a root others can
 * write), `readOnly` mounted read-only.
 */
export const tmpfs = (
  dir: string,
  size: string,
  options: { readonly mode?: string; readonly readOnly?: boolean } = {}
): Effect.Effect<string, never, Scope.Scope> =>
  Effect.acquireRelease(
    Effect.sync(() => {
      insideTempDir(dir)
      const flags = [
        `size=${size}`,
        ...(options.mode ? [`mode=${options.mode}`] : []),
        ...(options.readOnly ? ["ro"] : [])
      ]
      execFileSync("mount", ["-t", "tmpfs", "-o", flags.join(","), "tmpfs", dir])
      return dir
    }),
    () => Effect.sync(() => unmount(dir))
  )

/**
 * An overlay at `dir` of `lower` (directories the test made, each inside the system's temp dir), with its upper and
 * work directories made beside `dir`: a file system whose lower layer changes without this kernel's VFS seeing the
 * change through the overlay's inodes.
 */
export const overlay = (dir: string, lower: string): Effect.Effect<string, never, Scope.Scope> =>
  Effect.acquireRelease(
    Effect.sync(() => {
      insideTempDir(dir)
      insideTempDir(lower)
      const upper = `${dir}.upper`
      const work = `${dir}.work`
      insideTempDir(upper)
      insideTempDir(work)
      execFileSync("mount", [
        "-t",
        "overlay",
        "overlay",
        "-o",
        `lowerdir=${lower},upperdir=${upper},workdir=${work}`,
        dir
      ])
      return dir
    }),
    () => Effect.sync(() => unmount(dir))
  )

/** Unmounts `dir`; when it is busy, the error names the processes holding it (a test that left one running). */
const unmount = (dir: string): void => {
  try {
    execFileSync("umount", [dir], { stdio: ["ignore", "ignore", "pipe"] })
  } catch (e) {
    const holders = spawnSync("fuser", ["-vm", dir], { encoding: "utf8" })
    const pids = `${holders.stdout ?? ""}`.trim().split(/\s+/).filter((p) => /^\d+$/.test(p))
    const commands = pids.map((pid) => {
      try {
        return `${pid}: ${fs.readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0").join(" ").trim()}`
      } catch {
        return `${pid}: (gone)`
      }
    })
    throw new Error(`cannot unmount ${dir}: ${String(e)}; held by: ${commands.join("; ") || "nothing fuser sees"}`)
  }
}
