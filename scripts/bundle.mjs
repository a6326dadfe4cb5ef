// Builds the `kiln` executable: the CLI bundled into one CommonJS file (dist/kiln.cjs), and dist/cli.cjs (which
// dist/cli.js links to), a loader that compiles it with a V8 code cache made at build time. Node 20 has no module
// compile cache, and parsing the ~1 MB bundle cost more than Node's own start-up (46 ms of a 170 ms `--version`); with
// the cache it is a few ms.
// The cache is written by a real `kiln run` (an edit of a small workspace, in a temp dir), so that it holds the
// functions a run compiles, not only those of start-up.
// lmdb stays external: it loads a native addon.
import { build } from "esbuild"
import { execFileSync } from "node:child_process"
import { createHash } from "node:crypto"
import {
  chmodSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync
} from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { buildNativeClient } from "./clientNative.mjs"
import { buildLstatAddon } from "./nativeAddons.mjs"
import { shellFallback } from "./nativeCommand.mjs"
import { bundleSpawner } from "./spawnerBundle.mjs"
import { buildNativeSpawner } from "./spawnerNative.mjs"
import { unusedProtoLoader, vendorLibraryDependencies } from "./vendor.mjs"

// The library's build (tsc's dist/) with the two dependencies it uses a small part of vendored (see vendor.mjs).
await vendorLibraryDependencies()

// jsonc-parser's main is a UMD build whose own requires esbuild cannot follow (the bundle would require
// `./impl/format` at run time); its ES module build bundles, and tree-shakes to the parser kiln uses.
const alias = { "jsonc-parser": "jsonc-parser/lib/esm/main.js" }

const sharedBuiltinNamespaces = {
  // Each `import * as fs from "node:fs"` became its own `__toESM(require("node:fs"))`: a fresh namespace object
  // with a getter defined for every export (fs has ~100), made again in each of the 70-odd modules that import a
  // built-in (11-20 ms of a profiled `kiln --version`). Every import of a built-in now goes through one ES module
  // that re-exports it, so its namespace is made once (2-3 ms).
  name: "shared-builtin-namespaces",
  setup(b) {
    const builtin = /^node:[a-z_/]+$/
    b.onResolve({ filter: builtin }, (args) =>
      args.namespace === "builtin-ns"
        ? { path: args.path, external: true }
        : { path: args.path, namespace: "builtin-ns" })
    b.onLoad({ filter: /.*/, namespace: "builtin-ns" }, (args) => ({
      contents: `export * from ${JSON.stringify(args.path)}\nexport { default } from ${JSON.stringify(args.path)}\n`,
      loader: "js"
    }))
  }
}

await build({
  entryPoints: ["src/programs/kiln/main.ts"],
  outfile: "dist/kiln.cjs",
  bundle: true,
  platform: "node",
  format: "cjs",
  target: "node20",
  external: ["lmdb"],
  alias,
  // Two packages the bundle carries but never runs, replaced by empty modules: fast-check (with pure-rand), which
  // effect's Schema imports for arbitraries, and ws, which @effect/platform-node imports for WebSockets (kiln's
  // sockets are Unix sockets through `net`). Evaluating them cost about 4 ms of every start (`kiln --version`, CPU
  // time, 20 interleaved runs each) and they were a tenth of the bundle.
  plugins: [
    {
      name: "unused-packages",
      setup(b) {
        b.onResolve({ filter: /^(fast-check|ws)$/ }, (args) => ({ path: args.path, namespace: "unused" }))
        b.onLoad({ filter: /.*/, namespace: "unused" }, () => ({ contents: "export {}", loader: "js" }))
      }
    },
    unusedProtoLoader,
    sharedBuiltinNamespaces
  ],
  // The bundle runs in a vm.Script, which has no ESM loader: `import("lmdb")` becomes a lazy require.
  supported: { "dynamic-import": false },
  // The library finds the CLI through import.meta.url; the bundled CLI sets KILN_CLI instead, so empty is right.
  logOverride: { "empty-import-meta": "silent" },
  // KILN_NO_MINIFY=1 keeps names, for readable CPU profiles (`node --cpu-prof dist/cli.js …`).
  minify: process.env.KILN_NO_MINIFY !== "1",
  keepNames: false,
  treeShaking: true,
  // The map stays beside the bundle for profiles (`dist/kiln.cjs.map`), unlinked: the package does not ship it.
  sourcemap: "external",
  legalComments: "none",
  logLevel: "warning"
})

