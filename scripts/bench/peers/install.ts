/**
 * The peers, installed for one run into its temp root: Turborepo, bun and esbuild from the npm registry (their
 * binaries ship inside npm packages, one per platform), Bazel from Debian's `bazel-bootstrap`.
 *
 * `npm install --ignore-scripts`: bun's and esbuild's postinstall scripts only move the binary that the platform's
 * optional-dependency package already holds (and would fetch one from elsewhere if it did not), so the binaries are
 * taken from those packages directly and nothing is fetched but from the registry.
 */
import { execFileSync, spawnSync } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"
import { progress, sh } from "../report.js"
import { BUN_VERSION } from "./workspace.js"

export const TURBO_VERSION = "2.11.11"
export const ESBUILD_VERSION = "0.28.2"

export interface Installed {
  /** Turborepo's own binary (`@turbo/linux-64`), not the Node launcher of the `turbo` package. */
  readonly turbo: string
  /** A directory holding `bun`, first on Turborepo's PATH: it finds its package manager there. */
  readonly binDir: string
  readonly bun: string
  readonly esbuild: string
  /** `bun-linux-x64` or `bun-linux-x64-baseline`, by whether the CPU has AVX2. */
  readonly bunPackage: string
  readonly versions: { readonly turbo: string; readonly bun: string; readonly esbuild: string }
}

const hasAvx2 = (): boolean => / avx2( |$)/m.test(fs.readFileSync("/proc/cpuinfo", "utf8"))

/** The binary's `--version`, or undefined when it does not run (a postinstall placeholder, a missing file). */
const versionOf = (bin: string): string | undefined => {
  const r = spawnSync(bin, ["--version"], { encoding: "utf8", stdio: ["ignore", "pipe", "ignore"] })
  return r.status === 0 ? r.stdout.trim() : undefined
}

const mustRun = (bin: string, expected: string): string => {
  const v = versionOf(bin)
  if (v === undefined || !v.includes(expected)) {
    throw new Error(`${bin} --version said ${JSON.stringify(v ?? "nothing")}, not ${expected}`)
  }
  return v
}

/** esbuild alone (`--sandbox-cost`, where no peer runs), as {@link installTools} installs it. */
export const installEsbuild = (dir: string): { readonly esbuild: string; readonly version: string } => {
  fs.mkdirSync(dir, { recursive: true })
  fs.writeFileSync(path.join(dir, "package.json"), JSON.stringify({ name: "kiln-bench-peers-tools", private: true }))
  progress(`npm install esbuild@${ESBUILD_VERSION} into ${dir}`)
  execFileSync("npm", [
    "install",
    "--ignore-scripts",
    "--no-audit",
    "--no-fund",
    "--no-package-lock",
    `esbuild@${ESBUILD_VERSION}`
  ], {
    cwd: dir,
    stdio: ["ignore", "ignore", "inherit"]
  })
  const esbuild = path.join(dir, "node_modules", "@esbuild", "linux-x64", "bin", "esbuild")
  return { esbuild, version: mustRun(esbuild, ESBUILD_VERSION) }
}

