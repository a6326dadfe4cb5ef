// Compiles the native spawner (src/programs/spawner/native/*.c) into one program: `<file> kiln-spawner <engine-pid>`. Used by
// scripts/bundle.mjs (dist/kiln-spawner-<platform>-<arch>) and by the tests' global setup. The compiler is the one
// kiln's install already uses for LMDB (scripts/patch-lmdb.mjs): `$CC`, or `cc`. Linked statically where the C
// library allows it: a package built on one machine then runs on another whatever its glibc's version.
import { spawnSync } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"
import { fileURLToPath } from "node:url"

const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..")
const sources = path.join(repo, "src/programs/spawner/native")

/**
 * Writes the program to `outfile` (through a rename: a test run or an engine may be starting the one there). Returns
 * undefined once built, or why it could not be (no compiler, a failed compile, with the compiler's first lines).
 */
export const buildNativeSpawner = (outfile) => {
  const cc = process.env.CC || "cc"
  const files = fs.readdirSync(sources).filter((f) => f.endsWith(".c")).sort().map((f) => path.join(sources, f))
  const tmp = `${outfile}.${process.pid}.tmp`
  const compile = (extra) =>
    spawnSync(cc, ["-O2", "-std=gnu11", "-Wall", "-Wextra", ...extra, "-o", tmp, ...files], { encoding: "utf8" })
  let r = compile(["-static"])
  // No static C library (a distribution that ships none): linked dynamically, for this machine's.
  if (r.error === undefined && r.status !== 0) r = compile([])
  if (r.error !== undefined) return `${cc}: ${r.error.message}`
  if (r.status !== 0) {
    fs.rmSync(tmp, { force: true })
    return `${cc} failed (exit ${r.status}): ${r.stderr.split("\n").slice(0, 5).join("\n")}`
  }
  if (r.stderr.trim() !== "") process.stderr.write(r.stderr)
  fs.renameSync(tmp, outfile)
  return undefined
}
