/**
 * The two tools on a copy of a real workspace: kiln (`dist/kiln run` of the generated kiln.json) and the
 * workspace's Turborepo (`turbo run build test`), each with its own copy, its own cache, the same concurrency, timed
 * from spawn to exit with the peak RSS of its process tree (scripts/bench/peers/proc.ts), and checked: how many tasks
 * ran and how many came from a cache, from kiln's `--summary` and turbo's closing lines.
 */
import { execFileSync } from "node:child_process"
import { createHash } from "node:crypto"
import * as fs from "node:fs"
import * as path from "node:path"
import { isStandby } from "../../../src/programs/kiln/standby/protocol.js"
import { kilnEnv, type RunSummary, settleStandby, standbysOf } from "../kiln.js"
import { measure, tailOf } from "../peers/proc.js"
import { kilnStart, progress, rm, type TempRoot } from "../report.js"
import { kilnProcesses } from "./kilnConfig.js"
import { cacheRoot, type Repo } from "./repos.js"
import type { Workspace } from "./workspace.js"

export const CONCURRENCY = 2
/** A run that takes longer is ended and reported as failed. */
const RUN_LIMIT_MS = 20 * 60 * 1000

export type ToolName = "kiln" | "turbo"
export const TOOLS: ReadonlyArray<ToolName> = ["kiln", "turbo"]

export interface Counted {
  readonly ms: number
  readonly peakRssKb: number
  readonly total: number
  readonly ran: number
  readonly cached: number
}

export interface RunOptions {
  readonly rss: boolean
  readonly nodeArgs?: ReadonlyArray<string>
  readonly args?: ReadonlyArray<string>
}

export interface Session {
  readonly tool: ToolName
  readonly root: string
  /** Untimed: the outputs removed and the tool's cache emptied. */
  readonly toCold: () => void
  /** Untimed: the outputs removed, the cache kept. */
  readonly dropOutputs: () => void
  /**
   * A timed run of every task; throws when it fails. For kiln, `nodeArgs` go to Node (`--cpu-prof`) and `args` to
   * `kiln run` (`--trace`).
   */
  readonly run: (o: RunOptions) => Promise<Counted>
  readonly close: () => void
}

// ---------------------------------------------------------------------------------------------------------------
// Installing Turborepo and pnpm

export interface Installed {
  /** Turborepo's native binary for a version (`turbo-linux-64` for 1.x, `@turbo/linux-64` for 2.x). */
  readonly turbo: (version: string) => string
  /** A directory with `pnpm` at each version the repositories pin, first on Turborepo's PATH. */
  readonly binDir: (pnpm: string | undefined) => string
  /**
   * The `turbo` npm package's launcher for a version: the Node script a project's `"build": "turbo run build"` (and
   * `npx turbo`) starts, which finds the native binary and runs it.
   */
  readonly launcher: (version: string) => string
}

const turboPackage = (v: string) => (v.startsWith("1.") ? `turbo-linux-64@${v}` : `@turbo/linux-64@${v}`)
const turboBin = (dir: string, v: string) =>
  path.join(dir, "node_modules", v.startsWith("1.") ? "turbo-linux-64" : "@turbo/linux-64", "bin", "turbo")

/** `npm install` of each Turborepo and pnpm the repositories pin, once each into the cache (`--ignore-scripts`). */
export const installTools = (repos: ReadonlyArray<Repo>): Installed => {
  const dirOf = (spec: string) => path.join(cacheRoot, "tools", spec.replace(/[/@]/g, "_"))
  const ensure = (spec: string) => {
    const dir = dirOf(spec)
    if (fs.existsSync(path.join(dir, "done"))) return dir
    fs.mkdirSync(dir, { recursive: true })
    fs.writeFileSync(path.join(dir, "package.json"), JSON.stringify({ private: true }))
    progress(`npm install ${spec} into ${dir}`)
    execFileSync("npm", ["install", "--ignore-scripts", "--no-audit", "--no-fund", "--no-package-lock", spec], {
      cwd: dir,
      stdio: ["ignore", "ignore", "inherit"]
    })
    fs.writeFileSync(path.join(dir, "done"), "")
    return dir
  }
  for (const r of repos) {
    ensure(turboPackage(r.turbo))
    ensure(`turbo@${r.turbo}`)
    if (r.pnpm !== undefined) {
      const dir = ensure(`pnpm@${r.pnpm}`)
      const bin = path.join(dir, "bin")
      fs.mkdirSync(bin, { recursive: true })
      if (!fs.existsSync(path.join(bin, "pnpm"))) {
        fs.symlinkSync(path.join(dir, "node_modules", "pnpm", "bin", "pnpm.cjs"), path.join(bin, "pnpm"))
      }
    }
  }
  return {
    turbo: (v) => turboBin(dirOf(turboPackage(v)), v),
    binDir: (pnpm) => (pnpm === undefined ? "" : path.join(dirOf(`pnpm@${pnpm}`), "bin")),
    launcher: (v) => path.join(dirOf(`turbo@${v}`), "node_modules", "turbo", "bin", "turbo")
  }
}

// ---------------------------------------------------------------------------------------------------------------
// Outputs

const outputDirs = (ws: Workspace, r: Repo, root: string) =>
  ws.inScope.filter((p) => p.scripts.build !== undefined).flatMap((p) =>
    r.buildOutputs.map((o) => ({ task: `${p.name}#build`, dir: path.join(root, p.dir, o) }))
  )

const removeOutputs = (ws: Workspace, r: Repo, root: string) => {
  for (const o of outputDirs(ws, r, root)) rm(o.dir)
}

