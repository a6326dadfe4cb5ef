/**
 * The graph: each process waits for its deps, runs (or takes the hit the lookups found), writes its outputs back into
 * the workspace, and is reported. A process that ran lets its dependents start before its write-back. A hit whose
 * output bytes turn out gone while being written back is re-run.
 *
 * @internal
 */
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as FiberId from "effect/FiberId"
import * as Queue from "effect/Queue"
import * as ResolvedConfig from "../../../domain/config/ResolvedConfig.js"
import * as Digest from "../../../domain/Digest.js"
import type { Process, ProcessResult } from "../../../domain/Process.js"
import type { NoProducer } from "../../../domain/RunErrors.js"
import type { ProcessFailure, ProcessReport } from "../Engine.js"
import { execute, type Executed } from "./execute.js"
import { REMEMBERED_TIMINGS } from "./memo/memoConsult.js"
import { readOnlyHint } from "./readOnlyHint.js"
import { emit, type RunState } from "./runState.js"
import { networkHint, undeclaredHints } from "./sandboxHints.js"

type Outcome = "ok" | "failed"

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

/**
 * `s` as one shell word. A control character (or a bidirectional control) is written as an escape in `$'…'`, which
 * bash, zsh and ksh read back as the character: printed raw, the re-run line could redraw the terminal or forge a line.
 */
const quote = (s: string) =>
  /^[\w@%+=:,./-]+$/.test(s)
    ? s
    : /[\u0000-\u001f\u007f-\u009f\u202a-\u202e\u2066-\u2069]/.test(s)
    ? `$'${
      s.replace(/[\\']/g, "\\$&").replace(
        /[\u0000-\u001f\u007f-\u009f\u202a-\u202e\u2066-\u2069]/g,
        (c) =>
          c.charCodeAt(0) < 0x80
            ? `\\x${c.charCodeAt(0).toString(16).padStart(2, "0")}`
            : `\\u${c.charCodeAt(0).toString(16)}`
      )
    }'`
    : `'${s.replace(/'/g, `'\\''`)}'`

/** A `kiln exec` command that re-runs `p` exactly. */
const reproduce = (state: RunState, p: Process) =>
  [
    "kiln exec",
    ...(state.options.storeDir !== undefined ? [`--store-dir ${quote(state.options.storeDir)}`] : []),
    ...(state.options.reproduceArgs ?? []).map(quote),
    `--input ${Digest.format(p.inputDigest)}`,
    ...(p.workingDirectory !== "" ? [`--working-directory ${quote(p.workingDirectory)}`] : []),
    ...Object.entries(p.env).map(([k, v]) => `--env ${quote(`${k}=${v}`)}`),
    // A pass-through variable by reference, never its value: the shell that re-runs it puts in its own.
    ...p.passThroughEnv.map((entry) => ResolvedConfig.entryOf(entry).name).filter((k) => /^[A-Za-z_]\w*$/.test(k))
      .map((k) => `--env "${k}=$${k}"`),
    "--cache never --",
    ...p.argv.map(quote)
  ].join(" ")

const finish = (state: RunState, report: ProcessReport) =>
  Effect.zipRight(
    Effect.sync(() => {
      state.reports.push(report)
      const record = state.records.get(report.name)
      if (record !== undefined && !report.ok && report.source !== "skipped") record.failed = failureOf(report)
      if (record !== undefined && report.stdoutDigest !== undefined) {
        record.stdout = report.stdoutDigest
        record.stderr = report.stderrDigest!
      }
    }),
    emit(state, { _tag: "Finished", report })
  )

const blank = (name: string, startMs: number) => ({
  name,
  actionDigest: null,
  exitCode: null,
  timedOut: false,
  durationMs: 0,
  backtracks: 0,
  startMs,
  timings: {},
  ok: false
})

/** How many of the last lines of a failed tool's stdout and of its stderr its report shows, unless told. */
export const FAILURE_LINES = 20

/** A log larger than this is not read whole for its last lines: `kiln logs` shows it. */
const TAIL_READ_MAX = 64 * 1024 * 1024

/** A log's last `lines` lines, and how many it has; when it cannot be read, a line saying so instead. */
const tailOf = (state: RunState, which: "stdout" | "stderr", digest: Digest.Digest, lines: number) =>
  digest.sizeBytes > TAIL_READ_MAX
    ? Effect.succeed({
      text: `(its ${which} is ${digest.sizeBytes} bytes: \`kiln logs\` prints it)`,
      shown: 1,
      total: 1
    })
    : state.store.getFile(digest).pipe(
      Effect.map((b) => {
        const all = Buffer.from(b).toString("utf8").trimEnd()
        const split = all === "" ? [] : all.split("\n")
        const kept = lines === 0 ? [] : split.slice(-lines)
        return { text: kept.join("\n"), shown: kept.length, total: split.length }
      }),
      Effect.catchAll((e) =>
        Effect.as(
          Effect.logWarning(`could not read the ${which} of a failed process: ${e.message}`),
          { text: `(its ${which} ${Digest.format(digest)} could not be read: ${e.message})`, shown: 1, total: 1 }
        )
      )
    )

