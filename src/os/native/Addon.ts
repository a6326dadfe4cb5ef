/**
 * kiln's N-API addon (`lstatMany.c`, `treeWatch.c` and `hashFiles.c` beside this file, built into
 * `dist/kiln-lstat-<platform>-<arch>.node` by scripts/nativeAddons.mjs): loaded once, by whichever of its users asks
 * first. Where it is absent (kiln run from its sources, a platform it is not built for, an install without a compiler)
 * its users do without it.
 *
 * @internal
 */
import * as fs from "node:fs"
import * as path from "node:path"
import { fileURLToPath } from "node:url"

/** Names the addon to load instead of the one beside kiln's build: kiln run from its sources (its tests) has none. */
export const ADDON_ENV = "KILN_LSTAT_ADDON"

/** The addon's file name for this platform and architecture (scripts/nativeAddons.mjs builds it into dist/). */
export const addonName = `kiln-lstat-${process.platform}-${process.arch}.node`

/** What the addon exports; each may be missing from an addon another build left. */
export interface Exports {
  readonly lstatMany?: unknown
  readonly fixThresholds?: unknown
  readonly mountsChanged?: unknown
  readonly watchTree?: unknown
  readonly treeChanged?: unknown
  readonly scanFiles?: unknown
  readonly hashFiles?: unknown
}

/** The build's directory: `dist/` is two levels up from this module in the library, and the CLI's bundles are in it. */
const distDir = (): string => {
  const url = (import.meta as { url?: string }).url
  return url !== undefined ? fileURLToPath(new URL("../..", url)) : __dirname
}

let loaded: Exports | undefined | null = null

/** The addon's exports, loaded on the first call; undefined where there is none or it does not load. */
export const exports = (): Exports | undefined => {
  if (loaded !== null) return loaded
  const named = process.env[ADDON_ENV]
  const file = named !== undefined && named !== "" ? named : path.join(distDir(), addonName)
  loaded = undefined
  try {
    if (fs.existsSync(file)) {
      const module = { exports: {} as Exports }
      process.dlopen(module, file)
      loaded = module.exports
    }
  } catch {
    // Not loadable here (another platform's build, a truncated file): as if there were none.
  }
  return loaded
}
