/**
 * The engine: runs a graph of processes from `kiln.json` concurrently, each on its own inputs plus its deps'
 * outputs, writes successful outputs back into the workspace, and backtracks when bytes it relied on are gone: it
 * re-runs the process of this run that produced them (cache reads off, writes on) and retries the consumer.
 *
 * @since 0.1.0
 */
import * as Context from "effect/Context"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import * as path from "node:path"
import { actionDigest } from "../domain/ActionKey.js"
import { type Config, InvalidConfig, type ProcessConfig } from "../domain/Config.js"
import * as Digest from "../domain/Digest.js"
import type { MissingDigest } from "../domain/Digest.js"
import * as DurationText from "../domain/DurationText.js"
import * as Glob from "../domain/Glob.js"
import * as GraphOrder from "../domain/GraphOrder.js"
import { Process, ProcessResult, type SpawnError } from "../domain/Process.js"
import type { SandboxError, SandboxerUnavailable } from "../domain/Sandbox.js"
import type { StoreError } from "../domain/StoreErrors.js"
import type { InputConflict, InvalidOutput } from "../domain/TreeErrors.js"
import { ProcessRunner } from "../runner/ProcessRunner.js"
import * as Generation from "../store/Generation.js"
import * as Sharded from "../store/internal/lmdb/shards.js"
import { type SnapshotObservation, type SnapshotSession, Store } from "../store/Store.js"
import * as MemoRecord from "./internal/memoRecord.js"
import * as RunRecords from "./internal/runRecords.js"
import { writeBack } from "./internal/writeBack.js"
import * as RunMemo from "./RunMemo.js"

/**
 * @since 0.1.0
 * @category models
 */
export type CacheMode = "read-write" | "read" | "write" | "off"

/**
 * @since 0.1.0
 * @category models
 */
export interface ProcessReport {
  readonly name: string
  readonly actionDigest: string | null
  readonly source: "ran" | "cache-hit" | "skipped" | "error"
  readonly exitCode: number | null
  readonly timedOut: boolean
  readonly durationMs: number
  readonly backtracks: number
  /** Milliseconds from the start of the run. */
  readonly startMs: number
  readonly timings: Readonly<Record<string, number>>
  /** Why it failed, was skipped or errored; for a failed process, the tail of its stderr. */
  readonly detail?: string
  /** What kept it from producing a result or from writing its outputs back, typed (absent for a tool's exit). */
  readonly error?: ProcessFailure
  /** A command that re-runs a failed process exactly. */
  readonly reproduce?: string
  /** Whether it succeeded and its outputs are in the workspace. */
  readonly ok: boolean
}

/**
 * @since 0.1.0
 * @category models
 */
export interface RunReport {
  readonly processes: ReadonlyArray<ProcessReport>
  readonly ran: number
  readonly cacheHits: number
  readonly failed: number
  readonly backtracks: number
  readonly wallMs: number
}

/**
 * @since 0.1.0
 * @category models
 */
export type Event =
  | { readonly _tag: "Started"; readonly name: string }
  | { readonly _tag: "Finished"; readonly report: ProcessReport }

/**
 * @since 0.1.0
 * @category models
 */
export interface RunOptions {
  readonly workspace: string
  readonly config: Config
  /** Default: every process. Their transitive deps run too. */
  readonly targets?: ReadonlyArray<string>
  readonly cache?: CacheMode
  readonly keepGoing?: boolean
  readonly maxBacktracks?: number
  readonly onEvent?: (event: Event) => Effect.Effect<void>
  /**
   * Runs before each attempt of a process, once its input tree is known, with the results so far (tests use it to
   * delete bytes at a precise moment: after a producer finished, before its consumer materializes).
   */
  readonly beforeAttempt?: (
    name: string,
    input: Digest.Digest,
    resultOf: (name: string) => ProcessResult | undefined
  ) => Effect.Effect<void>
  /** The `--store-dir` to print in reproduce commands. */
  readonly storeDir?: string
  /** The config file's name, for errors about its fields. Default `kiln.json`. */
  readonly configName?: string
  /**
   * sha256 of the config file's bytes, recorded in the run memo so that the CLI can tell, before it loads the
   * engine, that the config is the one a run validated.
   */
  readonly configHash?: string
  /** Whether processes whose run memo holds are taken as hits without a look at the store (default true). */
  readonly memo?: boolean
}

/**
 * A process kept missing bytes after re-running their producer as often as allowed (`maxBacktracks`).
 *
 * @since 0.1.0
 * @category errors
 */
export class BacktrackLimit extends Schema.TaggedError<BacktrackLimit>("kiln/BacktrackLimit")("BacktrackLimit", {
  attempts: Schema.Number,
  digest: Schema.String
}) {
  override get message(): string {
    return `gave up after ${this.attempts} backtracks (missing ${this.digest})`
  }
}

/**
 * Why a process has no result (a tool that exits non-zero has one): its inputs (a glob that matches nothing is an
 * `InvalidConfig`), the store, its sandbox or sandboxer, its spawn, or missing bytes it could not get back.
 *
 * @since 0.1.0
 * @category errors
 */
