/**
 * Bazel as the peer of the remote-execution figure (`remoteExec.ts`): the REAPI client that Bazel's worker was
 * written for, sending the same processes (one genrule each: `sleep`, then its number into its output) to the same
 * worker with `--remote_executor`, `--jobs` as kiln's `--remote-jobs`, and its own lookups before each execution, as
 * kiln's. Its server is warm: an untimed build starts it, and each timed build gets new contents in every genrule (a
 * salt in its command), so that no action is in the worker's cache; the re-analysis that costs is Bazel's, as reading
 * kiln.json again is kiln's. Timed as kiln is, the native client from its spawn to its exit.
 */
import * as fs from "node:fs"
import * as path from "node:path"
import { timedSpawn } from "./kiln.js"
import { ensureBazel } from "./peers/install.js"
import type { TempRoot } from "./report.js"

export interface BazelRemote {
  readonly version: string
  /** One build of every genrule, salted with `salt`, in milliseconds. */
  readonly build: (salt: string) => Promise<number>
  readonly close: () => Promise<void>
}

/**
 * The peer on `url` (a `grpc://` worker), or why it cannot run here. `processes` genrules of `sleepMs` each, `jobs` at
 * once; the untimed first build has started the server when this returns.
 */
export const bazelRemote = async (o: {
  readonly tmp: TempRoot
  readonly url: string
  readonly jobs: number
  readonly processes: number
  readonly sleepMs: number
}): Promise<BazelRemote | string> => {
  const bazel = ensureBazel()
  if (typeof bazel === "string") return bazel
  const root = o.tmp.fresh("bazel-exec-ws")
  fs.mkdirSync(root, { recursive: true })
  fs.writeFileSync(path.join(root, "WORKSPACE"), `workspace(name = "exec")\n`)
  const env: NodeJS.ProcessEnv = { PATH: "/usr/bin:/bin", HOME: o.tmp.fresh("bazel-home"), USER: "root" }
  const startup = [
    `--output_user_root=${o.tmp.fresh("bazel-root")}`,
    "--nohome_rc",
    "--noworkspace_rc",
    // Ends it even if this process dies before `close`.
    "--max_idle_secs=600"
  ]
  const flags = [
    `--remote_executor=${o.url}`,
    `--jobs=${o.jobs}`,
    "--spawn_strategy=remote",
    "--color=no",
    "--curses=no",
    "--noshow_progress"
  ]
  const run = async (args: ReadonlyArray<string>) => {
    const log = o.tmp.fresh("bazel-log")
    const r = await timedSpawn([bazel.bin, ...startup, ...args], { env, log, cwd: root })
    const output = fs.readFileSync(log, "utf8")
    if (r.code !== 0) {
      throw new Error(`bazel ${args[0]} exited ${r.code ?? r.signal}: ${output.trim().split("\n").at(-1)}`)
    }
    return { ms: r.ms, output }
  }
  const build = async (salt: string) => {
    const rules = Array.from(
      { length: o.processes },
      (_, i) =>
        `genrule(name = "p${i}", outs = ["out/p${i}.txt"], cmd = "sleep ${o.sleepMs / 1000}; echo ${i} ${salt} > $@")`
    )
    fs.writeFileSync(path.join(root, "BUILD.bazel"), `${rules.join("\n")}\n`)
    const r = await run(["build", "//...", ...flags])
    const remote = Number(/(\d+) remote\b/.exec(r.output)?.[1] ?? 0)
    if (remote !== o.processes) throw new Error(`bazel ran ${remote} of ${o.processes} processes remotely`)
    return r.ms
  }
  const close = async () => {
    await run(["shutdown"]).catch(() => undefined)
  }
  // A warm-up that fails may have started the server: it is shut down before the failure is reported.
  await build("warm-up").catch(async (e: unknown) => {
    await close()
    throw e
  })
  return { version: bazel.version, build, close }
}
