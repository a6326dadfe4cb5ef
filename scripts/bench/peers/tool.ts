/**
 * What the benchmark asks of each tool, on one workspace: to be set up, made cold, stripped of its outputs, run
 * (timed, with a check of what ran), read back, and closed. kiln, Turborepo and Bazel each implement it
 * (peers/kilnTool.ts, peers/turbo.ts, peers/bazel.ts).
 */
import { createHash } from "node:crypto"
import * as fs from "node:fs"
import * as path from "node:path"
import type { TempRoot } from "../report.js"
import type { Measured } from "./proc.js"
import type { PeerWorkspace } from "./workspace.js"

export type ToolName = "kiln" | "turbo" | "bazel"
export const TOOL_NAMES: ReadonlyArray<ToolName> = ["kiln", "turbo", "bazel"]

/** The same for every tool (kiln `--concurrency`, turbo `--concurrency`, Bazel `--jobs`). */
export const CONCURRENCY = 2
/** A run that takes longer is ended and reported as failed. */
export const RUN_LIMIT_MS = 15 * 60 * 1000

export interface Built extends Measured {
  /** What the run did against what it should have (how many tasks ran, how many came from a cache), if it differed. */
  readonly check?: string
}

/** One tool on one workspace copy. */
export interface Session {
  readonly tool: ToolName
  /** The tool's copy of the workspace. */
  readonly root: string
  /** Untimed: no outputs, and every cache the tool has emptied (a warm Bazel server stays). */
  readonly toCold: () => Promise<void>
  /** Untimed: the outputs deleted, the caches kept. */
  readonly dropOutputs: () => Promise<void>
  /** The timed run of every task; `ran` is how many must run (the rest from a cache, or left as they are). */
  readonly build: (ran: number, o: { readonly rss: boolean }) => Promise<Built>
  /** The SHA-256 of every task's output, by task: what the three tools must agree on. */
  readonly outputs: () => Map<string, string>
  /** Ends what the session started (Bazel's server) and removes its caches. */
  readonly close: () => Promise<void>
}

export interface Tool {
  readonly name: ToolName
  /** What the report says the tool is: its version and how it runs. */
  readonly version: string
  /** Untimed: what the tool needs before its first run on the copy at `root` (Turborepo: `bun install`). */
  readonly open: (ws: PeerWorkspace, root: string) => Promise<Session>
}

export interface Context {
  readonly tmp: TempRoot
}

const sha256 = (file: string) => createHash("sha256").update(fs.readFileSync(file)).digest("hex")

/** The digests of every task's output under `base` (a copy's root, or Bazel's bazel-bin); "missing" when absent. */
export const outputDigests = (ws: PeerWorkspace, base: string): Map<string, string> =>
  new Map(ws.tasks.map((t) => {
    const file = path.join(base, t.dir, t.output)
    return [t.name, fs.existsSync(file) ? sha256(file) : "missing"]
  }))

/** A check's note when `actual` is not `expected`, else undefined. */
export const differs = (what: string, expected: number, actual: number | undefined): string | undefined =>
  actual === expected ? undefined : `${what}: ${actual ?? "not said"}, not ${expected}`

export const joinChecks = (checks: ReadonlyArray<string | undefined>): string | undefined => {
  const xs = checks.filter((c): c is string => c !== undefined)
  return xs.length === 0 ? undefined : xs.join("; ")
}