export type ProcessFailure =
  | InvalidConfig
  | MissingDigest
  | StoreError
  | InputConflict
  | InvalidOutput
  | SandboxError
  | SandboxerUnavailable
  | SpawnError
  | BacktrackLimit

/**
 * Bytes a process needed are gone and no process of this run produced them: nothing to re-run.
 *
 * @since 0.1.0
 * @category errors
 */
export class NoProducer extends Schema.TaggedError<NoProducer>("kiln/NoProducer")("NoProducer", {
  digest: Schema.String,
  consumer: Schema.String,
  /** What the missing blob was read as (`file`, `directory`). */
  kind: Schema.optional(Schema.String),
  /** Whether a second look, after the failure, finds it in the store after all (a read that went wrong). */
  presentNow: Schema.optional(Schema.Boolean),
  /** When this process skipped writing it because the store already held it (ISO time), if it did. */
  skippedWriteAt: Schema.optional(Schema.String)
}) {
  override get message(): string {
    const what = this.kind === undefined || this.kind === "blob" ? "blob" : this.kind
    const now = this.presentNow === undefined
      ? ""
      : this.presentNow
      ? " (a second look finds it in the store: the read that missed it went wrong)"
      : " (a second look does not find it either)"
    const skipped = this.skippedWriteAt === undefined
      ? ""
      : `; this process did not write it at ${this.skippedWriteAt} because the store held it then`
    return `missing ${what} ${this.digest} needed by \`${this.consumer}\`, and no process of this run produced it${now}${skipped}`
  }
}

/**
 * @since 0.1.0
 * @category models
 */
export interface Service {
  readonly run: (options: RunOptions) => Effect.Effect<RunReport, NoProducer>
  /**
   * Why `name` would run or hit: its action digest, whether the cache has it, and what changed since its last
   * recorded run (input files by path, env, argv, deps' outputs). Deps are assumed to produce what they did then.
   */
  readonly explain: (options: {
    readonly workspace: string
    readonly config: Config
    readonly name: string
    readonly configName?: string
  }) => Effect.Effect<Array<string>, InvalidConfig | StoreError | MissingDigest | InputConflict>
}

/**
 * @since 0.1.0
 * @category tags
 */
export class Engine extends Context.Tag("kiln/Engine")<Engine, Service>() {}

const policyOf = (mode: CacheMode) => ({
  read: mode === "read-write" || mode === "read",
  write: mode === "read-write" || mode === "write"
})

const REMEMBERED_TIMINGS = { cacheLookup: 0 }

/** Whether a memo entry's digests are all well formed: the only way {@link rememberedResult} can fail. */
const rememberable = (e: RunMemo.Entry): boolean =>
  Digest.isText(e.action) && Digest.isText(e.output) && Digest.isText(e.stdout) && Digest.isText(e.stderr)

