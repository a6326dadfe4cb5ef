// Builds the `kiln` executable: the CLI bundled into one CommonJS file (dist/kiln.cjs), and dist/cli.js, a loader
// that compiles it with a V8 code cache made at build time. Node 20 has no module compile cache, and parsing the
// ~1 MB bundle cost more than Node's own start-up (46 ms of a 170 ms `--version`); with the cache it is a few ms.
// lmdb stays external: it loads a native addon.
import { build } from "esbuild"
import { execFileSync } from "node:child_process"
import { rmSync } from "node:fs"

await build({
  entryPoints: ["src/programs/main.ts"],
  outfile: "dist/kiln.cjs",
  bundle: true,
  platform: "node",
  format: "cjs",
  target: "node20",
  external: ["lmdb"],
  // The bundle runs in a vm.Script, which has no ESM loader: `import("lmdb")` becomes a lazy require.
  supported: { "dynamic-import": false },
  // The library finds the CLI through import.meta.url; the bundled CLI sets KILN_CLI instead, so empty is right.
  logOverride: { "empty-import-meta": "silent" },
  // KILN_NO_MINIFY=1 keeps names, for readable CPU profiles (`node --cpu-prof dist/cli.js …`).
  minify: process.env.KILN_NO_MINIFY !== "1",
  keepNames: false,
  treeShaking: true,
  sourcemap: "linked",
  legalComments: "none",
  logLevel: "warning"
})

await build({
  entryPoints: ["src/programs/loader.ts"],
  outfile: "dist/cli.js",
  bundle: true,
  platform: "node",
  format: "esm",
  target: "node20",
  minify: true,
  banner: { js: "#!/usr/bin/env node" },
  logLevel: "warning"
})

rmSync("dist/kiln.cjs.cache", { force: true })
// Run it once so that the cache covers the functions start-up really compiles, not only the top level.
execFileSync(process.execPath, ["dist/cli.js", "--version"], {
  env: { ...process.env, KILN_WRITE_CODE_CACHE: "1" },
  stdio: "ignore"
})
