/**
 * kiln as a peer: `dist/kiln run` (the package's bin) of the workspace's kiln.json, as the other CLI benchmarks drive
 * it (scripts/bench/kiln.ts): `--progress none`, a `--summary` read afterwards to check what ran, its store, sandboxes,
 * named caches and sockets under the benchmark's temp root.
 */
import * as fs from "node:fs"
import * as path from "node:path"
import { isStandby } from "../../../src/programs/kiln/standby/protocol.js"
import { kilnEnv, type RunSummary, settleStandby, standbysOf } from "../kiln.js"
import { cli, kilnStart, rm, sh } from "../report.js"
import { runChecked } from "./proc.js"
import { CONCURRENCY, type Context, differs, joinChecks, outputDigests, RUN_LIMIT_MS, type Tool } from "./tool.js"
import { type PeerWorkspace, resets } from "./workspace.js"

export const kilnTool = (ctx: Context): Tool => {
  const env = kilnEnv(ctx.tmp)
  return {
    name: "kiln",
    version: `kiln ${sh(process.execPath, [cli, "--version"])}`,
    open: (ws: PeerWorkspace, root: string) => {
      const store = ctx.tmp.fresh(`kiln-store-${ws.case.key}`)
      return Promise.resolve({
        tool: "kiln",
        root,
        ...resets(ws, root, store),
        build: async (ran, o) => {
          const summaryFile = ctx.tmp.fresh("summary")
          const argv = [
            ...kilnStart(),
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
            summaryFile
          ]
          const r = await runChecked("kiln run", argv, {
            cwd: root,
            env,
            log: ctx.tmp.fresh("log"),
            rss: o.rss,
            // The standby that takes the run on is its engine.
            ...(o.rss === true ? { extraRoots: standbysOf(ctx.tmp), notCounted: isStandby } : {}),
            limitMs: RUN_LIMIT_MS
          })
          await settleStandby(ctx.tmp)
          const s = JSON.parse(fs.readFileSync(summaryFile, "utf8")) as RunSummary
          rm(summaryFile)
          const n = ws.tasks.length
          const check = joinChecks([
            differs("processes", n, s.processes.length),
            differs("ran", ran, s.ran),
            differs("cache hits", n - ran, s.cacheHits),
            differs("failed", 0, s.failed)
          ])
          return { ...r, ...(check !== undefined ? { check } : {}) }
        },
        outputs: () => outputDigests(ws, root),
        close: () => Promise.resolve(rm(store))
      })
    }
  }
}
