/**
 * The engine: runs a graph of processes from `kiln.json` concurrently, each on its own inputs plus its deps'
 * outputs, writes successful outputs back into the workspace, and backtracks when bytes it relied on are gone: it
 * re-runs the process of this run that produced them (cache reads off, writes on) and retries the consumer.
 *
 * @since 0.1.0
 */
import { Context, Duration, Effect, Either, Layer, Schema } from "effect"
import * as path from "node:path"
import picomatch from "picomatch"
import type { Config, ProcessConfig } from "../domain/Config.js"
import * as Digest from "../domain/Digest.js"
import * as DurationText from "../domain/DurationText.js"
import { Process, type ProcessResult } from "../domain/Process.js"
import { writeBack } from "./internal/writeBack.js"
import { ProcessRunner } from "./ProcessRunner.js"
import { Store } from "./Store.js"

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
}

/**
 * Bytes a process needed are gone and no process of this run produced them: nothing to re-run.
 *
 * @since 0.1.0
 * @category errors
 */
export class NoProducer extends Schema.TaggedError<NoProducer>("kiln/NoProducer")("NoProducer", {
  digest: Schema.String,
  consumer: Schema.String
}) {
  override get message(): string {
    return `missing blob ${this.digest} needed by \`${this.consumer}\`, and no process of this run produced it`
  }
}

/**
 * @since 0.1.0
 * @category models
 */
