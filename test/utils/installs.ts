/**
 * Real installs for the tests that need a real `node_modules`: pnpm (of a given version) and npm, their caches shared
 * by every test run on the machine (in the system's temp dir), so that only the first run downloads.
 */
import * as os from "node:os"
import * as path from "node:path"
import { sh } from "./pack.js"

/** Where the package managers keep their caches and pnpm its store, for every test. */
export const caches = path.join(os.tmpdir(), "kiln-test-installs")

/**
 * `pnpm install` with pnpm `version`, in `ws`. Packages are copied, not hard-linked from the shared store: a
 * concurrent test's install or `settle` would move their stats while this one's processes run, and a result whose
 * inputs changed meanwhile is not cached.
 */
export const pnpmInstall = (ws: string, version: string) =>
  sh("npm", [
    "exec",
    "--yes",
    "--cache",
    path.join(caches, "npm"),
    `pnpm@${version}`,
    "--",
    "install",
    "--prefer-offline",
    "--store-dir",
    path.join(caches, "pnpm-store"),
    "--cache-dir",
    path.join(caches, "pnpm-cache"),
    "--package-import-method",
    "copy"
  ], ws)

/** `npm install` in `ws`, from the shared cache when it can. */
export const npmInstall = (ws: string) =>
  sh("npm", ["install", "--prefer-offline", "--no-audit", "--no-fund", "--cache", path.join(caches, "npm")], ws)
