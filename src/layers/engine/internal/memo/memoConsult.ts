/**
 * The run's first phase: which processes the workspace's run memo still vouches for. Those are hits whose outputs are
 * in the workspace already; the run takes them without looking at the store or their inputs again.
 *
 * @internal
 */
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Option from "effect/Option"
import type { Config } from "../../../../domain/config/Config.js"
import * as Digest from "../../../../domain/Digest.js"
import { ProcessResult } from "../../../../domain/Process.js"
import { SandboxMode } from "../../../runner/SandboxMode.js"
import * as Generation from "../../../store/Generation.js"
import * as RunMemo from "../../RunMemo.js"

/** The timings a remembered hit reports: it took no time. */
export const REMEMBERED_TIMINGS = { cacheLookup: 0 }

/** Whether a memo entry's digests are all well formed: the only way {@link rememberedResult} can fail. */
const rememberable = (e: RunMemo.Entry): boolean =>
  Digest.isText(e.action) && Digest.isText(e.output) && Digest.isText(e.stdout) && Digest.isText(e.stderr)

/** A result the run memo vouches for (see {@link rememberable}), as a cache hit that took no time. @internal */
export const rememberedResult = (e: RunMemo.Entry): ProcessResult => {
  const digest = (text: string) => Either.getOrThrow(Digest.parse(text))
  return new ProcessResult({
    exitCode: 0,
    signal: null,
    timedOut: false,
    stdoutDigest: digest(e.stdout),
    stderrDigest: digest(e.stderr),
    outputDigest: digest(e.output),
    actionDigest: digest(e.action),
    durationMs: 0,
    source: "cache-hit",
    timings: REMEMBERED_TIMINGS
  }, true)
}

/** What the memo phase found, and what the record phase needs of the memo as it was at the start. @internal */
export interface MemoConsulted {
  /** Read before the store is: anything removed from it after this moves the generation past the one recorded. */
  readonly generation: string
  readonly previous: RunMemo.Memo | undefined
  /** The run's sandbox mode, which the memo is kept under (see `RunMemo.buildId`). */
  readonly sandbox: string
  readonly remembered: Map<string, RunMemo.Entry>
  /**
   * Hits whose outputs are to be written back again (deleted or changed in the workspace) while their inputs hold:
   * their result is the memo's, found without snapshotting their inputs or asking the action cache.
   */
  readonly restored: Map<string, RunMemo.Entry>
  /** The memo's groups this run's check found at their recorded stats (see `RunMemo.heldByStat`). */
  readonly vouched: ReadonlySet<string>
}

/**
 * The run's sandbox mode, as the runner has it (`SandboxMode`; absent is `auto`): the memo is kept per mode.
 *
 * @internal
 */
export const sandboxModeNow: Effect.Effect<string> = Effect.map(
  Effect.serviceOption(SandboxMode),
  Option.getOrElse(() => "auto")
)

/** The process's config as the memo keys it. @internal */
export const keyOf = (config: Config, name: string): string => JSON.stringify(config.processes[name])

/** @internal */
export const consult = (options: {
  readonly root: string
  readonly workspace: string
  readonly config: Config
  readonly ordered: ReadonlyArray<string>
  readonly depsOf: (name: string) => ReadonlyArray<string>
  /** Whether the memo may answer at all (cache reads on, and the caller did not turn it off). */
  readonly use: boolean
  /** The run's sandbox mode (default `auto`): a memo kept under another is not this run's. */
  readonly sandbox?: string
}): MemoConsulted => {
  const { config, ordered, root, workspace } = options
  const sandbox = options.sandbox ?? "auto"
  const generation = Generation.read(root)
  const previous = RunMemo.read(root, workspace, false, sandbox)
  const remembered = new Map<string, RunMemo.Entry>()
  const restored = new Map<string, RunMemo.Entry>()
  if (options.use && previous !== undefined && RunMemo.storeHolds(root, previous) === undefined) {
    const cacheable = ordered.filter((n) => config.processes[n]!.cache !== "never")
    const { restorable, valid } = RunMemo.holding(
      previous,
      workspace,
      cacheable,
      (n) => keyOf(config, n),
      options.depsOf,
      { config }
    )
    for (const name of ordered) {
      if (options.depsOf(name).some((d) => !remembered.has(d) && !restored.has(d))) continue
      const e = valid.get(name)
      if (e !== undefined && rememberable(e)) remembered.set(name, e)
      const r = restorable.get(name)
      if (r !== undefined && rememberable(r)) restored.set(name, r)
    }
  }
  const vouched = options.use && previous !== undefined ? RunMemo.heldByStat(previous) : new Set<string>()
  return { generation, previous, sandbox, remembered, restored, vouched }
}