/**
 * The last lines of a failed tool's stdout and stderr (many tools, `tsc` and `node --test` among them, report on
 * stdout), each headed by its stream's name when both say something or when lines were left out.
 */
const outputTail = (state: RunState, name: string, result: ProcessResult) =>
  Effect.map(
    Effect.zip(
      tailOf(state, "stdout", result.stdoutDigest, state.options.failureLines ?? FAILURE_LINES),
      tailOf(state, "stderr", result.stderrDigest, state.options.failureLines ?? FAILURE_LINES)
    ),
    ([out, err]) => {
      const both = out.total > 0 && err.total > 0
      const part = (which: string, t: { text: string; shown: number; total: number }) =>
        t.total === 0
          ? []
          : t.shown < t.total
          ? [
            `--- ${which}: its last ${t.shown} of ${t.total} lines (\`kiln logs ${name}\` prints them all) ---`,
            t.text
          ]
          : both
          ? [`--- ${which} ---`, t.text]
          : [t.text]
      return { text: [...part("stdout", out), ...part("stderr", err)].join("\n"), stdout: out.text, stderr: err.text }
    }
  )

/**
 * A failed tool's output tails, and hints after them: where it failed writing into a read-only input tree, where it
 * failed for want of the network, and the workspace files its stdout or stderr names that it did not declare.
 */
const failedTail = (state: RunState, name: string, executed: Executed) =>
  Effect.map(outputTail(state, name, executed.result), (tail) => {
    const { process: proc, result } = executed
    const both = `${tail.stderr}\n${tail.stdout}`
    const hints = [
      readOnlyHint(tail.stderr, proc),
      networkHint(name, both, proc, result),
      ...undeclaredHints(name, both, proc, state.config, state.workspace)
    ].filter((h): h is string => h !== undefined)
    const hint = hints.length === 0 ? undefined : hints.join("\n")
    return { detail: hint === undefined ? tail.text : `${tail.text}\n${hint}`, hint }
  })

/**
 * Writes a result's outputs back into the workspace, recording what it left there for the memo. The workspace lock is
 * taken first (once per run): another run's write-backs are never interleaved with this one's.
 */
const writeOutputs = (state: RunState, name: string, p: Process, r: ProcessResult) =>
  Effect.either(Effect.gen(function*() {
    // A process without outputs writes nothing: it needs no lock.
    if (p.outputFiles.length > 0 || p.outputDirectories.length > 0) {
      const { previousDied } = yield* state.lock.hold
      if (previousDied && state.sweep === undefined) state.sweep = new Set()
    }
    const seen = yield* state.workspaceWriter.writeBack(
      r.outputDigest,
      {
        workspace: state.workspace,
        workingDirectory: p.workingDirectory,
        declaredDirectories: p.outputDirectories,
        ...(state.sweep !== undefined ? { sweep: state.sweep } : {})
      },
      state.session
    )
    state.outputsSeen.set(name, { result: r, seen })
    return seen
  }))

/**
 * A successful result written back; a hit whose output bytes are gone (under --cache-content defer) is re-run, as
 * for a consumer, and so is a hit whose outputs write-back refuses. Says the result written and why the outputs are not in the workspace, if they are not.
 */
const settleSuccess = (state: RunState, name: string, executed: Executed) =>
  Effect.gen(function*() {
    const node = state.nodes.get(name)!
    let result = executed.result
    // An intermediate output left where it is: consumers take it from the store (or the remote) by digest.
    if (!state.writesBack(name)) return { result, error: undefined, detail: undefined }
    let back = yield* writeOutputs(state, name, executed.process, result)
    // A remote hit taken under validate or defer has its files fetched now, when they are needed.
    if (
      Either.isLeft(back) && back.left._tag === "MissingDigest" && (yield* state.runner.fetchTree(result.outputDigest))
    ) {
      back = yield* writeOutputs(state, name, executed.process, result)
    }
    const missing = Either.isLeft(back) && back.left._tag === "MissingDigest" && node.backtracks < state.maxBacktracks
    // A cached result that cannot be written back (a declared directory as a symlink: a poisoned or old entry) is
    // replaced by running the process, as a remote entry refused on reading is.
    const refused = Either.isLeft(back) && back.left._tag === "InvalidOutput" &&
      (result.source === "cache-hit" || result.source === "remote-cache")
    if (Either.isLeft(back) && (missing || refused)) {
      if (back.left._tag === "MissingDigest") {
        node.backtracks++
        yield* Effect.logWarning(
          `${name}: its cached output ${Digest.format(back.left.digest)} is missing from the store: re-running it`
        )
      } else {
        yield* Effect.logWarning(`${name}: its cached result cannot be written back (${back.left.message}): running it`)
      }
      const fresh = yield* Effect.either(execute(state, name, { read: false, write: true }, true))
      if (Either.isLeft(fresh)) {
        if (fresh.left._tag === "NoProducer") return yield* Effect.fail(fresh.left)
        return { result, error: fresh.left, detail: describe(name, fresh.left) }
      }
      node.result = result = fresh.right.result
      state.unindexed.push([name, result])
      back = yield* writeOutputs(state, name, fresh.right.process, result)
    }
    if (Either.isLeft(back)) {
      return { result, error: back.left, detail: `cannot write outputs back: ${back.left.message}` }
    }
    return { result, error: undefined, detail: undefined }
  })

