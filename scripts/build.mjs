// Bundles the programs under scripts/ (type-checked by tsconfig.test.json, not compiled by tsc) into dist/:
// the benchmarks and the fault harness. Packages stay external: lmdb loads a native addon, and effect resolves
// from node_modules.
import { build } from "esbuild"
import * as path from "node:path"
import { fileURLToPath } from "node:url"

const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..")

// The programs: `npm run bench` (bench/bench) runs each benchmark's bundle in a process of its own; the modules they
// share (bench/report.ts, bench/kiln.ts) are bundled into each.
const programs = [
  "bench/bench",
  "bench/store",
  "bench/runner",
  "bench/noop",
  "bench/cold",
  "bench/scale",
  "bench/trees",
  "bench/remote",
  "bench/remoteFloor",
  "bench/peers",
  "bench/monorepo",
  "bench/ab",
  "chaos/chaos"
]

for (const name of programs) {
  await build({
    entryPoints: [path.join(repo, `scripts/${name}.ts`)],
    outfile: path.join(repo, `dist/${name}.mjs`),
    bundle: true,
    platform: "node",
    format: "esm",
    target: "node20",
    packages: "external",
    sourcemap: "linked",
    logLevel: "warning"
  })
}
