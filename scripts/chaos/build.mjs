// Bundles the fault harness (scripts/ is type-checked by tsconfig.test.json but not compiled by tsc) into
// dist/chaos/chaos.mjs. Packages stay external: lmdb loads a native addon.
import { build } from "esbuild"
import * as path from "node:path"
import { fileURLToPath } from "node:url"

const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..", "..")

await build({
  entryPoints: [path.join(repo, "scripts/chaos/chaos.ts")],
  outfile: path.join(repo, "dist/chaos/chaos.mjs"),
  bundle: true,
  platform: "node",
  format: "esm",
  target: "node20",
  packages: "external",
  sourcemap: "linked",
  logLevel: "warning"
})
