// The library's build (dist/, from tsc) imports two packages for a small part of each, whose other parts bring
// dependencies kiln never runs: @grpc/grpc-js, whose channelz and ORCA services load @grpc/proto-loader (and with
// it protobufjs 7, beside kiln's protobufjs 8), and @effect/platform-node, of which kiln's library uses NodeSocket
// only (its platform-node-shared brings the native file watcher @parcel/watcher). Each is bundled here into
// dist/vendor/ (esbuild; effect and @effect/platform stay the user's), the unused loader replaced by a module that
// throws, and the library's imports of them point there. So the package needs neither installed: they are
// devDependencies, and an install of kiln holds one protobufjs and no file watcher. The CLI's own bundle
// (bundle.mjs) leaves @grpc/proto-loader out the same way.
import { build } from "esbuild"
import * as fs from "node:fs"
import { createRequire } from "node:module"
import * as path from "node:path"
import { pathToFileURL } from "node:url"

/** A module for a package the bundle carries code for but never loads: loading it anyway says so. */
export const unusedProtoLoader = {
  name: "unused-proto-loader",
  setup(b) {
    b.onResolve({ filter: /^@grpc\/proto-loader$/ }, (args) => ({ path: args.path, namespace: "unused-proto-loader" }))
    b.onLoad({ filter: /.*/, namespace: "unused-proto-loader" }, () => ({
      contents: `throw new Error("kiln ships without @grpc/proto-loader: grpc-js's channelz and ORCA are not used")`,
      loader: "js"
    }))
  }
}

const require = createRequire(import.meta.url)

/** The vendored modules: the specifier the library imports, its file under dist/vendor/, and the entry's source. */
const vendored = [
  {
    specifier: "@grpc/grpc-js",
    file: "grpc-js.js",
    // grpc-js is CommonJS: its names are listed so that the ES module exports each (an `export *` of CommonJS
    // would export none of them statically).
    names: () => Object.keys(require("@grpc/grpc-js")),
    entry: () =>
      `import * as grpc from "@grpc/grpc-js"\nexport const { ${
        Object.keys(require("@grpc/grpc-js")).join(", ")
      } } = grpc\n`
  },
  {
    specifier: "@effect/platform-node/NodeSocket",
    file: "NodeSocket.js",
    // platform-node's NodeSocket is platform-node-shared's with a WebSocket constructor added (and with it `ws`):
    // the shared one is the part kiln uses.
    names: () => ["layerNet", "makeNet", "fromDuplex"],
    entry: () => `export * from "@effect/platform-node-shared/NodeSocket"\n`
  }
]

/** Bundles each vendored module into `dist/vendor/` and points the library's imports of it there. */
export const vendorLibraryDependencies = async (dist = "dist") => {
  const vendor = path.join(dist, "vendor")
  fs.rmSync(vendor, { recursive: true, force: true })
  const packages = new Set()
  for (const v of vendored) {
    const result = await build({
      stdin: { contents: v.entry(), resolveDir: process.cwd(), loader: "js" },
      outfile: path.join(vendor, v.file),
      bundle: true,
      platform: "node",
      format: "esm",
      target: "node20",
      // The user's effect is the one kiln's own modules use: two copies would not meet (`[LayerTypeId] is missing`).
      external: ["effect", "@effect/platform"],
      plugins: [unusedProtoLoader],
      // CommonJS code in an ES module: its `require` of Node's built-ins needs one.
      banner: {
        js:
          `import { createRequire as __kilnRequire } from "node:module"; const require = __kilnRequire(import.meta.url);`
      },
      legalComments: "inline",
      logLevel: "warning",
      metafile: true
    })
    for (const input of Object.keys(result.metafile.inputs)) {
      const m = /(?:^|\/)node_modules\/((?:@[^/]+\/)?[^/]+)\//.exec(input)
      if (m !== null) packages.add(input.slice(0, m.index + m[0].length))
    }
    // Loaded once here: a name the bundle does not export (an interop slip) fails the build, not a user's call.
    const loaded = await import(pathToFileURL(path.resolve(vendor, v.file)).href)
    const missing = v.names().filter((name) => loaded[name] === undefined)
    if (missing.length > 0) throw new Error(`vendor: ${v.file} does not export ${missing.join(", ")}`)
  }
  // What is bundled is redistributed: each package's license goes with it (grpc-js's Apache-2.0 asks for it).
  const licenses = path.join(vendor, "licenses")
  fs.mkdirSync(licenses, { recursive: true })
  for (const dir of packages) {
    const name = JSON.parse(fs.readFileSync(path.join(dir, "package.json"), "utf8")).name
    const file = fs.readdirSync(dir).find((f) => /^(licen[cs]e|copying)(\.(md|txt))?$/i.test(f))
    if (file === undefined) throw new Error(`vendor: ${name} is bundled into dist/vendor/ but has no license file`)
    fs.copyFileSync(path.join(dir, file), path.join(licenses, `${name.replace("/", "__")}.txt`))
  }
  const rewritten = new Set()
  const visit = (dir) => {
    for (const e of fs.readdirSync(dir, { withFileTypes: true })) {
      const p = path.join(dir, e.name)
      if (e.isDirectory()) {
        if (p !== vendor && e.name !== "programs") visit(p)
        continue
      }
      if (!e.name.endsWith(".js")) continue
      const text = fs.readFileSync(p, "utf8")
      let out = text
      for (const v of vendored) {
        const to = path.relative(path.dirname(p), path.join(vendor, v.file))
        const before = out
        out = out.replaceAll(`from "${v.specifier}"`, `from "${to.startsWith(".") ? to : `./${to}`}"`)
        if (out !== before || out.includes(`/vendor/${v.file}"`)) rewritten.add(v.specifier)
      }
      if (out !== text) fs.writeFileSync(p, out)
    }
  }
  visit(dist)
  // A vendored module nothing imports any more is a sign the library changed: say so rather than ship it unused.
  for (const v of vendored) {
    if (!rewritten.has(v.specifier)) throw new Error(`vendor: no module of the library imports ${v.specifier}`)
  }
}
