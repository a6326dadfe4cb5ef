// Bundles the store benchmark (scripts/ is type-checked by tsconfig.test.json but not compiled by tsc) into
// dist/bench/store.mjs. Packages stay external: lmdb loads a native addon, and effect resolves from node_modules.
import { build } from "esbuild"

await build({
  entryPoints: ["scripts/bench/store.ts"],
  outfile: "dist/bench/store.mjs",
  bundle: true,
  platform: "node",
  format: "esm",
  target: "node20",
  packages: "external",
  sourcemap: "linked",
  logLevel: "warning"
})