/** Every build's output directory, by task: the SHA-256 of its files' paths and bytes; `missing` or `empty`. */
export const outputDigests = (ws: Workspace, r: Repo, root: string): Map<string, string> =>
  new Map(
    outputDirs(ws, r, root).map(({ dir, task }) => {
      if (!fs.existsSync(dir)) return [task, "missing"]
      const files = fs.readdirSync(dir, { recursive: true, withFileTypes: true })
        .filter((e) => e.isFile())
        .map((e) => path.join(e.parentPath, e.name))
        .sort()
      if (files.length === 0) return [task, "empty"]
      const h = createHash("sha256")
      for (const f of files) h.update(`${path.relative(dir, f)}\0`).update(fs.readFileSync(f))
      return [task, h.digest("hex")]
    })
  )

// ---------------------------------------------------------------------------------------------------------------
// Sessions

const runOrThrow = async (what: string, argv: ReadonlyArray<string>, o: Parameters<typeof measure>[1]) => {
  const r = await measure(argv, o)
  if (r.code !== 0) throw new Error(`${what} exited with ${r.code ?? r.signal}:\n${tailOf(r.output, 25)}`)
  return r
}

export const kilnSession = (tmp: TempRoot, ws: Workspace, r: Repo, root: string, taskCount: number): Session => {
  const env = kilnEnv(tmp)
  const store = tmp.fresh(`kiln-store-${r.key}`)
  return {
    tool: "kiln",
    root,
    toCold: () => {
      rm(store)
      removeOutputs(ws, r, root)
    },
    dropOutputs: () => removeOutputs(ws, r, root),
    run: async (o) => {
      const summaryFile = tmp.fresh("summary")
      const argv = [
        ...kilnStart(o.nodeArgs),
        "run",
        "--config",
        path.join(root, "kiln.json"),
        "--store-dir",
        store,
        "--concurrency",
        String(CONCURRENCY),
        "--progress",
        "none",
        "--summary",
        summaryFile,
        ...(o.args ?? []),
        ...kilnProcesses(ws)
      ]
      const m = await runOrThrow("kiln run", argv, {
        cwd: root,
        env,
        log: tmp.fresh("log"),
        rss: o.rss,
        // The standby that takes the run on is its engine.
        ...(o.rss ? { extraRoots: standbysOf(tmp), notCounted: isStandby } : {}),
        limitMs: RUN_LIMIT_MS
      })
      await settleStandby(tmp)
      const s = JSON.parse(fs.readFileSync(summaryFile, "utf8")) as RunSummary
      rm(summaryFile)
      if (s.failed !== 0 || s.processes.length !== taskCount) {
        throw new Error(`kiln run: ${s.processes.length} processes (not ${taskCount}), ${s.failed} failed`)
      }
      return { ms: m.ms, peakRssKb: m.peakRssKb, total: s.processes.length, ran: s.ran, cached: s.cacheHits }
    },
    close: () => rm(store)
  }
}

/** turbo's closing lines: `Tasks:    N successful, M total` and `Cached:    C cached, M total`. */
const countsOf = (output: string) => {
  const num = (re: RegExp) => {
    const m = re.exec(output)
    return m === null ? undefined : Number(m[1])
  }
  return {
    successful: num(/Tasks:\s+(\d+) successful/),
    total: num(/Tasks:\s+\d+ successful, (\d+) total/),
    cached: num(/Cached:\s+(\d+) cached/)
  }
}

export const turboSession = (
  tmp: TempRoot,
  tools: Installed,
  ws: Workspace,
  r: Repo,
  root: string,
  taskCount: number
): Session => {
  const cacheDir = tmp.fresh(`turbo-cache-${r.key}`)
  const env: NodeJS.ProcessEnv = {
    PATH: [tools.binDir(r.pnpm), path.dirname(process.execPath), "/usr/local/bin", "/usr/bin", "/bin"]
      .filter((d) => d !== "").join(":"),
    HOME: path.join(tmp.root, "turbo-home"),
    TURBO_TELEMETRY_DISABLED: "1",
    DO_NOT_TRACK: "1",
    TURBO_NO_UPDATE_NOTIFIER: "1"
  }
  const dropLogs = () => {
    for (const p of ws.inScope) rm(path.join(root, p.dir, ".turbo"))
  }
  return {
    tool: "turbo",
    root,
    toCold: () => {
      rm(cacheDir)
      removeOutputs(ws, r, root)
      dropLogs()
    },
    dropOutputs: () => removeOutputs(ws, r, root),
    run: async (o) => {
      const argv = [
        tools.turbo(r.turbo),
        "run",
        "build",
        "test",
        `--concurrency=${CONCURRENCY}`,
        "--output-logs=none",
        `--cache-dir=${cacheDir}`,
        // 1.x starts a daemon by default (it watches outputs); it would outlive the run and its memory go uncounted.
        ...(r.turbo.startsWith("1.") ? ["--no-daemon"] : []),
        ...ws.inScope.map((p) => `--filter=./${p.dir}`)
      ]
      const m = await runOrThrow("turbo run", argv, {
        cwd: root,
        env,
        log: tmp.fresh("log"),
        rss: o.rss,
        limitMs: RUN_LIMIT_MS
      })
      const c = countsOf(m.output)
      if (c.total !== taskCount || c.successful !== taskCount || c.cached === undefined) {
        throw new Error(`turbo run: ${c.successful} successful of ${c.total} (not ${taskCount}):\n${tailOf(m.output)}`)
      }
      return { ms: m.ms, peakRssKb: m.peakRssKb, total: c.total, ran: c.total - c.cached, cached: c.cached }
    },
    close: () => rm(cacheDir)
  }
}
