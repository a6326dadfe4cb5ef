// Compiles the native spawner (src/programs/spawner/native/*.c) into one program: `<file> kiln-spawner <engine-pid>`. Used by
// scripts/bundle.mjs (dist/kiln-spawner-<platform>-<arch>) and by the tests' global setup. The compiler is the one
// kiln's install already uses for LMDB (scripts/patch-lmdb.mjs): `$CC`, or `cc`. Linked statically where the C
// library allows it: a package built on one machine then runs on another whatever its glibc's version.
import * as fs from "node:fs"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { compileTo } from "./compileC.mjs"

const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..")
const sources = path.join(repo, "src/programs/spawner/native")

/**
 * Writes the program to `outfile` (through a rename: a test run or an engine may be starting the one there). Returns
 * undefined once built, or why it could not be (no compiler, a failed compile, with the compiler's first lines).
 */
export const buildNativeSpawner = (outfile) => {
  const files = fs.readdirSync(sources).filter((f) => f.endsWith(".c")).sort().map((f) => path.join(sources, f))
  const flags = ["-O2", "-std=gnu11", "-Wall", "-Wextra"]
  // No static C library (a distribution that ships none): linked dynamically, for this machine's.
  return compileTo(outfile, [[...flags, "-static", ...files], [...flags, ...files]])
}