/** `npm install` of the three packages into `dir` (the npm cache makes a second run's install local). */
export const installTools = (dir: string): Installed => {
  fs.mkdirSync(dir, { recursive: true })
  fs.writeFileSync(path.join(dir, "package.json"), JSON.stringify({ name: "kiln-bench-peers-tools", private: true }))
  const bunPackage = hasAvx2() ? "bun-linux-x64" : "bun-linux-x64-baseline"
  const packages = [
    `turbo@${TURBO_VERSION}`,
    `bun@${BUN_VERSION}`,
    `esbuild@${ESBUILD_VERSION}`,
    // The baseline build is no optional dependency of `bun` that npm picks by CPU: named when the CPU needs it.
    ...(bunPackage.endsWith("baseline") ? [`@oven/${bunPackage}@${BUN_VERSION}`] : [])
  ]
  progress(`npm install ${packages.join(" ")} into ${dir}`)
  execFileSync("npm", ["install", "--ignore-scripts", "--no-audit", "--no-fund", "--no-package-lock", ...packages], {
    cwd: dir,
    stdio: ["ignore", "ignore", "inherit"]
  })
  const modules = path.join(dir, "node_modules")
  const turbo = path.join(modules, "@turbo", "linux-64", "bin", "turbo")
  const bun = path.join(modules, "@oven", bunPackage, "bin", "bun")
  const esbuild = path.join(modules, "@esbuild", "linux-x64", "bin", "esbuild")
  const versions = {
    turbo: mustRun(turbo, TURBO_VERSION),
    bun: mustRun(bun, BUN_VERSION),
    esbuild: mustRun(esbuild, ESBUILD_VERSION)
  }
  const binDir = path.join(dir, "bin")
  fs.mkdirSync(binDir, { recursive: true })
  fs.symlinkSync(bun, path.join(binDir, "bun"))
  return { turbo, binDir, bun, esbuild, bunPackage, versions }
}

// ---------------------------------------------------------------------------------------------------------------
// Bazel

export interface BazelInstall {
  readonly bin: string
  /** Debian's package and version, e.g. `bazel-bootstrap 4.2.3+ds-9`. */
  readonly version: string
}

const which = (name: string): string | undefined => {
  const r = spawnSync("sh", ["-c", `command -v ${name}`], { encoding: "utf8" })
  return r.status === 0 && r.stdout.trim() !== "" ? r.stdout.trim() : undefined
}

/**
 * Bazel on PATH, else Debian's `bazel-bootstrap` installed (`apt-get install`); the reason when neither worked, and
 * Bazel is left out of the run.
 */
export const ensureBazel = (): BazelInstall | string => {
  let bin = which("bazel")
  if (bin === undefined) {
    progress("bazel is not installed: apt-get install -y --no-install-recommends bazel-bootstrap")
    const r = spawnSync("apt-get", ["install", "-y", "--no-install-recommends", "bazel-bootstrap"], {
      encoding: "utf8",
      stdio: ["ignore", "pipe", "pipe"]
    })
    bin = which("bazel")
    if (bin === undefined) {
      const why = (r.stderr || r.stdout || "").trim().split("\n").at(-1) ?? `exit ${r.status}`
      return `bazel is not installed and \`apt-get install bazel-bootstrap\` failed (${why})`
    }
  }
  const deb = sh("dpkg-query", ["-W", "-f", "${Package} ${Version}", "bazel-bootstrap"])
  const client = nativeClient(bin)
  return { bin: client, version: `${deb === "?" ? (versionOf(client) ?? "?") : deb}, client ${client}` }
}

/**
 * The native client that Bazel's wrapper script (Debian's /usr/bin/bazel, as upstream's) picks and execs: run
 * directly, as Turborepo's binary is, so that no bash start is timed with every build. The wrapper's own choice, in
 * its order: `bazel-real`, else the highest `bazel-<version>` beside it.
 */
const nativeClient = (bin: string): string => {
  const real = fs.realpathSync(bin)
  if (!isScript(real)) return real
  const dir = path.dirname(real)
  const versioned = fs.readdirSync(dir).filter((f) => /^bazel-\d/.test(f)).sort((a, b) =>
    a.localeCompare(b, "en", { numeric: true })
  )
  const candidates = ["bazel-real", ...versioned.reverse()].map((f) => path.join(dir, f))
  return candidates.find((f) => fs.existsSync(f) && !isScript(f)) ?? bin
}

const isScript = (file: string): boolean => {
  const fd = fs.openSync(file, "r")
  try {
    const head = Buffer.alloc(2)
    fs.readSync(fd, head, 0, 2, 0)
    return head.toString("latin1") === "#!"
  } finally {
    fs.closeSync(fd)
  }
}