// The spawner, its own small program (`node dist/spawner.cjs kiln-spawner <engine-pid>`): every engine starts one.
await bundleSpawner("dist/spawner.cjs", { minify: process.env.KILN_NO_MINIFY !== "1" })
// And the same program in C (`dist/kiln-spawner-<platform>-<arch>`, the name src/layers/spawner/Warm.ts looks for), which
// engines start instead when it is there: no Node start and 40 MB less per run. Without a C compiler, kiln runs on
// the Node one, and says why here.
{
  const native = `dist/kiln-spawner-${process.platform}-${process.arch}`
  const why = buildNativeSpawner(native)
  if (why !== undefined) {
    rmSync(native, { force: true })
    process.stderr.write(`bundle: the native spawner was not built, kiln will use dist/spawner.cjs: ${why}\n`)
  }
}

// And the addon that stats a large tree's paths at once (`dist/kiln-lstat-<platform>-<arch>.node`, the name
// src/os/StatMany.ts looks for). Without it kiln stats them one after another through Node, and says why here.
{
  const addon = `dist/kiln-lstat-${process.platform}-${process.arch}.node`
  const why = buildLstatAddon(addon)
  if (why !== undefined) {
    rmSync(addon, { force: true })
    process.stderr.write(`bundle: the lstat addon was not built, kiln will stat through Node: ${why}\n`)
  }
}

// The `kiln` command (package.json's bin), in C: it hands a `kiln run` to the standby engine waiting for it without
// starting Node, whose start is most of a no-op run, and runs `node dist/cli.cjs` for all else. Without a C
// compiler, a shell script that always does the latter.
{
  const why = buildNativeClient("dist/kiln")
  if (why !== undefined) {
    writeFileSync("dist/kiln", shellFallback, { mode: 0o755 })
    process.stderr.write(`bundle: the native kiln command was not built, dist/kiln runs Node every time: ${why}\n`)
  }
}

// The loader is CommonJS, as dist/cli.cjs, and dist/cli.js a symlink to it: Node takes a main module's format from its
// real path, and going through its ES module loader (this package is "type": "module") cost every run ~10 ms.
const loader = await build({
  entryPoints: ["src/programs/kiln/loader.ts"],
  outfile: "dist/cli.cjs",
  bundle: true,
  platform: "node",
  format: "cjs",
  target: "node20",
  minify: process.env.KILN_NO_MINIFY !== "1",
  banner: { js: "#!/usr/bin/env node" },
  alias,
  // The loader's own modules import fs and path too (the no-op check: 2-3 ms of a no-op's start).
  plugins: [sharedBuiltinNamespaces],
  // Its `import.meta.url` is for the library's (ESM) build of the file; this one knows `__dirname`.
  logOverride: { "empty-import-meta": "silent" },
  logLevel: "warning",
  metafile: true
})
// The loader runs the no-op check before anything else loads: a module of src/ it reaches that imports Effect (or any
// package) would put it into every run's start-up. The build fails instead, naming what came in.
const loaderForeign = Object.entries(loader.metafile.outputs["dist/cli.cjs"].inputs)
  // jsonc-parser is the one package it may load: the check reads kiln.json as JSONC (a few kB, no dependencies).
  .filter(([file, { bytesInOutput }]) =>
    bytesInOutput > 0 && file.includes("node_modules/") && !file.includes("node_modules/jsonc-parser/")
  )
  .map(([file]) => file)
