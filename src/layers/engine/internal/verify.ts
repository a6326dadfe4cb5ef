/**
 * `Engine.verify`: re-runs processes whose results the cache holds, each in a fresh sandbox with the cache off, and
 * compares what they make now with the cached result. A process whose outputs differ from run to run (a timestamp, a
 * random temp path, an unordered map) is the commonest way a shared cache goes bad; this finds it before another
 * machine gets a wrong hit from it. Nothing in the cache changes unless `evict` asks for the entries that did not
 * reproduce to go.
 *
 * @internal
 */
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Random from "effect/Random"
import * as path from "node:path"
import * as Digest from "../../../domain/Digest.js"
import type { ProcessResult } from "../../../domain/Process.js"
import type { RemoteTier } from "../../../domain/RemoteTier.js"
import type { ProcessRunner } from "../../runner/ProcessRunner.js"
import type { Store, TreeEntry } from "../../store/Store.js"
import * as StoreMaintenance from "../../store/StoreMaintenance.js"
import type { OutputDifference, VerifiedProcess, VerifyOptions } from "../Engine.js"
import { type Looked, looker } from "./explain.js"
import * as RunRecords from "./runRecords.js"

/** What a cached result is compared on: a local hit's, or a remote entry's. */
type Cached = Pick<ProcessResult, "exitCode" | "timedOut" | "outputDigest">

/** Files at most this size whose bytes are UTF-8 text get their first differing line shown. */
const TEXT_DIFF_BYTES = 64 * 1024
/** A shown line is cut to this many characters. */
const LINE_CHARS = 200

const asText = (bytes: Uint8Array): string | undefined => {
  if (bytes.length > TEXT_DIFF_BYTES || bytes.includes(0)) return undefined
  try {
    return new TextDecoder("utf-8", { fatal: true }).decode(bytes)
  } catch {
    return undefined
  }
}

const cut = (line: string) => (line.length > LINE_CHARS ? `${line.slice(0, LINE_CHARS)}…` : line)

/** The first line (from 1) where two texts differ; an absent line reads as empty. */
export const firstDifferingLine = (cached: string, fresh: string) => {
  const a = cached.split("\n")
  const b = fresh.split("\n")
  for (let i = 0; i < Math.max(a.length, b.length); i++) {
    if (a[i] !== b[i]) return { number: i + 1, cached: cut(a[i] ?? ""), fresh: cut(b[i] ?? "") }
  }
  return undefined
}

const sameEntry = (a: TreeEntry, b: TreeEntry) =>
  a.type === b.type && a.digest?.hash === b.digest?.hash && (a.isExecutable ?? false) === (b.isExecutable ?? false) &&
  a.target === b.target

/** The paths whose entries differ between two output trees, each file's first differing line when it is text. */
const compareTrees = (store: Store["Type"], cached: Digest.Digest, fresh: Digest.Digest) =>
  Effect.gen(function*() {
    if (cached.hash === fresh.hash) return []
    const [was, now] = yield* Effect.all([store.listTree(cached), store.listTree(fresh)])
    const byPath = (entries: ReadonlyArray<TreeEntry>) => new Map(entries.map((e) => [e.path, e]))
    const [before, after] = [byPath(was), byPath(now)]
    const out: Array<OutputDifference> = []
    for (const p of [...new Set([...before.keys(), ...after.keys()])].sort()) {
      const a = before.get(p)
      const b = after.get(p)
      if (a !== undefined && b !== undefined && sameEntry(a, b)) continue
      // A directory's own entry differs whenever anything in it does: its paths say what.
      if (a?.type === "directory" && b?.type === "directory") continue
      if (a === undefined || b === undefined) {
        out.push({ path: p, change: a === undefined ? "added" : "missing" })
        continue
      }
      const line = a.type === "file" && b.type === "file" && a.digest !== undefined && b.digest !== undefined
        ? yield* textDifference(store, a.digest, b.digest)
        : undefined
      out.push({ path: p, change: "changed", ...(line !== undefined ? { line } : {}) })
    }
    return out
  })

const textDifference = (store: Store["Type"], cached: Digest.Digest, fresh: Digest.Digest) =>
  Effect.gen(function*() {
    if (cached.sizeBytes > TEXT_DIFF_BYTES || fresh.sizeBytes > TEXT_DIFF_BYTES) return undefined
    const [a, b] = [asText(yield* store.getFile(cached)), asText(yield* store.getFile(fresh))]
    return a !== undefined && b !== undefined ? firstDifferingLine(a, b) : undefined
  })

