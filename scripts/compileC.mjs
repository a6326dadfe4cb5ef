// One C compile into `outfile`, for the native spawner (spawnerNative.mjs) and kiln's addon (nativeAddons.mjs): the
// compiler kiln's install already uses for LMDB (`$CC`, or `cc`), its output written to a temp name and renamed into
// place, since a test run or an engine may be starting the one there.
import { spawnSync } from "node:child_process"
import * as fs from "node:fs"

/**
 * Compiles with each argument list of `attempts` in turn (`-o` is added) until one succeeds: a failed compile tries
 * the next, a compiler that cannot run tries none. Returns undefined once built, or why it could not be (the
 * compiler's first lines).
 */
export const compileTo = (outfile, attempts) => {
  const cc = process.env.CC || "cc"
  const tmp = `${outfile}.${process.pid}.tmp`
  let r
  for (const args of attempts) {
    r = spawnSync(cc, [...args, "-o", tmp], { encoding: "utf8" })
    if (r.error !== undefined || r.status === 0) break
  }
  if (r.error !== undefined) return `${cc}: ${r.error.message}`
  if (r.status !== 0) {
    fs.rmSync(tmp, { force: true })
    return `${cc} failed (exit ${r.status}): ${r.stderr.split("\n").slice(0, 5).join("\n")}`
  }
  if (r.stderr.trim() !== "") process.stderr.write(r.stderr)
  fs.renameSync(tmp, outfile)
  return undefined
}
