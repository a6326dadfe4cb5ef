/**
 * `Engine.explain`: why a process would run or hit the cache, and what changed since its last recorded run. Its deps
 * are taken to produce what they did then; a dep that would itself run is named.
 *
 * @internal
 */
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as path from "node:path"
import { actionDigest } from "../../../domain/ActionKey.js"
import type { Config, InvalidConfig } from "../../../domain/config/Config.js"
import * as Digest from "../../../domain/Digest.js"
import * as GraphOrder from "../../../domain/GraphOrder.js"
import type { Process } from "../../../domain/Process.js"
import type { RemoteTier } from "../../../domain/RemoteTier.js"
import { StoreError } from "../../../domain/StoreErrors.js"
import type { InputConflict } from "../../../domain/TreeErrors.js"
import type { SnapshotSession, Store } from "../../store/Store.js"
import type { Explanation } from "../Engine.js"
import { mergeInputs, processOf, snapshotOwn } from "./inputs.js"
import { consult, sandboxModeNow } from "./memo/memoConsult.js"
import * as RunRecords from "./runRecords.js"
import { treeChanges } from "./treeChanges.js"

/** @internal */
export interface ExplainOptions {
  readonly workspace: string
  readonly config: Config
  readonly name: string
  readonly configName?: string
  /** The remote cache, if the run would use one: explain says whether it has the action. */
  readonly remote?: RemoteTier["Type"]
}

/** @internal */
export interface Looked {
  /** The process as a run would make it now (its deps' outputs as their last run recorded them). */
  readonly process: Process
  readonly key: Digest.Digest
  readonly hit: boolean
  readonly now: RunRecords.RunRecord
  readonly notes: Array<string>
}

/** @internal */
export type LookError = InvalidConfig | StoreError | Digest.MissingDigest | InputConflict

/** The digest of the directory at `rel` (ending in `/`) in the tree `root`, if there is one. */
const treeAt = (store: Store["Type"], root: Digest.Digest, rel: string) =>
  Effect.gen(function*() {
    let digest = root
    for (const name of rel.split("/").filter((n) => n !== "")) {
      const sub = (yield* store.getDirectory(digest)).directories.find((d) => d.name === name)
      if (sub === undefined) return undefined
      digest = sub.digest
    }
    return digest
  })

/**
 * `files` with the directories `last` took whole as one entry each (`rel/` → `tree <digest>`), as the last run
 * recorded them: a directory this snapshot did not take whole (a path in it changed within a timestamp tick of the
 * walk) is compared tree with tree, not path by path (every path of it otherwise "added", all 40,000 of them).
 */
const asLastTook = (
  store: Store["Type"],
  root: Digest.Digest,
  files: Readonly<Record<string, string>>,
  last: RunRecords.RunRecord | undefined
) =>
  Effect.gen(function*() {
    const wholes = Object.keys(last?.inputs ?? {}).filter((p) =>
      p.endsWith("/") && last!.inputs[p]!.startsWith("tree ") && !(p in files)
    )
    if (wholes.length === 0) return files
    const out: Record<string, string> = {}
    const taken: Array<string> = []
    for (const rel of wholes) {
      const digest = yield* treeAt(store, root, rel)
      if (digest === undefined) continue
      out[rel] = `tree ${Digest.format(digest)}`
      taken.push(rel)
    }
    for (const [p, v] of Object.entries(files)) if (!taken.some((rel) => p.startsWith(rel))) out[p] = v
    return out
  })

/** What changed inside each directory taken whole whose tree changed since the last run (see `treeChanges`). */
const changesInTrees = (store: Store["Type"], before: RunRecords.RunRecord, now: RunRecords.RunRecord) =>
  Effect.map(
    Effect.forEach(RunRecords.changedTrees(before, now), ([rel, was, is]): Effect.Effect<
      readonly [string, ReadonlyArray<string>],
      StoreError
    > => {
      const [a, b] = [Digest.parse(was), Digest.parse(is)]
      return Either.isRight(a) && Either.isRight(b)
        ? Effect.map(treeChanges(store, rel, a.right, b.right), (lines) => [rel, lines] as const)
        : Effect.succeed([rel, [`changed ${rel}`]] as const)
    }),
    (entries) => new Map<string, ReadonlyArray<string>>(entries)
  )

/**
 * What each process of the explanation would be keyed on now, and whether the cache has it.
 *
 * @internal
 */
