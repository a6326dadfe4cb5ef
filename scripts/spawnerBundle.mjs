// Bundles the spawner (src/programs/spawner/main.ts) into one CommonJS file: `node <file> kiln-spawner <engine-pid>`. Used by
// scripts/bundle.mjs (dist/spawner.cjs) and by the tests' global setup (which run kiln from its sources).
import { build } from "esbuild"
import * as path from "node:path"
import { fileURLToPath } from "node:url"

const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..")

// The spawner uses two functions of src/os/Errno.ts, whose other exports build Schema errors: esbuild keeps a
// module whose top level may have side effects, and with it all of effect (190 KB instead of 5). kiln's modules
// do nothing on import that another module relies on, so they are declared free of side effects here.
const kilnModulesArePure = {
  name: "kiln-modules-are-pure",
  setup(b) {
    b.onResolve({ filter: /^\.\.?\// }, async (args) => {
      if (args.pluginData === "pure" || args.kind === "entry-point") return undefined
      const resolved = await b.resolve(args.path, {
        kind: args.kind,
        importer: args.importer,
        resolveDir: args.resolveDir,
        pluginData: "pure"
      })
      return resolved.errors.length > 0 ? resolved : { path: resolved.path, sideEffects: false }
    })
  }
}

/**
 * Writes the bundle to `outfile`. Fails when it would run code from outside src/ (a package: effect, say): the
 * spawner starts on a cold run's hot path, and must load nothing but Node's built-ins and kiln's small modules.
 */
export const bundleSpawner = async (outfile, { minify = true } = {}) => {
  const result = await build({
    entryPoints: [path.join(repo, "src/programs/spawner/main.ts")],
    outfile,
    bundle: true,
    platform: "node",
    format: "cjs",
    target: "node20",
    minify,
    plugins: [kilnModulesArePure],
    metafile: true,
    legalComments: "none",
    logLevel: "warning"
  })
  const [output] = Object.values(result.metafile.outputs)
  const foreign = Object.entries(output.inputs)
    .filter(([file, { bytesInOutput }]) => bytesInOutput > 0 && !path.resolve(file).startsWith(`${repo}/src/`))
    .map(([file]) => file)
  if (foreign.length > 0) {
    throw new Error(`bundle: ${outfile} would load code from outside src/: ${foreign.slice(0, 5).join(", ")}`)
  }
}