export interface Service {
  readonly run: (options: RunOptions) => Effect.Effect<RunReport, NoProducer>
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

const closure = (config: Config, targets: ReadonlyArray<string>) => {
  const seen = new Set<string>()
  const visit = (name: string) => {
    if (seen.has(name)) return
    seen.add(name)
    for (const dep of config.processes[name]!.deps ?? []) visit(dep)
  }
  targets.forEach(visit)
  return [...seen]
}

const segments = (p: string | undefined) => (p ?? "").split("/").filter((s) => s !== "" && s !== ".")

const quote = (s: string) => /^[\w@%+=:,./-]+$/.test(s) ? s : `'${s.replace(/'/g, `'\\''`)}'`

type Outcome = "ok" | "failed"

interface NodeState {
  result?: ProcessResult
  backtracks: number
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
      const names = closure(config, options.targets ?? Object.keys(config.processes))
      const policy = policyOf(options.cache ?? "read-write")
      const maxBacktracks = options.maxBacktracks ?? 3
      const emit = (e: Event) => options.onEvent?.(e) ?? Effect.void
      const state = new Map<string, NodeState>(names.map((n) => [n, { backtracks: 0 }]))
      const producers = new Map<string, string>()
      const reports: Array<ProcessReport> = []
      let stop = false

      const index = (name: string, result: ProcessResult) =>
        Effect.gen(function*() {
          for (const d of [result.outputDigest, result.stdoutDigest, result.stderrDigest]) producers.set(d.hash, name)
          const entries = yield* store.listTree(result.outputDigest).pipe(
            Effect.catchAll(() => Effect.succeed([] as ReadonlyArray<{ digest?: Digest.Digest }>))
          )
          for (const e of entries) {
            if (e.digest !== undefined && !Digest.isEmpty(e.digest)) producers.set(e.digest.hash, name)
          }
        })

      const inputOf = (name: string, pc: ProcessConfig) =>
        Effect.gen(function*() {
          const globs = pc.inputs ?? []
          let own = Digest.empty
          if (globs.some((g) => !g.startsWith("!"))) {
            own = yield* store.snapshot(workspace, globs)
            const files = (yield* store.listTree(own)).filter((e) => e.type !== "directory").map((e) => e.path)
            for (const [i, g] of globs.entries()) {
              if (g.startsWith("!")) continue
              const matches = picomatch(g, { dot: true })
              if (!files.some((f) => matches(f))) {
                return yield* Effect.fail(`kiln.json: processes.${name}.inputs[${i}]: glob "${g}" matches nothing`)
              }
            }
          }
          const layers = [{ digest: own, at: [] as ReadonlyArray<string> }]
          for (const dep of pc.deps ?? []) {
            const r = state.get(dep)!.result!
            layers.push({ digest: r.outputDigest, at: segments(config.processes[dep]!.workingDirectory) })
          }
          return yield* store.mergeTrees(layers).pipe(
            Effect.mapError((e) => e._tag === "StoreError" ? `${name}: ${e.message}` : e)
          )
        })

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
        })
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
      ): Effect.Effect<{ result: ProcessResult; process: Process }, NoProducer | string> =>
        Effect.gen(function*() {
          const pc = config.processes[name]!
          const node = state.get(name)!
          for (;;) {
            const attempt = yield* Effect.either(
              Effect.flatMap(inputOf(name, pc), (input) => {
                const p = processOf(name, pc, input)
                return Effect.zipRight(
                  options.beforeAttempt?.(name, input, (n) => state.get(n)?.result) ?? Effect.void,
                  Effect.map(runner.run(p, { cache }), (result) => ({ result, process: p }))
                )
              })
            )
            if (Either.isRight(attempt)) return attempt.right
            const e = attempt.left
            if (typeof e === "string") return yield* Effect.fail(e)
            if (e._tag !== "MissingDigest") return yield* Effect.fail(`${name}: ${e.message}`)
            const producer = producers.get(e.digest.hash)
            if (producer === undefined) {
              return yield* new NoProducer({ digest: Digest.format(e.digest), consumer: name })
            }
            if (node.backtracks >= maxBacktracks) {
              return yield* Effect.fail(
                `${name}: gave up after ${maxBacktracks} backtracks (missing ${Digest.format(e.digest)})`
              )
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
            yield* index(producer, fresh.result)
          }
        })

      const finish = (report: ProcessReport) =>
        Effect.zipRight(Effect.sync(() => reports.push(report)), emit({ _tag: "Finished", report }))

      const nodes = new Map<string, Effect.Effect<Outcome, NoProducer>>()
      const nodeOf = (name: string) => nodes.get(name)!
      for (const name of names) {
        const compute = Effect.gen(function*() {
          const pc = config.processes[name]!
          const deps = yield* Effect.forEach(pc.deps ?? [], (d) => nodeOf(d), { concurrency: "unbounded" })
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
          const attempt = yield* Effect.either(execute(name, policy))
          const node = state.get(name)!
          if (Either.isLeft(attempt)) {
            if (typeof attempt.left !== "string") return yield* Effect.fail(attempt.left)
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
              detail: attempt.left,
              ok: false
            })
            return "failed" as Outcome
          }
          const p = attempt.right.process
          let result = attempt.right.result
          node.result = result
          yield* index(name, result)
          const ok = result.succeeded
          let detail: string | undefined
          if (ok) {
            const writeOutputs = (r: ProcessResult) =>
              Effect.either(
                writeBack(store, r.outputDigest, path.join(workspace, p.workingDirectory), p.outputDirectories)
              )
            let back = yield* writeOutputs(result)
            if (Either.isLeft(back) && back.left._tag === "MissingDigest" && node.backtracks < maxBacktracks) {
              // A cache hit whose output bytes are gone (under --cache-content defer): re-run it, as for a consumer.
              node.backtracks++
              yield* Effect.logWarning(
                `${name}: its cached output ${Digest.format(back.left.digest)} is missing from the store: re-running it`
              )
              const fresh = yield* execute(name, { read: false, write: true }).pipe(
                Effect.catchIf((e): e is string => typeof e === "string", (e) => Effect.succeed(e))
              )
              if (typeof fresh === "string") {
                detail = fresh
              } else {
                node.result = result = fresh.result
                yield* index(name, fresh.result)
                back = yield* writeOutputs(fresh.result)
              }
            }
            if (detail === undefined && Either.isLeft(back)) detail = `cannot write outputs back: ${back.left.message}`
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
            ...(!ok ? { reproduce: reproduce(p) } : {}),
            ok: ok && detail === undefined
          })
          return ok && detail === undefined ? "ok" as Outcome : "failed" as Outcome
        })
        nodes.set(name, yield* Effect.cached(compute))
      }
      yield* Effect.forEach(names, nodeOf, { concurrency: "unbounded", discard: true })
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

  return { run } satisfies Service
})

/**
 * @since 0.1.0
 * @category layers
 */
export const layer: Layer.Layer<Engine, never, Store | ProcessRunner> = Layer.effect(Engine, make)