if (loaderForeign.length > 0) {
  throw new Error(`bundle: dist/cli.cjs (the loader) would load packages: ${loaderForeign.slice(0, 5).join(", ")}`)
}
// V8 keeps a script's source for as long as the process lives (to compile functions lazily), and holds all of it in
// two bytes a character when one character is above U+00FF: one regular expression's typographic quotes cost every
// kiln process 1.4 MB. esbuild escapes such characters in strings, not in regular expressions, so the build refuses
// any character outside ASCII in the two scripts, naming where it is: write it as an escape (`\u2018`).
for (const file of ["dist/kiln.cjs", "dist/cli.cjs"]) {
  const bytes = readFileSync(file)
  const at = bytes.findIndex((b) => b > 0x7f)
  if (at >= 0) {
    const near = bytes.subarray(Math.max(0, at - 40), at + 20).toString("utf8")
    throw new Error(`bundle: ${file} has a character outside ASCII at byte ${at}, in ${JSON.stringify(near)}`)
  }
}
// The build's id: what a standby's key names the build by (src/programs/kiln/standby/protocol.ts, `keyOf`), so that a
// standby of another build is never asked, whatever size and times the files of the next one have.
const buildId = createHash("sha256")
for (const file of ["dist/kiln.cjs", "dist/cli.cjs"]) buildId.update(readFileSync(file))
writeFileSync("dist/build-id", `${buildId.digest("hex")}\n`)
rmSync("dist/cli.js", { force: true })
symlinkSync("cli.cjs", "dist/cli.js")
chmodSync("dist/cli.cjs", 0o755)

rmSync("dist/kiln.cjs.cache", { force: true })
rmSync("dist/deps.cache", { force: true })
const train = mkdtempSync(path.join(os.tmpdir(), "kiln-build-"))
try {
  const ws = path.join(train, "ws")
  const sh = (name, script, extra = {}) => ({
    argv: ["/bin/sh", "-c", script],
    inputs: [`${name}/*.txt`],
    outputs: [`out/${name}.txt`],
    env: { PATH: "/usr/bin:/bin" },
    ...extra
  })
  const processes = {
    a: sh("a", "cat a/*.txt > out/a.txt"),
    b: sh("b", "cat b/*.txt > out/b.txt"),
    c: sh("c", "cat c/*.txt out/a.txt > out/c.txt", { deps: ["a"] })
  }
  for (const name of Object.keys(processes)) {
    mkdirSync(path.join(ws, name), { recursive: true })
    writeFileSync(path.join(ws, name, "f.txt"), `${name}\n`)
  }
  writeFileSync(path.join(ws, "kiln.json"), JSON.stringify({ processes }))
  const run = (env) =>
    execFileSync(process.execPath, [
      path.resolve("dist/cli.js"),
      "run",
      "--store-dir",
      path.join(train, "store"),
      "--named-caches-dir",
      path.join(train, "named"),
      "--sandbox-root",
      path.join(train, "sandboxes"),
      "--progress",
      "none"
    ], {
      cwd: ws,
      // No standby engine after it (a user's session would start one): it would wait on a workspace removed below.
      env: { ...process.env, KILN_STANDBY: "off", ...env },
      stdio: "ignore"
    })
  run({})
  // One leaf edited: the run a developer makes most, through the engine (the no-op check falls through).
  writeFileSync(path.join(ws, "b", "f.txt"), "b, edited\n")
  run({ KILN_WRITE_CODE_CACHE: "1" })
  // Without them kiln still runs, only 100 ms slower to start: a build that lost them must say so.
  for (const cache of ["dist/kiln.cjs.cache", "dist/deps.cache"]) {
    if (!existsSync(cache)) throw new Error(`bundle: the training run wrote no ${cache}`)
  }
} finally {
  rmSync(train, { recursive: true, force: true })
}