/** What the graph tells a process it settles of its dependents. */
interface Turn {
  /** Whether a dependent waits for this process alone (it is the last of that one's deps to settle). */
  readonly awaited: boolean
  /** Lets the dependents whose deps are then all settled start; whether any could. */
  readonly release: (outcome: Outcome) => Effect.Effect<boolean>
}

/**
 * One process of the graph, from its deps' outcomes to its report. After a run here its dependents are released as
 * soon as its outputs are in the store, since they take them from there by digest: its own write-back and report then
 * overlap their tools (and, when one waits for it alone, the closing of its sandbox too: `awaited`). A hit is written
 * back first: its bytes may turn out gone and the process re-run, with other outputs.
 */
const settle = (state: RunState, name: string, deps: ReadonlyArray<Outcome>, turn: Turn) =>
  Effect.gen(function*() {
    const startMs = Date.now() - state.started
    const skip = (detail: string) =>
      Effect.as(finish(state, { ...blank(name, startMs), source: "skipped", detail }), "failed" as Outcome)
    if (deps.some((o) => o === "failed")) return yield* skip("a dependency failed")
    if (state.stop) return yield* skip("stopped after a failure (use --keep-going to go on)")
    const hit = state.hits.get(name)
    const attempt = hit !== undefined
      ? Either.right(hit)
      : yield* Effect.either(execute(state, name, state.policy, true, turn.awaited))
    const node = state.nodes.get(name)!
    // From when its tool started, not from when it was ready and waited for a slot; a hit, from when it was settled.
    const span = () =>
      node.startedAt !== undefined
        ? { startMs: node.startedAt - state.started, durationMs: Date.now() - node.startedAt }
        : undefined
    if (Either.isLeft(attempt)) {
      const error = attempt.left
      if (error._tag === "NoProducer") return yield* Effect.fail(error)
      if (state.options.keepGoing !== true) state.stop = true
      yield* finish(state, {
        ...blank(name, startMs),
        source: "error",
        durationMs: Date.now() - state.started - startMs,
        ...span(),
        backtracks: node.backtracks,
        detail: describe(name, error),
        error
      })
      return "failed" as Outcome
    }
    node.result = attempt.right.result
    state.unindexed.push([name, attempt.right.result])
    const ran = attempt.right.result.succeeded
    if (!ran && state.options.keepGoing !== true) state.stop = true
    // The dependents' workers go first: this one's write-back and report fit in while their tools run.
    if (ran && attempt.right.result.source === "ran" && (yield* turn.release("ok"))) yield* Effect.yieldNow()
    const failed = ran ? undefined : yield* failedTail(state, name, attempt.right)
    const { detail, error, result } = failed === undefined
      ? yield* settleSuccess(state, name, attempt.right)
      : { result: attempt.right.result, error: undefined, detail: failed.detail }
    const ok = ran && detail === undefined
    yield* finish(state, {
      name,
      actionDigest: Digest.format(result.actionDigest),
      source: result.source,
      exitCode: result.exitCode,
      timedOut: result.timedOut,
      durationMs: result.durationMs,
      backtracks: node.backtracks,
      startMs,
      ...span(),
      timings: result.timings,
      stdoutDigest: Digest.format(result.stdoutDigest),
      stderrDigest: Digest.format(result.stderrDigest),
      ...(result.sandbox !== undefined ? { sandbox: result.sandbox } : {}),
      ...(result.undeclaredWrites !== undefined ? { undeclaredWrites: result.undeclaredWrites } : {}),
      ...(detail !== undefined ? { detail } : {}),
      ...(failed?.hint !== undefined ? { hint: failed.hint } : {}),
      ...(error !== undefined ? { error } : {}),
      ...(!ran ? { reproduce: reproduce(state, attempt.right.process) } : {}),
      ok
    })
    return ok ? "ok" as Outcome : "failed" as Outcome
  })

