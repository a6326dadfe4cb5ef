// Bundles the benchmarks (scripts/ is type-checked by tsconfig.test.json but not compiled by tsc) into
// dist/bench/<name>.mjs. Packages stay external: lmdb loads a native addon, and effect resolves from node_modules.
import { build } from "esbuild"

for (const name of ["store", "runner"]) {
  await build({
    entryPoints: [`scripts/bench/${name}.ts`],
    outfile: `dist/bench/${name}.mjs`,
    bundle: true,
    platform: "node",
    format: "esm",
    target: "node20",
    packages: "external",
    sourcemap: "linked",
    logLevel: "warning"
  })
}
