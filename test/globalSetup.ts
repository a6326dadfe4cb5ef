/**
 * Builds the worker programs that integration tests run as real OS processes: every `test/fixtures/*Worker.ts`
 * becomes `.kiln-test/fixtures/<name>.mjs`, one ESM bundle each, with packages left external so that `lmdb` (a
 * native addon) and `effect` load from node_modules as they would in kiln. And the spawner programs, from their
 * sources, as kiln's build makes them: the native one (`vitest.config.ts` points KILN_SPAWNER at it) and the Node
 * one, which kiln falls back on without a C compiler. And the lstat addon (src/os/StatMany.ts).
 */
import { build } from "esbuild"
import * as fs from "node:fs"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { buildLstatAddon } from "../scripts/nativeAddons.mjs"
import { bundleSpawner } from "../scripts/spawnerBundle.mjs"
import { buildNativeSpawner } from "../scripts/spawnerNative.mjs"
import * as Proc from "../src/os/Proc.js"
import { standbyPids } from "../src/programs/kiln/standby/protocol.js"

const projectRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..")

const fixturesDir = path.join(projectRoot, ".kiln-test", "fixtures")

/** The standby engines of this checkout's CLI (`kiln standby`, from its dist/): their pids. */
const standbys = (): Array<number> => {
  const cli = path.join(projectRoot, "dist", "cli.cjs")
  return standbyPids((pid) => Proc.argvOf(pid)?.includes(cli) === true)
}

/**
 * After the suite: a standby engine one of its tests started and left (a test whose runs had a runtime directory and
 * not `KILN_STANDBY=off`) is killed, and the suite fails naming it. Tests clean up everything they start.
 */
const leftStandbys = (before: ReadonlySet<number>) => () => {
  const left = standbys().filter((pid) => !before.has(pid))
  const homes = left.map((pid) => {
    let home = ""
    try {
      home = fs.readFileSync(`/proc/${pid}/environ`, "utf8").split("\0").find((e) => e.startsWith("HOME=")) ?? ""
    } catch {
      // Gone meanwhile.
    }
    process.kill(pid, "SIGKILL")
    return `${pid} (${home})`
  })
  if (homes.length > 0) throw new Error(`tests left standby engines running, killed now: ${homes.join(", ")}`)
}

export default async function setup() {
  const teardown = leftStandbys(new Set(standbys()))
  // Replaced by a rename, as the fixtures below: another test run may be starting it meanwhile.
  const spawner = path.join(projectRoot, ".kiln-test", "spawner.cjs")
  await bundleSpawner(`${spawner}.${process.pid}.tmp`)
  fs.renameSync(`${spawner}.${process.pid}.tmp`, spawner)
  const why = buildNativeSpawner(path.join(projectRoot, ".kiln-test", "kiln-spawner"))
  if (why !== undefined) {
    throw new Error(`the tests need the native spawner, built with the C compiler kiln's install uses: ${why}`)
  }
  // The lstat addon, as the build makes it (`vitest.config.ts` points KILN_LSTAT_ADDON at it): the tests take the
  // path kiln takes. test/os/StatMany.test.ts checks that the fallback answers the same.
  const addonWhy = buildLstatAddon(path.join(projectRoot, ".kiln-test", "kiln-lstat.node"))
  if (addonWhy !== undefined) {
    throw new Error(`the tests need the lstat addon, built with the C compiler kiln's install uses: ${addonWhy}`)
  }
  const sources = path.join(projectRoot, "test", "fixtures")
  const entryPoints = fs.readdirSync(sources).filter((f) => f.endsWith("Worker.ts")).map((f) => path.join(sources, f))
  const { outputFiles } = await build({
    entryPoints,
    outdir: fixturesDir,
    outExtension: { ".js": ".mjs" },
    bundle: true,
    platform: "node",
    format: "esm",
    target: "node20",
    packages: "external",
    sourcemap: "inline",
    logLevel: "warning",
    write: false
  })
  fs.mkdirSync(fixturesDir, { recursive: true })
  // Each bundle replaces the last by a rename, so that another test run using them meanwhile never sees half a file.
  for (const file of outputFiles) {
    const tmp = `${file.path}.${process.pid}.tmp`
    fs.writeFileSync(tmp, file.contents)
    fs.renameSync(tmp, file.path)
  }
  return teardown
}
