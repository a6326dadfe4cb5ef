/**
 * The state one `Engine.run` shares between its phases: what is known of each process so far, the indexes built on
 * the way, and what the run will record at the end. Each phase (memo consult, inputs, lookup, execute, settle,
 * record) is a module of its own that reads and extends this one record.
 *
 * @internal
 */
import * as Effect from "effect/Effect"
import * as path from "node:path"
import type { Config } from "../../../domain/config/Config.js"
import type * as Digest from "../../../domain/Digest.js"
import type { Process, ProcessResult } from "../../../domain/Process.js"
import type { ProcessRunner } from "../../runner/ProcessRunner.js"
import type { WholeDirectory } from "../../store/SnapshotObservation.js"
import type { SnapshotObservation, SnapshotSession, Store } from "../../store/Store.js"
import type { Workspace } from "../../workspace/Workspace.js"
import type { Event, ProcessReport, RunOptions } from "../Engine.js"
import type * as RunMemo from "../RunMemo.js"
import { rememberedResult } from "./memo/memoConsult.js"
import type * as RunRecords from "./runRecords.js"
import type { WorkspaceLock } from "./workspaceLock.js"

/** @internal */
export interface NodeState {
  result?: ProcessResult
  /** The memo entry of a remembered hit: its result is built from it when something asks (most never are). */
  remembered?: RunMemo.Entry
  backtracks: number
  /** Directories of this process's merged input root that were found missing and made again. */
  remade?: Set<string>
  /** Producers whose outputs this process had fetched from the remote cache (once each; then they re-run). */
  fetched?: Set<string>
  /** `Date.now()` when its tool started (it had a slot), if it did: its report's span starts there. */
  startedAt?: number
}

/** A process's own inputs (its globs over the workspace), and the files they matched. @internal */
export interface OwnInputs {
  readonly digest: Digest.Digest
  /** Path → `<digest>` (` x` when executable) or `-> <target>`: what `kiln explain` compares. */
  readonly files: Record<string, string>
}

/** @internal */
export interface RunState {
  readonly store: Store["Type"]
  readonly runner: ProcessRunner["Type"]
  /** Writes results' outputs into the workspace (with the files their sandboxes hand off). */
  readonly workspaceWriter: Workspace["Type"]
  readonly options: RunOptions
  readonly config: Config
  readonly workspace: string
  readonly configName: string
  /** `Date.now()` when the run began: reports' `startMs` count from it. */
  readonly started: number
  /** The processes of this run (the targets and their deps), in the config's order. */
  readonly names: ReadonlyArray<string>
  /** The same, every process after its deps. */
  readonly ordered: ReadonlyArray<string>
  readonly policy: { readonly read: boolean; readonly write: boolean }
  readonly maxBacktracks: number
  readonly session: SnapshotSession
  readonly nodes: Map<string, NodeState>
  /** Processes whose memo holds: hits whose outputs are in the workspace already, taken without the store. */
  readonly remembered: ReadonlyMap<string, RunMemo.Entry>
  /** Processes whose memo holds but for their outputs: hits written back again, their inputs not looked at. */
  readonly restored: ReadonlyMap<string, RunMemo.Entry>
  /** Own inputs, snapshotted once per run: backtracking retries and the graph reuse them. */
  readonly owned: Map<string, OwnInputs>
  /** What each process's snapshot read, for the memo. */
  readonly inputsSeen: Map<string, ReadonlyArray<SnapshotObservation>>
  /** The workspace directories each process's snapshot took whole, which its sandbox may mount as they are. */
  readonly wholeSeen: Map<string, ReadonlyArray<WholeDirectory>>
  /** Whether a process's outputs are written into the workspace (`RunOptions.writeBack`). */
  readonly writesBack: (name: string) => boolean
  /** Taken before the run's first write-back, held to its end: one run at a time writes into the workspace. */
  readonly lock: WorkspaceLock
  /**
   * The directories beside outputs already rid of dead kilns' temp files: set once the lock shows that the run before
   * died holding it (during its write-back), so that only then does write-back list the directories it writes into.
   */
  sweep: Set<string> | undefined
  /** What each process's last write-back left in the workspace, and the result it wrote. */
  readonly outputsSeen: Map<
    string,
    { readonly result: ProcessResult; readonly seen: ReadonlyArray<SnapshotObservation> }
  >
  /** What the lookups missed, with the deps' outputs they were made of: the first run of each reuses it. */
  readonly misses: Map<string, { readonly process: Process; readonly deps: Record<string, Digest.Digest> }>
  /** The cache hits the lookups found, before anything was scheduled. */
  readonly hits: Map<string, { readonly result: ProcessResult; readonly process: Process }>
  /** The hits in the order they were found: every one after its deps; the remembered ones first. */
  readonly hitOrder: Array<string>
  /** Producer of each digest a result holds, once indexed (only when bytes turn out missing). */
  readonly producers: Map<string, string>
  /** Results not indexed yet; undefined: the node's remembered result, built only if the index is ever needed. */
  readonly unindexed: Array<[string, ProcessResult | undefined]>
  /** What `kiln explain` will be told of each process of this run. */
  readonly records: Map<string, RunRecords.RunRecord>
  readonly reports: Array<ProcessReport>
  /** Set by the first failure unless the run keeps going: what has not started is skipped. */
  stop: boolean
}