/** One cached process re-run and compared. */
const reRun = (
  store: Store["Type"],
  runner: ProcessRunner["Type"],
  name: string,
  looked: Looked,
  cached: Cached
) =>
  Effect.gen(function*() {
    const actionDigest = Digest.format(looked.key)
    // Reads off: it runs whatever the cache holds; writes off: verifying never replaces an entry.
    const fresh = yield* runner.run(looked.process, { cache: { read: false, write: false } })
    const differences = yield* compareTrees(store, cached.outputDigest, fresh.outputDigest)
    const sameExit = cached.exitCode === fresh.exitCode && cached.timedOut === fresh.timedOut
    return {
      name,
      actionDigest,
      status: differences.length === 0 && sameExit ? "reproduced" : "differs",
      differences,
      ...(sameExit ? {} : { exitCodes: { cached: cached.exitCode, fresh: fresh.exitCode } })
    } satisfies VerifiedProcess
  }).pipe(
    Effect.catchAll((e) =>
      Effect.succeed(
        {
          name,
          actionDigest: Digest.format(looked.key),
          status: "error",
          differences: [],
          detail: e.message
        } satisfies VerifiedProcess
      )
    )
  )

/** The processes asked for, each re-run and compared when the cache holds its result. @internal */
export const verify = (
  store: Store["Type"],
  runner: ProcessRunner["Type"],
  options: VerifyOptions,
  remote?: RemoteTier["Type"]
) =>
  Effect.gen(function*() {
    const { config } = options
    const workspace = path.resolve(options.workspace)
    const names = options.names ?? Object.keys(config.processes).filter((n) => config.processes[n]!.cache !== "never")
    const look = looker(
      store,
      { workspace, config, name: "", ...(options.configName !== undefined ? { configName: options.configName } : {}) },
      yield* store.snapshotSession(workspace),
      RunRecords.read(store.options.root, workspace)
    )
    const looked = yield* Effect.forEach(names, (name) => Effect.either(look(name)))
    const reports = new Map<string, VerifiedProcess>()
    const candidates: Array<{ name: string; looked: Looked }> = []
    looked.forEach((l, i) => {
      const name = names[i]!
      if (l._tag === "Left") {
        reports.set(name, { name, actionDigest: "", status: "error", differences: [], detail: l.left.message })
      } else if (config.processes[name]!.cache === "never") {
        reports.set(name, { name, actionDigest: Digest.format(l.right.key), status: "not-cached", differences: [] })
      } else {
        candidates.push({ name, looked: l.right })
      }
    })
    // The cache's own lookup: an entry whose bytes are gone is no result to compare with. The remote's is asked
    // directly, so that a local entry never stands in for it and nothing is written into the local action cache.
    const found: ReadonlyArray<Option.Option<Cached>> = options.remoteEntries === true
      ? remote === undefined
        ? candidates.map(() => Option.none())
        : yield* remote.lookup(candidates.map((c) => ({ process: c.looked.process, key: c.looked.key })))
      : yield* runner.lookup(candidates.map((c) => c.looked.process))
    const cached: Array<{ name: string; looked: Looked; result: Cached }> = []
    candidates.forEach((c, i) => {
      const hit = found[i]!
      if (Option.isSome(hit)) cached.push({ ...c, result: hit.value })
      else {reports.set(c.name, {
          name: c.name,
          actionDigest: Digest.format(c.looked.key),
          status: "not-cached",
          differences: []
        })}
    })
    const chosen = options.sample !== undefined
      ? (yield* Random.shuffle(cached)).pipe((all) => [...all].slice(0, options.sample))
      : cached
    const maintenance = StoreMaintenance.make(store)
    yield* Effect.forEach(chosen, (c) =>
      Effect.gen(function*() {
        const report = yield* reRun(store, runner, c.name, c.looked, c.result)
        const evicted = options.evict === true && report.status === "differs"
          ? yield* Effect.orElseSucceed(maintenance.removeActionResult(c.looked.key), () => false)
          : undefined
        reports.set(c.name, evicted !== undefined ? { ...report, evicted } : report)
      }), { concurrency: runner.inFlight ?? 4, discard: true })
    // In the order asked for; those not in the sample are left out.
    return names.flatMap((n) => reports.get(n) ?? [])
  })