/** Remembered hits are settled at once: there is nothing to wait for, check or write. */
const settleRemembered = (state: RunState) => {
  const startMs = Date.now() - state.started
  return Effect.forEach(state.hitOrder.filter((n) => state.remembered.has(n)), (name) => {
    state.unindexed.push([name, undefined])
    const entry = state.remembered.get(name)!
    return finish(state, {
      name,
      actionDigest: entry.action,
      stdoutDigest: entry.stdout,
      stderrDigest: entry.stderr,
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
}

/**
 * Settles every process of the run. The hits are settled (written back, reported) one after another in one fiber,
 * in the order they were found: a fiber each cost more than settling one. Everything else is settled by the runner's
 * `inFlight` workers, each taking the next process whose deps are all settled. A process that is not ready yet holds
 * nothing: no fiber, no lookup, no action lock. (With a fiber per process, all started at once, every ready one waited
 * at the runner's bound with its half-made run held, and a wide graph's memory grew with its size: report.md, "Issue
 * #25, session 19".) Settling one process never waits for another's outcome, so the workers cannot all be stuck; a
 * backtrack re-runs a producer within its consumer's turn.
 *
 * @internal
 */
export const runGraph = (state: RunState): Effect.Effect<void, NoProducer> =>
  Effect.gen(function*() {
    yield* settleRemembered(state)
    const todo = state.names.filter((n) => !state.remembered.has(n))
    if (todo.length === 0) return
    const depsOf = (name: string) => state.config.processes[name]!.deps ?? []
    const outcomes = new Map(todo.map((n) => [n, Deferred.unsafeMake<Outcome>(FiberId.none)]))
    const outcomeOf = (name: string): Effect.Effect<Outcome> => {
      const outcome = outcomes.get(name)
      return outcome === undefined ? Effect.succeed("ok") : Deferred.await(outcome)
    }
    // What each process the workers take still waits for, and who waits for each.
    const waiting = new Map<string, number>()
    const dependents = new Map<string, Array<string>>()
    for (const name of todo) {
      if (state.hits.has(name)) continue
      const open = depsOf(name).filter((d) => outcomes.has(d))
      waiting.set(name, open.length)
      for (const d of open) {
        const list = dependents.get(d)
        if (list === undefined) dependents.set(d, [name])
        else list.push(name)
      }
    }
    const workers = Math.max(1, Math.min(state.runner.inFlight ?? todo.length, todo.length))
    // Names to settle; `undefined` tells a worker that everything is settled.
    const ready = yield* Queue.unbounded<string | undefined>()
    let left = todo.length
    const done = new Set<string>()
    const settled = (name: string, outcome: Outcome): Effect.Effect<boolean> =>
      Effect.suspend(() => {
        // Once each: `left` counts processes, not calls.
        if (done.has(name)) return Effect.succeed(false)
        done.add(name)
        Deferred.unsafeDone(outcomes.get(name)!, Effect.succeed(outcome))
        const next: Array<string | undefined> = []
        for (const d of dependents.get(name) ?? []) {
          const still = waiting.get(d)! - 1
          waiting.set(d, still)
          if (still === 0) next.push(d)
        }
        if (--left === 0) { for (let i = 0; i < workers; i++) next.push(undefined) }
        return next.length === 0 ? Effect.succeed(false) : Effect.as(Queue.offerAll(ready, next), next[0] !== undefined)
      })
    const turnOf = (name: string): Turn => ({
      awaited: (dependents.get(name) ?? []).some((d) => waiting.get(d) === 1),
      release: (outcome) => settled(name, outcome)
    })
    const settleOne = (name: string) =>
      Effect.flatMap(
        // All its deps are needed, so waiting for them one after another takes no longer.
        Effect.forEach(depsOf(name), outcomeOf),
        (deps) => Effect.flatMap(settle(state, name, deps, turnOf(name)), (outcome) => settled(name, outcome))
      )
    const worker = Effect.gen(function*() {
      for (;;) {
        const name = yield* Queue.take(ready)
        if (name === undefined) return
        yield* settleOne(name)
      }
    })
    yield* Queue.offerAll(ready, todo.filter((n) => waiting.get(n) === 0))
    const hits = [...new Set(state.hitOrder)].filter((n) => !state.remembered.has(n))
    yield* Effect.all([
      Effect.forEach(hits, settleOne, { discard: true }),
      Effect.all(Array.from({ length: workers }, () => worker), { concurrency: "unbounded", discard: true })
    ], { concurrency: "unbounded", discard: true })
  })