/** The processes `RunOptions.writeBack` names: the targets, or those nothing else in the run depends on. */
const writesBackOf = (options: RunOptions, config: Config, names: ReadonlyArray<string>) => {
  if (options.writeBack !== "requested") return () => true
  if (options.targets !== undefined && options.targets.length > 0) {
    const targets = new Set(options.targets)
    return (name: string) => targets.has(name)
  }
  const depended = new Set(names.flatMap((n) => config.processes[n]!.deps ?? []))
  return (name: string) => !depended.has(name)
}

/** @internal */
export const make = (
  base:
    & Pick<
      RunState,
      | "store"
      | "runner"
      | "workspaceWriter"
      | "options"
      | "config"
      | "names"
      | "ordered"
      | "session"
      | "remembered"
      | "restored"
      | "lock"
    >
    & {
      readonly started: number
    }
): RunState => ({
  ...base,
  workspace: path.resolve(base.options.workspace),
  configName: base.options.configName ?? "kiln.json",
  policy: policyOf(base.options.cache ?? "read-write"),
  maxBacktracks: base.options.maxBacktracks ?? 3,
  nodes: new Map(base.names.map((n) => [n, { backtracks: 0 }])),
  owned: new Map(),
  inputsSeen: new Map(),
  wholeSeen: new Map(),
  writesBack: writesBackOf(base.options, base.config, base.names),
  sweep: undefined,
  outputsSeen: new Map(),
  misses: new Map(),
  hits: new Map(),
  hitOrder: [],
  producers: new Map(),
  unindexed: [],
  records: new Map(),
  reports: [],
  stop: false
})

/** @internal */
export const policyOf = (mode: NonNullable<RunOptions["cache"]>) => ({
  read: mode === "read-write" || mode === "read",
  write: mode === "read-write" || mode === "write"
})

/** @internal */
export const depsOf = (state: RunState, name: string): ReadonlyArray<string> => state.config.processes[name]!.deps ?? []

/** A process's result so far; a remembered hit's is built on first use. @internal */
export const resultOf = (state: RunState, name: string): ProcessResult | undefined => {
  const node = state.nodes.get(name)
  if (node === undefined) return undefined
  if (node.result === undefined && node.remembered !== undefined) node.result = rememberedResult(node.remembered)
  return node.result
}

/** The output trees of `name`'s deps, by dep name (every dep has a result by the time this is asked). @internal */
export const depOutputs = (state: RunState, name: string): Record<string, Digest.Digest> => {
  const deps: Record<string, Digest.Digest> = {}
  for (const dep of depsOf(state, name)) deps[dep] = resultOf(state, dep)!.outputDigest
  return deps
}

/** @internal */
export const emit = (state: RunState, event: Event): Effect.Effect<void> =>
  state.options.onEvent?.(event) ?? Effect.void
