/**
 * Bazel as a peer: `bazel build //...` of one genrule a task, each action in Bazel's linux-sandbox, `--jobs=2`, a
 * `--disk_cache` and `--output_user_root` under the benchmark's temp root, no rc file but Debian's system one. The
 * server is warm: the first build of a workspace (untimed) starts it, and it serves every later run of that workspace;
 * `close` shuts it down (and kills it by pid if it lingers), and `--max_idle_secs` ends it anyway if this process dies
 * without.
 *
 * Its peak RSS is its server's: the client is tiny and exits with the build, while the server (a JVM) lives across
 * builds, so its `VmHWM` is reset before a measured run and read after it, beside the sampled sum of its tree.
 */
import * as path from "node:path"
import { progress, rm } from "../report.js"
import type { BazelInstall } from "./install.js"
import { highWaterKb, measure, resetHighWater, runChecked, tailOf } from "./proc.js"
import { CONCURRENCY, type Context, differs, joinChecks, outputDigests, RUN_LIMIT_MS, type Tool } from "./tool.js"
import type { PeerWorkspace } from "./workspace.js"

/** Longer than any gap between two runs of one workspace (the other tools' cold runs of wide 5,000 included). */
const MAX_IDLE_SECS = 1800

/** Every server started here, by pid: Ctrl-C kills them (a `bazel shutdown` would wait for a busy one). */
const servers = new Set<number>()
export const killServers = (): void => {
  for (const pid of servers) {
    try {
      process.kill(pid, "SIGKILL")
    } catch {
      // Gone.
    }
  }
}

const alive = (pid: number): boolean => {
  try {
    process.kill(pid, 0)
    return true
  } catch {
    return false
  }
}

/** What Bazel's `INFO: N processes: …` line says: how many ran in the sandbox, how many came from a cache. */
const countsOf = (output: string) => {
  const line = /^INFO: \d+ process(?:es)?: (.*)$/m.exec(output)?.[1]
  if (line === undefined) return { sandboxed: undefined, cacheHits: undefined }
  const num = (re: RegExp) => Number(re.exec(line)?.[1] ?? 0)
  return { sandboxed: num(/(\d+) linux-sandbox/), cacheHits: num(/(\d+) (?:disk |remote )?cache hit/) }
}

export const bazelTool = (ctx: Context, bazel: BazelInstall): Tool => {
  const startup = [
    `--output_user_root=${path.join(ctx.tmp.root, "bazel")}`,
    // Debian's system rc stays: it names the install base (/usr/share/bazel), without which the client fails.
    "--nohome_rc",
    "--noworkspace_rc",
    `--max_idle_secs=${MAX_IDLE_SECS}`
  ]
  // PATH as kiln's processes have it: the genrules' actions inherit the client's.
  const env: NodeJS.ProcessEnv = { PATH: "/usr/bin:/bin", HOME: path.join(ctx.tmp.root, "bazel-home"), USER: "root" }
  return {
    name: "bazel",
    version: bazel.version,
    open: (ws: PeerWorkspace, root: string) => {
      const diskCache = ctx.tmp.fresh(`bazel-disk-${ws.case.key}`)
      const flags = [
        "--spawn_strategy=linux-sandbox",
        // Debian's system rc turns the sandbox's debugging on, which keeps every action's sandbox: off, as upstream.
        "--nosandbox_debug",
        `--disk_cache=${diskCache}`,
        `--jobs=${CONCURRENCY}`,
        "--color=no",
        "--curses=no",
        "--noshow_progress"
      ]
      const bz = (args: ReadonlyArray<string>) => [bazel.bin, ...startup, ...args]
      const untimed = (what: string, args: ReadonlyArray<string>) =>
        runChecked(what, bz(args), { cwd: root, env, log: ctx.tmp.fresh("log"), limitMs: RUN_LIMIT_MS })
      let server: number | undefined
      /** The server's pid, asked once it runs; a run that finds it gone says so (the next command restarted it). */
      const serverPid = async () => {
        if (server === undefined || !alive(server)) {
          const info = await untimed("bazel info server_pid", ["info", "server_pid"])
          server = Number(info.output.trim().split("\n").at(-1))
          servers.add(server)
        }
        return server
      }
      return Promise.resolve({
        tool: "bazel",
        root,
        toCold: async () => {
          await untimed("bazel clean", ["clean"])
          rm(diskCache)
        },
        dropOutputs: async () => {
          await untimed("bazel clean", ["clean"])
        },
        build: async (ran, o) => {
          const before = server
          const pid = await serverPid()
          const restarted = before !== undefined && before !== pid
          if (o.rss) resetHighWater(pid)
          const r = await measure(bz(["build", "//...", ...flags]), {
            cwd: root,
            env,
            log: ctx.tmp.fresh("log"),
            rss: o.rss,
            extraRoots: [pid],
            limitMs: RUN_LIMIT_MS
          })
          if (r.code !== 0) throw new Error(`bazel build exited with ${r.code ?? r.signal}:\n${tailOf(r.output)}`)
          const peakRssKb = o.rss ? Math.max(r.peakRssKb, highWaterKb(pid)) : r.peakRssKb
          const c = countsOf(r.output)
          const check = joinChecks([
            differs("run in linux-sandbox", ran, c.sandboxed),
            restarted ? `the server had exited (pid ${before}): this run's command started another` : undefined
          ])
          return { ...r, peakRssKb, ...(check !== undefined ? { check } : {}) }
        },
        outputs: () => outputDigests(ws, path.join(root, "bazel-bin")),
        close: async () => {
          if (server !== undefined && alive(server)) {
            await untimed("bazel shutdown", ["shutdown"]).catch((e: unknown) =>
              progress(`bazel shutdown failed: ${e instanceof Error ? e.message : String(e)}`)
            )
            for (let i = 0; i < 100 && alive(server); i++) await new Promise((r) => setTimeout(r, 100))
            if (alive(server)) {
              progress(`the Bazel server (pid ${server}) outlived \`bazel shutdown\`: killed`)
              process.kill(server, "SIGKILL")
            }
          }
          if (server !== undefined) servers.delete(server)
          rm(diskCache)
        }
      })
    }
  }
}
