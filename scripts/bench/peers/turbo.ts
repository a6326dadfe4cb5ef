/**
 * Turborepo as a peer: its own binary (`@turbo/linux-64`), `turbo run build --concurrency=2 --output-logs=none` in a
 * bun workspace (root `packageManager: "bun@…"`, a `bun.lock` from `bun install`), so each task is `bun run build`
 * in its package, which runs the script with bash. Unsandboxed, as Turborepo runs; the local cache only, in a
 * directory of the benchmark's (`--cache-dir`); no daemon (2.x uses none for `turbo run`); no telemetry, no update
 * check; HOME under the temp root, so that neither bun nor turbo writes outside it.
 */
import * as path from "node:path"
import { rm } from "../report.js"
import type { Installed } from "./install.js"
import { runChecked } from "./proc.js"
import { CONCURRENCY, type Context, differs, joinChecks, outputDigests, RUN_LIMIT_MS, type Tool } from "./tool.js"
import { type PeerWorkspace, resets } from "./workspace.js"

/** The counts of turbo's closing lines: `Tasks:    N successful, N total` and `Cached:    N cached, N total`. */
const countsOf = (output: string) => {
  const num = (re: RegExp) => {
    const m = re.exec(output)
    return m === null ? undefined : Number(m[1])
  }
  return { successful: num(/Tasks:\s+(\d+) successful/), cached: num(/Cached:\s+(\d+) cached/) }
}

export const turboTool = (ctx: Context, tools: Installed): Tool => {
  const env: NodeJS.ProcessEnv = {
    // bun first: turbo finds the package manager the root package.json names on PATH.
    PATH: `${tools.binDir}:/usr/bin:/bin`,
    HOME: path.join(ctx.tmp.root, "turbo-home"),
    TURBO_TELEMETRY_DISABLED: "1",
    DO_NOT_TRACK: "1",
    TURBO_NO_UPDATE_NOTIFIER: "1"
  }
  return {
    name: "turbo",
    version: `turbo ${tools.versions.turbo} with bun ${tools.versions.bun} (@oven/${tools.bunPackage})`,
    open: async (ws: PeerWorkspace, root: string) => {
      const cacheDir = ctx.tmp.fresh(`turbo-cache-${ws.case.key}`)
      // The lock file turbo reads the workspace's package graph from (it warns without one).
      await runChecked("bun install", [tools.bun, "install"], {
        cwd: root,
        env,
        log: ctx.tmp.fresh("log"),
        limitMs: RUN_LIMIT_MS
      })
      return {
        tool: "turbo",
        root,
        ...resets(ws, root, cacheDir),
        build: async (ran, o) => {
          const argv = [
            tools.turbo,
            "run",
            "build",
            `--concurrency=${CONCURRENCY}`,
            "--output-logs=none",
            `--cache-dir=${cacheDir}`
          ]
          const r = await runChecked("turbo run", argv, {
            cwd: root,
            env,
            log: ctx.tmp.fresh("log"),
            rss: o.rss,
            limitMs: RUN_LIMIT_MS
          })
          const n = ws.tasks.length
          const c = countsOf(r.output)
          const check = joinChecks([differs("successful", n, c.successful), differs("cached", n - ran, c.cached)])
          return { ...r, ...(check !== undefined ? { check } : {}) }
        },
        outputs: () => outputDigests(ws, root),
        close: () => Promise.resolve(rm(cacheDir))
      }
    }
  }
}