export const looker = (
  store: Store["Type"],
  options: ExplainOptions,
  session: SnapshotSession,
  last: Readonly<Record<string, RunRecords.RunRecord>>
) => {
  const { config } = options
  const workspace = path.resolve(options.workspace)
  const known = new Map<string, Looked>()
  const recordedDep = (name: string, dep: string, text: string) =>
    Either.match(Digest.parse(text), {
      onRight: Effect.succeed,
      onLeft: () =>
        Effect.fail(
          new StoreError({
            reason: "Corrupt",
            detail: `the last run of \`${name}\` records "${text}" as the outputs of dep \`${dep}\`, not a digest`,
            path: RunRecords.fileOf(store.options.root, workspace)
          })
        )
    })
  const look = (name: string): Effect.Effect<Looked, LookError> =>
    Effect.gen(function*() {
      const cached = known.get(name)
      if (cached !== undefined) return cached
      const pc = config.processes[name]!
      const own = yield* snapshotOwn(store, workspace, name, pc, session, options.configName ?? "kiln.json")
      const notes: Array<string> = []
      const deps: Record<string, Digest.Digest> = {}
      for (const dep of pc.deps ?? []) {
        const d = yield* look(dep)
        if (!d.hit) notes.push(`dep ${dep} would run first: if its outputs change, this runs too`)
        const outputs = last[name]?.deps[dep]
        if (outputs === undefined) notes.push(`dep ${dep}: never recorded as an input of it`)
        else deps[dep] = yield* recordedDep(name, dep, outputs)
      }
      const p = processOf(name, pc, yield* mergeInputs(store, config, own.digest, deps), config)
      const key = actionDigest(p)
      const hit = pc.cache !== "never" && (yield* store.getActionResults([key]))[0]!._tag === "Some"
      const now: RunRecords.RunRecord = {
        argv: [...pc.argv],
        env: { ...pc.env },
        workingDirectory: pc.workingDirectory ?? "",
        ...(p.execRoot !== undefined ? { execRoot: p.execRoot } : {}),
        ...RunRecords.sandboxFields(pc),
        inputs: yield* asLastTook(store, own.digest, own.files, last[name]),
        deps: Object.fromEntries(Object.entries(deps).map(([k, v]) => [k, Digest.format(v)])),
        actionDigest: Digest.format(key)
      }
      const found = { process: p, key, hit, now, notes }
      known.set(name, found)
      return found
    })
  return look
}

/**
 * The action of `name` when the run memo vouches for it (and its deps) and its last run recorded the same action from
 * the same deps' outputs: nothing changed since, and it is a hit, found at the cost of a no-op run (one `lstat` a
 * path) rather than of snapshotting its inputs (reading the stat index and the saved walks of its trees).
 */
const remembered = (
  store: Store["Type"],
  options: ExplainOptions,
  before: RunRecords.RunRecord | undefined,
  sandbox: string
): Digest.Digest | undefined => {
  const { config, name } = options
  if (before === undefined || before.failed !== undefined) return undefined
  const depsOf = (n: string) => config.processes[n]!.deps ?? []
  const { remembered } = consult({
    root: store.options.root,
    workspace: path.resolve(options.workspace),
    config,
    ordered: GraphOrder.depsFirst(depsOf, GraphOrder.closure(depsOf, [name])),
    depsOf,
    use: true,
    sandbox
  })
  const entry = remembered.get(name)
  const sameDeps = (a: Readonly<Record<string, string>>, b: Readonly<Record<string, string>>) =>
    Object.keys(a).length === Object.keys(b).length && Object.entries(a).every(([d, v]) => b[d] === v)
  // The record must say what the memo says (a record damaged since is the slow path's to report).
  return entry !== undefined && entry.action === before.actionDigest && sameDeps(entry.deps, before.deps)
    ? Either.getOrUndefined(Digest.parse(entry.action))
    : undefined
}

/** The lines `kiln explain` prints of one explanation. @internal */
export const linesOf = (e: Explanation): Array<string> => {
  const verdict = e.status === "hit"
    ? `${e.name}: would hit the cache (action ${e.actionDigest})`
    : `${e.name}: would run (action ${e.actionDigest} is ${e.reason})`
  const header = e.lastActionDigest !== null ? [`changed since its last run (action ${e.lastActionDigest}):`] : []
  const remote = e.remote !== null ? [e.remote] : []
  return [verdict, ...header, ...[...e.changes, ...e.notes, ...remote].map((l) => `  ${l}`)]
}

/** Explanations of `names`, in that order, their inputs snapshotted (when they must be) in one session. @internal */
export const explainAll = (
  store: Store["Type"],
  options: Omit<ExplainOptions, "name"> & { readonly names: ReadonlyArray<string> }
) =>
  Effect.gen(function*() {
    const { config } = options
    const workspace = path.resolve(options.workspace)
    const last = RunRecords.read(store.options.root, workspace)
    let look: ((name: string) => Effect.Effect<Looked, LookError>) | undefined
    const explained: Array<Explanation> = []
    const sandbox = yield* sandboxModeNow
    for (const name of options.names) {
      const held = remembered(store, { ...options, name }, last[name], sandbox)
      if (held === undefined && look === undefined) {
        look = looker(store, { ...options, name }, yield* store.snapshotSession(workspace), last)
      }
      const { hit, key, notes, now } = held !== undefined
        ? { hit: true, key: held, notes: [], now: last[name]! }
        : yield* look!(name)
      const never = config.processes[name]!.cache === "never"
      const before = last[name]
      const changes = before === undefined
        ? ["no earlier run of it is recorded in this store"]
        : before.actionDigest !== now.actionDigest
        ? RunRecords.diff(before, now, yield* changesInTrees(store, before, now))
        : hit
        ? ["nothing changed since its last run"]
        : before.failed !== undefined
        ? [`nothing changed since its last run, which failed (${before.failed}): a failure is not cached`]
        : ["nothing changed since its last run, whose result the cache no longer holds"]
      explained.push({
        name,
        status: hit ? "hit" : "run",
        reason: hit ? "in the cache" : never ? "never cached" : "not in the cache",
        actionDigest: Digest.format(key),
        lastActionDigest: before !== undefined && before.actionDigest !== now.actionDigest ? before.actionDigest : null,
        changes,
        notes,
        remote: options.remote !== undefined && !never ? yield* options.remote.describe(key) : null
      })
    }
    return explained
  })

/** The lines `kiln explain` prints. @internal */
export const explain = (store: Store["Type"], options: ExplainOptions) =>
  Effect.map(explainAll(store, { ...options, names: [options.name] }), ([e]) => linesOf(e!))
