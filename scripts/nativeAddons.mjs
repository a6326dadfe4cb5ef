// Compiles kiln's N-API addon (src/os/native/lstatMany.c: many `lstat`s at once, see src/os/StatMany.ts;
// treeWatch.c: a tree's inotify watch, see src/os/native/TreeWatch.ts; hashFiles.c: a fresh tree's files hashed on
// every CPU, see src/os/native/HashFiles.ts) into `<outfile>`
// (`dist/kiln-lstat-<platform>-<arch>.node`). Used by scripts/bundle.mjs and by the tests' global setup. The
// compiler is the one kiln's install already uses (`$CC`, or `cc`), with the N-API headers Node's own install carries
// (`<prefix>/include/node`, as lmdb's build uses them). Without either kiln still works: StatMany.ts falls back on
// Node's lstat.
import * as fs from "node:fs"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { compileTo } from "./compileC.mjs"

const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..")
const sources = ["lstatMany.c", "treeWatch.c", "hashFiles.c"].map((name) => path.join(repo, "src/os/native", name))

/** Node's headers: beside its executable in official builds and Debian's package, or where npm_config_nodedir says. */
const nodeHeaders = () =>
  [
    process.env.npm_config_nodedir && path.join(process.env.npm_config_nodedir, "include", "node"),
    path.join(path.dirname(process.execPath), "..", "include", "node")
  ]
    .find((dir) => dir && fs.existsSync(path.join(dir, "node_api.h")))

/**
 * Writes the addon to `outfile` (through a rename: a run may be loading the one there). Returns undefined once built,
 * or why it could not be (no headers, no compiler, a failed compile with the compiler's first lines).
 */
export const buildLstatAddon = (outfile) => {
  const headers = nodeHeaders()
  if (headers === undefined) return `no node_api.h beside ${process.execPath} (set npm_config_nodedir)`
  // No contraction into fused multiply-adds: nothing the addon computes may round differently from Node.
  return compileTo(outfile, [[
    "-O2",
    "-std=gnu11",
    "-Wall",
    "-Wextra",
    "-ffp-contract=off",
    "-shared",
    "-fPIC",
    "-pthread",
    `-I${headers}`,
    ...sources
  ]])
}