/** A result the run memo vouches for (see {@link rememberable}), as a cache hit that took no time. */
const rememberedResult = (e: RunMemo.Entry): ProcessResult => {
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

const segments = (p: string | undefined) => (p ?? "").split("/").filter((s) => s !== "" && s !== ".")

/** A process's own inputs (its globs over the workspace), and the files they matched. */
const ownInputs = (
  store: Store["Type"],
  workspace: string,
  name: string,
  pc: ProcessConfig,
  session: SnapshotSession,
  configName: string,
  seen?: Array<SnapshotObservation>
) =>
  Effect.gen(function*() {
    const globs = pc.inputs ?? []
    if (!selects(globs)) return { digest: Digest.empty, files: {} as Record<string, string> }
    return yield* ownFrom(store, name, pc, yield* store.snapshot(workspace, globs, session, seen), configName)
  })

/** Whether globs select anything at all (not only exclude). */
const selects = (globs: ReadonlyArray<string>) => globs.some((g) => !g.startsWith("!"))

/** A process's own inputs from the snapshot of its globs: the files they matched (every glob must match one). */
const ownFrom = (
  store: Store["Type"],
  name: string,
  pc: ProcessConfig,
  digest: Digest.Digest,
  configName: string
) =>
  Effect.gen(function*() {
    const globs = pc.inputs ?? []
    const entries = (yield* store.listTree(digest)).filter((e) => e.type !== "directory")
    for (const [i, g] of globs.entries()) {
      if (g.startsWith("!")) continue
      const matches = Glob.matcher([g])
      if (!entries.some((e) => matches(e.path))) {
        return yield* new InvalidConfig({
          file: configName,
          path: `processes.${name}.inputs[${i}]`,
          detail: `glob "${g}" matches nothing`
        })
      }
    }
    const files: Record<string, string> = {}
    for (const e of entries) {
      files[e.path] = e.type === "symlink"
        ? `-> ${e.target}`
        : `${Digest.format(e.digest!)}${e.isExecutable ? " x" : ""}`
    }
    return { digest, files }
  })

/** What a run says when it made a directory of `name`'s merged inputs again (see `remake`). */
const remadeWarning = (name: string, digest: Digest.Digest): string => {
  const skipped = Sharded.skippedWrite(digest.hash)
  const why = skipped === undefined
    ? ""
    : ` (this process had not written it at ${new Date(skipped).toISOString()} because the store held it then)`
  return `${name}: ${Digest.format(digest)}, a directory of its merged inputs, was missing from the store: ` +
    `made it again${why}`
}

/**
 * Own inputs ⊕ each dep's outputs at the dep's workspace path (`rewrite`: every directory made is written). The
 * directories a merge makes are committed in the background: this engine reads them first (to key, lease and lay out
 * the process), and a chain of processes waited on that commit at every link.
 */
const mergeInputs = (
  store: Store["Type"],
  config: Config,
  own: Digest.Digest,
  deps: Readonly<Record<string, Digest.Digest>>,
  rewrite = false
) =>
  store.mergeTrees([
    { digest: own, at: [] },
    ...Object.entries(deps).map(([dep, d]) => ({ digest: d, at: segments(config.processes[dep]!.workingDirectory) }))
  ], { rewrite, behind: !rewrite })

const processOf = (name: string, pc: ProcessConfig, inputDigest: Digest.Digest) => {
  const outputs = pc.outputs ?? []
  return new Process({
    argv: pc.argv as readonly [string, ...Array<string>],
    env: { ...pc.env },
    inputDigest,
    workingDirectory: segments(pc.workingDirectory).join("/"),
    outputFiles: outputs.filter((o) => !o.endsWith("/")),
    outputDirectories: outputs.filter((o) => o.endsWith("/")).map((o) => o.replace(/\/+$/, "")),
    ...(pc.timeout !== undefined
      ? { timeoutMs: Duration.toMillis(Either.getOrThrow(DurationText.parse(pc.timeout))) }
      : {}),
    description: name,
    cache: pc.cache ?? "successful",
    namedCaches: { ...pc.namedCaches }
    // kiln.json's schema has validated every field already; checking again per attempt was a visible cost.
  }, true)
}

/**
 * Processes whose own inputs are snapshotted together once inputs are new: their contents and directories are stored
 * in one commit per shard. (The contents flush on their own every 32 MiB, so the memory held stays bounded.)
 */
const SNAPSHOT_CHUNK = 256

/** Processes looked up together (one read transaction per store shard each time). */
const LOOKUP_CHUNK = 64

/** A failure as the one line a report shows: a config error names its file and field, anything else the process. */
const describe = (name: string, e: ProcessFailure): string =>
  e._tag === "InvalidConfig" ? e.message : `${name}: ${e.message}`

/** How a process failed, for its run record: what `kiln explain` says of its last run. */
const failureOf = (r: ProcessReport): string =>
  r.timedOut
    ? "timed out"
    : r.error !== undefined
    ? r.error.message.split("\n")[0]!
    : r.exitCode === null
    ? "killed"
    : r.exitCode !== 0
    ? `exit ${r.exitCode}`
    : "its outputs could not be written back"

const quote = (s: string) => /^[\w@%+=:,./-]+$/.test(s) ? s : `'${s.replace(/'/g, `'\\''`)}'`

type Outcome = "ok" | "failed"

interface NodeState {
  result?: ProcessResult
  /** The memo entry of a remembered hit: its result is built from it when something asks (most never are). */
  remembered?: RunMemo.Entry
  backtracks: number
  /** Directories of this process's merged input root that were found missing and made again. */
  remade?: Set<string>
}

/**
 * @since 0.1.0
 * @category constructors
 */
export const make = Effect.gen(function*() {
  const store = yield* Store
  const runner = yield* ProcessRunner

  const run = (options: RunOptions) =>
    Effect.gen(function*() {
      const started = Date.now()
      const { config } = options
      const workspace = path.resolve(options.workspace)
      const depsOf = (name: string) => config.processes[name]!.deps ?? []
      const names = GraphOrder.closure(depsOf, options.targets ?? Object.keys(config.processes))
      const policy = policyOf(options.cache ?? "read-write")
      const maxBacktracks = options.maxBacktracks ?? 3
      const emit = (e: Event) => options.onEvent?.(e) ?? Effect.void
      const state = new Map<string, NodeState>(names.map((n) => [n, { backtracks: 0 }]))
      const resultOf = (node: NodeState): ProcessResult | undefined => {
        if (node.result === undefined && node.remembered !== undefined) node.result = rememberedResult(node.remembered)
        return node.result
      }
      const producers = new Map<string, string>()
      const reports: Array<ProcessReport> = []
      let stop = false
      const records = new Map<string, RunRecords.RunRecord>()
      const root = store.options.root
      // Read before the store is: anything removed from it after this moment moves the generation past the one the
      // memo written at the end records.
      const generation = Generation.read(root)
      const memo = RunMemo.read(root, workspace)
      const ordered = GraphOrder.depsFirst(depsOf, names)
      const keyOf = (name: string) => JSON.stringify(config.processes[name])
      /** Processes whose memo holds: hits whose outputs are in the workspace already, taken without the store. */
      const remembered = new Map<string, RunMemo.Entry>()
      if (policy.read && options.memo !== false && memo !== undefined && RunMemo.storeHolds(root, memo) === undefined) {
        const cacheable = ordered.filter((n) => config.processes[n]!.cache !== "never")
        const { valid } = RunMemo.holding(memo, workspace, cacheable, keyOf, depsOf, { config })
        for (const name of ordered) {
          const e = valid.get(name)
          if (e === undefined || depsOf(name).some((d) => !remembered.has(d))) continue
          if (rememberable(e)) remembered.set(name, e)
        }
      }
      // What the memo vouches for is not looked at again: the few files of the rest are hashed rather than the whole
      // workspace's stat index read (and rewritten), unless there turn out to be more than a few.
      const session = yield* store.snapshotSession(workspace, { lazy: remembered.size > 0 })

      // Results are indexed by the digests they hold only when bytes turn out missing: a run without backtracking
      // (most) never lists its hits' output trees for it.
      /** Results to index; undefined: the node's remembered result, built only if the index is ever needed. */
      const unindexed: Array<[string, ProcessResult | undefined]> = []
      const indexAll = Effect.suspend(() => {
        const todo = unindexed.splice(0)
        return Effect.forEach(todo, ([name, result]) => index(name, result ?? resultOf(state.get(name)!)!), {
          discard: true
        })
      })
      const index = (name: string, result: ProcessResult) =>
        Effect.gen(function*() {
          for (const d of [result.outputDigest, result.stdoutDigest, result.stderrDigest]) producers.set(d.hash, name)
          // Every digest of the tree that can still be read. A directory already gone is indexed by its parent's
          // reference to it, so a consumer's MissingDigest naming it (the walk that failed stopped there too)
          // still finds this producer.
          const stack = [result.outputDigest]
          while (stack.length > 0) {
            const dir = yield* Effect.option(store.getDirectory(stack.pop()!))
            if (Option.isNone(dir)) continue
            for (const f of dir.value.files) if (!Digest.isEmpty(f.digest)) producers.set(f.digest.hash, name)
            for (const d of dir.value.directories) {
              producers.set(d.digest.hash, name)
              stack.push(d.digest)
            }
          }
        })

      // A process's own inputs are snapshotted once per run: backtracking retries and the graph reuse them.
      const owned = new Map<string, { digest: Digest.Digest; files: Record<string, string> }>()
      /** What each snapshot read, for the memo. */
      const inputsSeen = new Map<string, Array<SnapshotObservation>>()
      /** What each process's last write-back left in the workspace, and the result it wrote. */
      const outputsSeen = new Map<string, { result: ProcessResult; seen: Array<SnapshotObservation> }>()
      const ownOf = (name: string, pc: ProcessConfig) =>
        Effect.suspend(() => {
          const known = owned.get(name)
          if (known !== undefined) return Effect.succeed(known)
          const seen: Array<SnapshotObservation> = []
          return Effect.tap(
            ownInputs(store, workspace, name, pc, session, options.configName ?? "kiln.json", seen),
            (own) => {
              owned.set(name, own)
              inputsSeen.set(name, seen)
            }
          )
        })

      /**
       * {@link ownOf} for many processes, their snapshots stored together (see `Store.snapshotMany`). One that fails
       * is left to `ownOf`, which reports it when the process is reached.
       */
      const ownOfMany = (names: ReadonlyArray<string>) =>
        Effect.suspend(() => {
          const todo = names.filter((n) => !owned.has(n) && selects(config.processes[n]!.inputs ?? []))
          const seen = todo.map((): Array<SnapshotObservation> => [])
          const requests = todo.map((n, i) => ({ globs: config.processes[n]!.inputs ?? [], observe: seen[i] }))
          return store.snapshotMany(workspace, requests, session).pipe(
            Effect.flatMap((digests) =>
              Effect.forEach(todo, (name, i) => {
                const digest = digests[i]!
                if (Either.isLeft(digest)) return Effect.void
                return ownFrom(store, name, config.processes[name]!, digest.right, options.configName ?? "kiln.json")
                  .pipe(
                    Effect.match({
                      onFailure: () => undefined,
                      onSuccess: (own) => {
                        owned.set(name, own)
                        inputsSeen.set(name, seen[i]!)
                      }
                    })
                  )
              }, { discard: true })
            ),
            // Each process's own snapshot, when it is reached, reports what failed here (as it would have alone).
            Effect.catchAll((e) =>
              Effect.logDebug(`could not store ${todo.length} processes' inputs together: ${e.message}`)
            )
          )
        })

      const depOutputs = (pc: ProcessConfig) => {
        const deps: Record<string, Digest.Digest> = {}
        for (const dep of pc.deps ?? []) deps[dep] = resultOf(state.get(dep)!)!.outputDigest
        return deps
      }

      /**
       * Makes `name`'s merged input root again, every directory written whatever the store shows, and says whether
       * `missing` is in the store now. The engine is the producer of the directories a merge makes (the root, and the
       * folders it lays deps' outputs into), so when one of those is gone it is re-made like any other output.
       */
      const remake = (name: string, pc: ProcessConfig, missing: Digest.Digest) =>
        Effect.suspend(() => {
          const own = owned.get(name)
          if (own === undefined) return Effect.succeed(false)
          return Effect.zipRight(
            mergeInputs(store, config, own.digest, depOutputs(pc), true),
            store.hasDirectory(missing)
          )
        }).pipe(Effect.orElseSucceed(() => false))

      const inputOf = (name: string, pc: ProcessConfig) =>
        Effect.gen(function*() {
          const own = yield* ownOf(name, pc)
          const deps = depOutputs(pc)
          const digest = yield* mergeInputs(store, config, own.digest, deps)
          records.set(name, {
            argv: [...pc.argv],
            env: { ...pc.env },
            workingDirectory: pc.workingDirectory ?? "",
            inputs: own.files,
            deps: Object.fromEntries(Object.entries(deps).map(([k, v]) => [k, Digest.format(v)])),
            actionDigest: ""
          })
          return digest
        })

      /** What the lookups missed, with the deps' outputs they were made of: the first run of each reuses it. */
      const misses = new Map<string, { process: Process; deps: Record<string, Digest.Digest> }>()
      /** The process the lookups made for `name` and missed, if its deps' outputs are still those; once. */
      const lookedUp = (name: string, pc: ProcessConfig): Process | undefined => {
        const miss = misses.get(name)
        if (miss === undefined) return undefined
        misses.delete(name)
        const deps = depOutputs(pc)
        return Object.entries(miss.deps).every(([d, digest]) => deps[d]?.hash === digest.hash)
          ? miss.process
          : undefined
      }

      const reproduce = (p: Process) =>
        [
          "kiln exec",
          ...(options.storeDir !== undefined ? [`--store-dir ${quote(options.storeDir)}`] : []),
          `--input ${Digest.format(p.inputDigest)}`,
          ...(p.workingDirectory !== "" ? [`--working-directory ${quote(p.workingDirectory)}`] : []),
          ...Object.entries(p.env).map(([k, v]) => `--env ${quote(`${k}=${v}`)}`),
          "--cache never --",
          ...p.argv.map(quote)
        ].join(" ")

      /**
       * Runs a process once under `cache`, backtracking on missing bytes: the producer of the missing digest is
       * re-run with cache reads off (its fresh result replaces the stale entry), then this process is retried.
       */
      const execute = (
        name: string,
        cache: { read: boolean; write: boolean }
      ): Effect.Effect<{ result: ProcessResult; process: Process }, NoProducer | ProcessFailure> =>
        Effect.gen(function*() {
          const pc = config.processes[name]!
          const node = state.get(name)!
          for (;;) {
            const missed = lookedUp(name, pc)
            const attempt = yield* Effect.either(
              Effect.flatMap(
                missed !== undefined ?
                  Effect.succeed(missed) :
                  Effect.map(inputOf(name, pc), (input) => processOf(name, pc, input)),
                (p) => {
                  records.get(name)!.actionDigest = Digest.format(actionDigest(p))
                  return Effect.zipRight(
                    options.beforeAttempt?.(name, p.inputDigest, (n) => {
                      const node = state.get(n)
                      return node === undefined ? undefined : resultOf(node)
                    }) ?? Effect.void,
                    Effect.map(
                      runner.run(p, { cache: missed === p && cache.read ? { ...cache, missed: true } : cache }),
                      (result) => ({ result, process: p })
                    )
                  )
                }
              )
            )
            if (Either.isRight(attempt)) return attempt.right
            const e = attempt.left
            if (e._tag !== "MissingDigest") return yield* Effect.fail(e)
            yield* indexAll
            const producer = producers.get(e.digest.hash)
            if (producer === undefined && e.kind === "directory" && !(node.remade?.has(e.digest.hash) ?? false)) {
              if (node.backtracks < maxBacktracks && (yield* remake(name, pc, e.digest))) {
                node.backtracks++
                ;(node.remade ??= new Set()).add(e.digest.hash)
                yield* Effect.logWarning(remadeWarning(name, e.digest))
                continue
              }
            }
            if (producer === undefined) {
              // Nothing can re-make it; what a second look finds tells a blob that is gone from one misread.
              const look = e.kind === "directory"
                ? store.hasDirectory(e.digest)
                : e.kind === "file"
                ? store.hasFile(e.digest)
                : Effect.zipWith(store.hasFile(e.digest), store.hasDirectory(e.digest), (f, d) => f || d)
              const presentNow = yield* Effect.orElseSucceed(look, () => undefined)
              const skipped = Sharded.skippedWrite(e.digest.hash)
              return yield* new NoProducer({
                digest: Digest.format(e.digest),
                consumer: name,
                kind: e.kind,
                ...(presentNow !== undefined ? { presentNow } : {}),
                ...(skipped !== undefined ? { skippedWriteAt: new Date(skipped).toISOString() } : {})
              })
            }
            if (node.backtracks >= maxBacktracks) {
              return yield* new BacktrackLimit({ attempts: maxBacktracks, digest: Digest.format(e.digest) })
            }
            node.backtracks++
            yield* Effect.logWarning(
              `${name}: ${
                Digest.format(e.digest)
              } is missing from the store: re-running \`${producer}\`, which produced it`
            )
            // Writes stay on even under --cache read: the fresh result must replace the stale entry.
            const fresh = yield* execute(producer, { read: false, write: true })
            state.get(producer)!.result = fresh.result
            unindexed.push([producer, fresh.result])
          }
        })

      /**
       * The cache hits of this run, found before anything is scheduled. A process's key holds its deps' outputs, so
       * the graph is looked up wave by wave: a process joins a wave once all its deps are hits, and every key of a
       * wave is read together (one read transaction per store shard). Misses, and anything whose inputs cannot be
       * read, go through the graph below, which runs or reports them.
       */
      const hits = new Map<string, { result: ProcessResult; process: Process }>()
      /** The hits in the order they were found: every one after its deps; the remembered ones first. */
      const hitOrder: Array<string> = ordered.filter((n) => remembered.has(n))
      for (const [name, entry] of remembered) state.get(name)!.remembered = entry
      const unknown = names.filter((n) => !remembered.has(n))
      // Anything that will run needs the sandboxer, whose start-up (a Node start) then overlaps the lookups.
      if (!policy.read) yield* runner.warmUp
      if (policy.read) {
        // Every process's own inputs first: a file that had to be hashed (new or changed) or inputs that cannot be
        // read mean something will run, and the sandboxer then starts while the rest is looked up. One after another
        // while nothing is new (a fiber each would cost more than such a snapshot); from the first new file on, in
        // chunks stored together, so that the new files' commits (fsyncs) are shared instead of taken in turn.
        let next = 0
        yield* Effect.whileLoop({
          while: () => next < unknown.length && session.hashed === 0,
          body: () => {
            const name = unknown[next++]!
            return Effect.catchAll(ownOf(name, config.processes[name]!), () => runner.warmUp)
          },
          step: () => undefined
        })
        if (session.hashed > 0) yield* runner.warmUp
        if (next < unknown.length) {
          const rest = unknown.slice(next)
          const chunks = Array.from({ length: Math.ceil(rest.length / SNAPSHOT_CHUNK) }, (_, i) => i * SNAPSHOT_CHUNK)
          yield* Effect.forEach(chunks, (i) => ownOfMany(rest.slice(i, i + SNAPSHOT_CHUNK)), { discard: true })
        }
        const waiting = new Map<string, number>()
        const dependents = new Map<string, Array<string>>()
        for (const n of unknown) {
          const deps = (config.processes[n]!.deps ?? []).filter((d) => !remembered.has(d))
          waiting.set(n, deps.length)
          for (const d of deps) {
            const list = dependents.get(d)
            if (list === undefined) dependents.set(d, [n])
            else list.push(n)
          }
        }
        let wave = unknown.filter((n) => waiting.get(n) === 0)
        while (wave.length > 0) {
          const next: Array<string> = []
          // A wave is looked up in chunks, so that a miss is known early enough to start the sandboxer meanwhile.
          for (let start = 0; start < wave.length; start += LOOKUP_CHUNK) {
            const candidates: Array<{ name: string; process: Process }> = []
            let unknown = 0
            yield* Effect.forEach(wave.slice(start, start + LOOKUP_CHUNK), (name) => {
              const pc = config.processes[name]!
              if (pc.cache === "never") return Effect.sync(() => unknown++)
              return Effect.match(inputOf(name, pc), {
                onFailure: () => unknown++,
                onSuccess: (input) => candidates.push({ name, process: processOf(name, pc, input) })
              })
            }, { discard: true })
            const found = yield* runner.lookup(candidates.map((c) => c.process))
            if (unknown > 0 || found.some(Option.isNone)) yield* runner.warmUp
            candidates.forEach(({ name, process }, i) => {
              const hit = found[i]!
              if (Option.isNone(hit)) {
                misses.set(name, { process, deps: depOutputs(config.processes[name]!) })
                return
              }
              hits.set(name, { result: hit.value, process })
              hitOrder.push(name)
              // Dependents read it while computing their own inputs.
              state.get(name)!.result = hit.value
              records.get(name)!.actionDigest = Digest.format(hit.value.actionDigest)
              for (const d of dependents.get(name) ?? []) {
                const left = waiting.get(d)! - 1
                waiting.set(d, left)
                if (left === 0) next.push(d)
              }
            })
          }
          wave = next
        }
      }

      const finish = (report: ProcessReport) =>
        Effect.zipRight(
          Effect.sync(() => {
            reports.push(report)
            const record = records.get(report.name)
            if (record !== undefined && !report.ok && report.source !== "skipped") record.failed = failureOf(report)
          }),
          emit({ _tag: "Finished", report })
        )

      const nodes = new Map<string, Effect.Effect<Outcome, NoProducer>>()
      const nodeOf = (name: string) => nodes.get(name)!
      // Remembered hits are settled at once: there is nothing to wait for, check or write.
      const startMs = Date.now() - started
      // Per-process work goes through Effect.forEach, never a `yield*` per process in this generator: resumed a
      // thousand times, V8 takes the generator for hot and spends ~60 ms of a background thread compiling all of it,
      // which the process then waits for at exit (and the compile is thrown away: its maps change meanwhile).
      yield* Effect.forEach(hitOrder.filter((n) => remembered.has(n)), (name) => {
        unindexed.push([name, undefined])
        nodes.set(name, Effect.succeed("ok"))
        return finish({
          name,
          actionDigest: remembered.get(name)!.action,
          source: "cache-hit",
          exitCode: 0,
          timedOut: false,
          durationMs: 0,
          backtracks: 0,
          startMs,
          timings: REMEMBERED_TIMINGS,
          ok: true
        })
      }, { discard: true })
      const computeOf = (name: string) =>
        Effect.gen(function*() {
          const pc = config.processes[name]!
          // All are needed, so waiting for them one after another takes no longer, and forks no fiber each.
          const deps = yield* Effect.forEach(pc.deps ?? [], (d) => nodeOf(d))
          const startMs = Date.now() - started
          const skip = (detail: string) =>
            Effect.as(
              finish({
                name,
                actionDigest: null,
                source: "skipped",
                exitCode: null,
                timedOut: false,
                durationMs: 0,
                backtracks: 0,
                startMs,
                timings: {},
                detail,
                ok: false
              }),
              "failed" as Outcome
            )
          if (deps.some((o) => o === "failed")) return yield* skip("a dependency failed")
          if (stop) return yield* skip("stopped after a failure (use --keep-going to go on)")
          yield* emit({ _tag: "Started", name })
          const hit = hits.get(name)
          const attempt = hit !== undefined ? Either.right(hit) : yield* Effect.either(execute(name, policy))
          const node = state.get(name)!
          if (Either.isLeft(attempt)) {
            const error = attempt.left
            if (error._tag === "NoProducer") return yield* Effect.fail(error)
            if (options.keepGoing !== true) stop = true
            yield* finish({
              name,
              actionDigest: null,
              source: "error",
              exitCode: null,
              timedOut: false,
              durationMs: Date.now() - started - startMs,
              backtracks: node.backtracks,
              startMs,
              timings: {},
              detail: describe(name, error),
              error,
              ok: false
            })
            return "failed" as Outcome
          }
          const p = attempt.right.process
          let result = attempt.right.result
          node.result = result
          unindexed.push([name, result])
          const ok = result.succeeded
          let detail: string | undefined
          let error: ProcessFailure | undefined
          if (ok) {
            const writeOutputs = (r: ProcessResult) => {
              const seen: Array<SnapshotObservation> = []
              return Effect.either(
                writeBack(
                  store,
                  r.outputDigest,
                  path.join(workspace, p.workingDirectory),
                  p.outputDirectories,
                  session,
                  seen,
                  runner.handoff
                ).pipe(Effect.tap(() => outputsSeen.set(name, { result: r, seen })))
              )
            }
            let back = yield* writeOutputs(result)
            if (Either.isLeft(back) && back.left._tag === "MissingDigest" && node.backtracks < maxBacktracks) {
              // A cache hit whose output bytes are gone (under --cache-content defer): re-run it, as for a consumer.
              node.backtracks++
              yield* Effect.logWarning(
                `${name}: its cached output ${Digest.format(back.left.digest)} is missing from the store: re-running it`
              )
              const fresh = yield* Effect.either(execute(name, { read: false, write: true }))
              if (Either.isLeft(fresh)) {
                if (fresh.left._tag === "NoProducer") return yield* Effect.fail(fresh.left)
                error = fresh.left
                detail = describe(name, fresh.left)
              } else {
                node.result = result = fresh.right.result
                unindexed.push([name, fresh.right.result])
                back = yield* writeOutputs(fresh.right.result)
              }
            }
            if (detail === undefined && Either.isLeft(back)) {
              error = back.left
              detail = `cannot write outputs back: ${back.left.message}`
            }
          } else {
            if (options.keepGoing !== true) stop = true
            const stderr = yield* store.getFile(result.stderrDigest).pipe(
              Effect.map((b) => Buffer.from(b).toString("utf8").split("\n").slice(-20).join("\n").trimEnd()),
              Effect.orElseSucceed(() => "")
            )
            detail = stderr
          }
          yield* finish({
            name,
            actionDigest: Digest.format(result.actionDigest),
            source: result.source,
            exitCode: result.exitCode,
            timedOut: result.timedOut,
            durationMs: result.durationMs,
            backtracks: node.backtracks,
            startMs,
            timings: result.timings,
            ...(detail !== undefined ? { detail } : {}),
            ...(error !== undefined ? { error } : {}),
            ...(!ok ? { reproduce: reproduce(p) } : {}),
            ok: ok && detail === undefined
          })
          return ok && detail === undefined ? "ok" as Outcome : "failed" as Outcome
        })
      yield* Effect.forEach(
        names.filter((n) => !remembered.has(n)),
        (name) => Effect.map(Effect.cached(computeOf(name)), (node) => void nodes.set(name, node)),
        { discard: true }
      )
      // The hits are settled (indexed, written back, reported) one after another in one fiber, in the order they
      // were found; a fiber each cost more than settling one. Everything else runs as the graph allows.
      const settling = yield* Effect.fork(
        Effect.forEach(hitOrder.filter((n) => !remembered.has(n)), nodeOf, { discard: true })
      )
      // Remembered ones are settled already: a fiber each would cost more than the rest of an edit's run.
      yield* Effect.forEach(names.filter((n) => !hits.has(n) && !remembered.has(n)), nodeOf, {
        concurrency: "unbounded",
        discard: true
      })
      yield* Fiber.join(settling)
      yield* Effect.try(() => RunRecords.write(store.options.root, workspace, records)).pipe(
        Effect.catchAll((e) => Effect.logWarning(`could not record the run for \`kiln explain\`: ${e.error}`))
      )
      yield* MemoRecord.record({
        root,
        workspace,
        config,
        configHash: options.configHash ?? "",
        generation,
        previous: memo,
        startedNs: BigInt(started) * 1_000_000n,
        names: new Set(names),
        remembered: new Set(remembered.keys()),
        candidates: reports.flatMap((r) => {
          const result = state.get(r.name)!.result
          const out = outputsSeen.get(r.name)
          // Only a result that is the one written back, of a process that may be cached, and that the action cache
          // holds (a run with cache writes off leaves what it ran out of it): the memo answers as the cache would.
          if (!r.ok || remembered.has(r.name) || result === undefined || out?.result !== result) return []
          if (config.processes[r.name]!.cache === "never") return []
          if (result.source === "ran" && !policy.write) return []
          return [{
            name: r.name,
            result,
            files: owned.get(r.name)?.files ?? {},
            inputs: inputsSeen.get(r.name) ?? [],
            outputs: out.seen,
            deps: records.get(r.name)?.deps
          }]
        }),
        keyOf
      }).pipe(Effect.catchAll((e) => Effect.logDebug(`could not write the run memo: ${e.message}`)))
      const order = new Map(names.map((n, i) => [n, i]))
      const processes = [...reports].sort((a, b) => a.startMs - b.startMs || order.get(a.name)! - order.get(b.name)!)
      return {
        processes,
        ran: processes.filter((p) => p.source === "ran").length,
        cacheHits: processes.filter((p) => p.source === "cache-hit").length,
        failed: processes.filter((p) => !p.ok && p.source !== "skipped").length,
        backtracks: processes.reduce((n, p) => n + p.backtracks, 0),
        wallMs: Date.now() - started
      } satisfies RunReport
    })

  const explain = (
    options: {
      readonly workspace: string
      readonly config: Config
      readonly name: string
      readonly configName?: string
    }
  ) =>
    Effect.gen(function*() {
      const { config } = options
      const workspace = path.resolve(options.workspace)
      const last = RunRecords.read(store.options.root, workspace)
      const session = yield* store.snapshotSession(workspace)
      const memo = new Map<
        string,
        { key: Digest.Digest; hit: boolean; now: RunRecords.RunRecord; notes: Array<string> }
      >()
      // Deps are assumed to produce the outputs its last run consumed; a dep that would itself run is named.
      const look = (name: string): Effect.Effect<
        { key: Digest.Digest; hit: boolean; now: RunRecords.RunRecord; notes: Array<string> },
        InvalidConfig | StoreError | MissingDigest | InputConflict
      > =>
        Effect.gen(function*() {
          const known = memo.get(name)
          if (known !== undefined) return known
          const pc = config.processes[name]!
          const own = yield* ownInputs(store, workspace, name, pc, session, options.configName ?? "kiln.json")
          const notes: Array<string> = []
          const deps: Record<string, Digest.Digest> = {}
          for (const dep of pc.deps ?? []) {
            const d = yield* look(dep)
            if (!d.hit) notes.push(`dep ${dep} would run first: if its outputs change, this runs too`)
            const outputs = last[name]?.deps[dep]
            if (outputs === undefined) notes.push(`dep ${dep}: never recorded as an input of it`)
            else deps[dep] = Either.getOrThrow(Digest.parse(outputs))
          }
          const p = processOf(name, pc, yield* mergeInputs(store, config, own.digest, deps))
          const key = actionDigest(p)
          const hit = pc.cache !== "never" && (yield* store.getActionResult(key))._tag === "Some"
          const now: RunRecords.RunRecord = {
            argv: [...pc.argv],
            env: { ...pc.env },
            workingDirectory: pc.workingDirectory ?? "",
            inputs: own.files,
            deps: Object.fromEntries(Object.entries(deps).map(([k, v]) => [k, Digest.format(v)])),
            actionDigest: Digest.format(key)
          }
          const found = { key, hit, now, notes }
          memo.set(name, found)
          return found
        })
      const { hit, key, notes, now } = yield* look(options.name)
      const name = options.name
      const verdict = hit
        ? `${name}: would hit the cache (action ${Digest.format(key)})`
        : `${name}: would run (action ${Digest.format(key)} is ${
          config.processes[name]!.cache === "never" ? "never cached" : "not in the cache"
        })`
      const before = last[name]
      const changes = before === undefined
        ? ["no earlier run of it is recorded in this store"]
        : before.actionDigest !== now.actionDigest
        ? RunRecords.diff(before, now)
        : hit
        ? ["nothing changed since its last run"]
        : before.failed !== undefined
        ? [`nothing changed since its last run, which failed (${before.failed}): a failure is not cached`]
        : ["nothing changed since its last run, whose result the cache no longer holds"]
      const header = before !== undefined && before.actionDigest !== now.actionDigest
        ? [`changed since its last run (action ${before.actionDigest}):`]
        : []
      return [verdict, ...header, ...[...changes, ...notes].map((l) => `  ${l}`)]
    })

  return { run: (o) => Effect.scoped(run(o)), explain: (o) => Effect.scoped(explain(o)) } satisfies Service
})

/**
 * @since 0.1.0
 * @category layers
 */
export const layer: Layer.Layer<Engine, never, Store | ProcessRunner> = Layer.effect(Engine, make)
