/**
 * A process's inputs: its own (the snapshot of its globs over the workspace, taken once per run), merged with each
 * dep's outputs at the dep's workspace path into the input root its action is keyed on.
 *
 * @internal
 */
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as fs from "node:fs"
import * as path from "node:path"
import {
  type Config,
  type ConfigProblem,
  InvalidConfig,
  invalidConfig,
  type ProcessConfig
} from "../../../domain/config/Config.js"
import * as Digest from "../../../domain/Digest.js"
import * as DurationText from "../../../domain/DurationText.js"
import * as Glob from "../../../domain/Glob.js"
import { Process } from "../../../domain/Process.js"
import type { StoreError } from "../../../domain/StoreErrors.js"
import { execRoot, type WorkspaceTree } from "../../runner/ProcessRunner.js"
import type { WholeDirectory } from "../../store/SnapshotObservation.js"
import {
  skippedWriteAt,
  type Snapshot,
  type SnapshotObservation,
  type SnapshotSession,
  type Store
} from "../../store/Store.js"
import * as RunRecords from "./runRecords.js"
import { depOutputs, type OwnInputs, type RunState } from "./runState.js"

/** @internal */
export const segments = (p: string | undefined): Array<string> =>
  (p ?? "").split("/").filter((s) => s !== "" && s !== ".")

/**
 * The globs a process's inputs are taken by: its inputs, then those that may match nothing (`optionalInputs`), less
 * its own outputs. A glob over its package (`pkg/**` with outputs `pkg/dist/`) would otherwise take what its last run
 * wrote: the second run's inputs would not be the first's, and never the same on a clean checkout.
 */
const globsOf = (pc: ProcessConfig): ReadonlyArray<string> => {
  const globs = pc.optionalInputs === undefined ? pc.inputs ?? [] : [...(pc.inputs ?? []), ...pc.optionalInputs]
  if (globs.length === 0 || (pc.outputs ?? []).length === 0) return globs
  // A path named as it is (no glob) is taken as written, output or not: a tool that updates a file in place.
  const named = globs.filter((g) => !g.startsWith("!") && !/[*?[\]{}]/.test(g))
  return [...globs, ...(pc.outputs ?? []).flatMap((o) => ownOutputExclusion(pc.workingDirectory, o, named))]
}

/** The exclusion of one declared output (`?` optional, `/` a directory), relative to the workspace's root. */
const ownOutputExclusion = (
  workingDirectory: string | undefined,
  declared: string,
  named: ReadonlyArray<string>
): Array<string> => {
  const bare = declared.replace(/^\?/, "")
  const at = path.posix.normalize(path.posix.join(workingDirectory ?? "", bare)).replace(/\/+$/, "")
  if (at === "." || at === "" || at.startsWith("../")) return []
  const directory = bare.endsWith("/")
  if (named.some((n) => n === at || (directory && n.startsWith(`${at}/`)))) return []
  return directory ? [`!${at}/**`] : [`!${at}`]
}

/** Whether globs select anything at all (not only exclude). */
const selects = (globs: ReadonlyArray<string>) => globs.some((g) => !g.startsWith("!"))

/** A process's own inputs, snapshotted now (`kiln explain`'s, which records nothing). @internal */
export const snapshotOwn = (
  store: Store["Type"],
  workspace: string,
  name: string,
  pc: ProcessConfig,
  session: SnapshotSession,
  configName: string
): Effect.Effect<OwnInputs, InvalidConfig | StoreError | Digest.MissingDigest> =>
  Effect.gen(function*() {
    const globs = globsOf(pc)
    if (!selects(globs)) return { digest: Digest.empty, files: {} }
    const [taken] = yield* store.snapshotMany(workspace, [{ globs }], session)
    const snapshot = yield* taken!
    return yield* ownFrom(store, workspace, name, pc, snapshot, configName)
  })

/** {@link snapshotOwn}, with what the snapshot read (for the run memo). */
const observeOwn = (state: RunState, name: string): Effect.Effect<
  {
    readonly own: OwnInputs
    readonly seen: ReadonlyArray<SnapshotObservation>
    readonly wholes: ReadonlyArray<WholeDirectory>
  },
  InvalidConfig | StoreError | Digest.MissingDigest
> =>
  Effect.gen(function*() {
    const pc = state.config.processes[name]!
    const globs = globsOf(pc)
    if (!selects(globs)) return { own: { digest: Digest.empty, files: {} }, seen: [], wholes: [] }
    const [taken] = yield* state.store.snapshotMany(state.workspace, [{ globs, observe: true }], state.session)
    const snapshot = yield* taken!
    return {
      own: yield* ownFrom(state.store, state.workspace, name, pc, snapshot, state.configName),
      seen: snapshot.observations,
      wholes: snapshot.wholeDirectories
    }
  })

/**
 * A process's own inputs from the snapshot of its globs: the files they matched (every glob must match one: the
 * snapshot says which did not), each directory taken whole as one entry (`node_modules/` → `tree <digest>`), so that a
 * process's record costs what its own files cost, not a tool tree's 11,000 paths.
 */
const ownFrom = (
  store: Store["Type"],
  workspace: string,
  name: string,
  pc: ProcessConfig,
  snapshot: Snapshot,
  configName: string
) =>
  Effect.gen(function*() {
    const globs = pc.inputs ?? []
    const unmatched = new Set(snapshot.unmatched)
    const i = globs.findIndex((g) => !g.startsWith("!") && unmatched.has(g))
    if (i !== -1) {
      return yield* new InvalidConfig({
        file: configName,
        path: `processes.${name}.inputs[${i}]`,
        detail: `glob "${globs[i]}" matches nothing`
      })
    }
    const trees = new Map<string, Digest.Digest>()
    for (const w of snapshot.wholeDirectories) {
      const rel = path.relative(workspace, w.abs).split(path.sep).join("/")
      if (rel !== "" && !rel.startsWith("..")) trees.set(rel, w.digest)
    }
    const { entries, taken } = yield* entriesOutside(store, snapshot.digest, trees)
    const files: Record<string, string> = {}
    for (const e of entries) {
      files[e.path] = e.type === "symlink"
        ? `-> ${e.target}`
        : `${Digest.format(e.digest!)}${e.isExecutable ? " x" : ""}`
    }
    for (const [rel, d] of taken) files[`${rel}/`] = `tree ${Digest.format(d)}`
    return { digest: snapshot.digest, files }
  })

interface Entry {
  readonly path: string
  readonly type: "file" | "symlink"
  readonly digest?: Digest.Digest
  readonly isExecutable?: boolean
  readonly target?: string
}

/** The files and symlinks of `root` outside the directories of `trees` found there with their digests. */
const entriesOutside = (store: Store["Type"], root: Digest.Digest, trees: ReadonlyMap<string, Digest.Digest>) =>
  Effect.gen(function*() {
    const entries: Array<Entry> = []
    const taken = new Map<string, Digest.Digest>()
    const stack: Array<[string, Digest.Digest]> = [["", root]]
    while (stack.length > 0) {
      const [rel, digest] = stack.pop()!
      const dir = yield* store.getDirectory(digest)
      const at = (n: string) => rel === "" ? n : `${rel}/${n}`
      for (const f of dir.files) {
        entries.push({ path: at(f.name), type: "file", digest: f.digest, isExecutable: f.isExecutable })
      }
      for (const s of dir.symlinks) entries.push({ path: at(s.name), type: "symlink", target: s.target })
      for (const d of dir.directories) {
        const whole = trees.get(at(d.name))
        if (whole !== undefined && Digest.equals(whole, d.digest)) taken.set(at(d.name), d.digest)
        else stack.push([at(d.name), d.digest])
      }
    }
    entries.sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0))
    return { entries, taken }
  })

/**
 * Own inputs ⊕ each dep's outputs at the dep's workspace path (`rewrite`: every directory made is written). The
 * directories a merge makes are committed in the background: this engine reads them first (to key, lease and lay out
 * the process), and a chain of processes would otherwise wait on that commit at every link.
 *
 * @internal
 */
export const mergeInputs = (
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

/** @internal */
export const processOf = (
  name: string,
  pc: ProcessConfig,
  inputDigest: Digest.Digest,
  defaults: {
    readonly cacheNamespace?: string | undefined
    readonly platform?: Readonly<Record<string, string>> | undefined
  } = {}
): Process => {
  const { cacheNamespace } = defaults
  const outputs = (pc.outputs ?? []).map((o) => o.replace(/^\?/, ""))
  const optionalOutputs = (pc.outputs ?? []).filter((o) => o.startsWith("?")).map((o) => o.slice(1).replace(/\/+$/, ""))
  // Where this machine can, every process runs at one path, the same on every machine: what a tool writes of its own
  // path is the same in every run, and so are the keys of what depends on it.
  const pinnedAt = execRoot()
  return new Process({
    argv: pc.argv as readonly [string, ...Array<string>],
    env: { ...pc.env },
    inputDigest,
    workingDirectory: segments(pc.workingDirectory).join("/"),
    outputFiles: outputs.filter((o) => !o.endsWith("/")),
    outputDirectories: outputs.filter((o) => o.endsWith("/")).map((o) => o.replace(/\/+$/, "")),
    ...(optionalOutputs.length > 0 ? { optionalOutputs } : {}),
    // kiln.json's schema has validated every field already (the timeout's text too); checking again per attempt
    // was a visible cost.
    ...(pc.timeout !== undefined
      ? { timeoutMs: Duration.toMillis(Either.getOrThrow(DurationText.parse(pc.timeout))) }
      : {}),
    description: name,
    cache: pc.cache ?? "successful",
    namedCaches: { ...pc.namedCaches },
    writablePaths: (pc.writableInputs ?? []).map((p) => segments(p).join("/")).filter((p) => p !== ""),
    ...(cacheNamespace !== undefined ? { cacheNamespace } : {}),
    platform: { ...defaults.platform, ...pc.platform },
    outputSymlinks: pc.outputSymlinks ?? "contained",
    ...(pinnedAt !== undefined ? { execRoot: pinnedAt } : {}),
    ...(pc.passThroughEnv !== undefined && pc.passThroughEnv.length > 0
      ? { passThroughEnv: pc.passThroughEnv }
      : {}),
    // A pass-through variable's value would be uploaded with the command: such a process runs here.
    remote: (pc.remote ?? true) && (pc.passThroughEnv ?? []).length === 0,
    ...(pc.hostPaths !== undefined && pc.hostPaths.length > 0 ? { hostPaths: [...new Set(pc.hostPaths)].sort() } : {}),
    ...(pc.network === true ? { network: true } : {})
  }, true)
}

/** `name`'s own inputs: snapshotted on first use, then the same for the rest of the run. @internal */
export const ownOf = (state: RunState, name: string) =>
  Effect.suspend(() => {
    const known = state.owned.get(name)
    if (known !== undefined) return Effect.succeed(known)
    return Effect.map(
      observeOwn(state, name),
      ({ own, seen, wholes }) => {
        state.owned.set(name, own)
        state.inputsSeen.set(name, seen)
        state.wholeSeen.set(name, wholes)
        return own
      }
    )
  })

/**
 * {@link ownOf} for many processes, their snapshots stored together (see `Store.snapshotMany`). One whose snapshot
 * fails here is left to `ownOf`, which takes it again alone and reports its error when the process is reached.
 *
 * @internal
 */
export const ownOfMany = (state: RunState, names: ReadonlyArray<string>) =>
  Effect.suspend(() => {
    const { config, store } = state
    const todo = names.filter((n) => !state.owned.has(n) && selects(globsOf(config.processes[n]!)))
    const requests = todo.map((n) => ({ globs: globsOf(config.processes[n]!), observe: true }))
    return store.snapshotMany(state.workspace, requests, state.session).pipe(
      Effect.flatMap((snapshots) =>
        Effect.forEach(todo, (name, i) => {
          const snapshot = snapshots[i]!
          if (Either.isLeft(snapshot)) return Effect.void
          return ownFrom(store, state.workspace, name, config.processes[name]!, snapshot.right, state.configName).pipe(
            Effect.match({
              onFailure: () => undefined,
              onSuccess: (own) => {
                state.owned.set(name, own)
                state.inputsSeen.set(name, snapshot.right.observations)
                state.wholeSeen.set(name, snapshot.right.wholeDirectories)
              }
            })
          )
        }, { discard: true })
      ),
      Effect.catchAll((e) =>
        Effect.logWarning(
          `could not store the inputs of ${todo.length} processes together (${e.message}): taking each on its own`
        )
      )
    )
  })

/**
 * The paths of a process that must be real directories wherever they exist, by kiln.json field: its working
 * directory, each named cache's place (relative to the sandbox root) and each output's parent (relative to the working
 * directory). Through a symlink, the process would run, kiln would make a link, or outputs would be written outside
 * the sandbox or the workspace.
 */
const directoryPaths = (name: string, pc: ProcessConfig) => {
  const wd = segments(pc.workingDirectory)
  const paths: Array<{ readonly field: string; readonly declared: string; readonly segments: Array<string> }> = [
    { field: `processes.${name}.workingDirectory`, declared: pc.workingDirectory ?? "", segments: wd }
  ]
  for (const [cache, rel] of Object.entries(pc.namedCaches ?? {})) {
    paths.push({ field: `processes.${name}.namedCaches.${cache}`, declared: rel, segments: segments(rel) })
  }
  for (const [i, out] of (pc.outputs ?? []).entries()) {
    paths.push({
      field: `processes.${name}.outputs[${i}]`,
      declared: out,
      segments: [...wd, ...segments(out).slice(0, -1)]
    })
  }
  return paths
}

/** A glob that names one path (no `*`, `?`, `[`, `{`, no `!`): the file or directory itself must be there. */
const isLiteral = (glob: string) => !/[*?[\]{}!\\]/.test(glob)

/**
 * Refuses, before anything runs, a process whose input names a path (no glob magic) that the workspace does not have:
 * a typo, which would otherwise fail the run halfway, after other processes ran. A path some process declares as an
 * output is left to the run (it is made then). Every such input of the run's processes is named. Plain `lstat`s.
 *
 * @internal
 */
export const missingInputs = (
  workspace: string,
  config: Config,
  names: ReadonlyArray<string>,
  configName: string
): InvalidConfig | undefined => {
  // What a process makes is there once it ran (written back), not before: an input naming it is not missing.
  const made = Object.values(config.processes).flatMap((pc) =>
    (pc.outputs ?? []).map((out) => path.posix.join(pc.workingDirectory ?? "", out.replace(/^\?/, "")))
  )
  const isMade = (p: string) => made.some((out) => p === out || (out.endsWith("/") && p.startsWith(out)))
  const problems: Array<ConfigProblem> = []
  for (const name of names) {
    for (const [i, glob] of (config.processes[name]!.inputs ?? []).entries()) {
      if (!isLiteral(glob) || isMade(path.posix.normalize(glob))) continue
      if (fs.lstatSync(path.join(workspace, glob), { throwIfNoEntry: false }) !== undefined) continue
      problems.push({
        path: `processes.${name}.inputs[${i}]`,
        detail: `"${glob}" does not exist in the workspace (an input that names a path must be there before the run; ` +
          "one that may be absent goes in optionalInputs)"
      })
    }
  }
  return problems.length === 0 ? undefined : invalidConfig(configName, problems)
}

const throughSymlink = (
  configName: string,
  path: {
    readonly field: string
    readonly declared: string
    readonly segments: Array<string>
    readonly input?: boolean
  },
  depth: number,
  target: string,
  where: string
) =>
  new InvalidConfig({
    file: configName,
    path: path.field,
    detail: `"${path.declared}" goes through \`${path.segments.slice(0, depth + 1).join("/")}\`, a symlink ` +
      `(to \`${target}\`) in ${where}: ` +
      (path.input === true
        ? "kiln reads inputs only inside the workspace (an input may name the link itself)"
        : "kiln runs and writes a process only inside its sandbox")
  })

/**
 * The directories above where each input glob's walk starts (its literal base): read through a symlink, they would
 * take files from beyond the workspace. The base itself may be a symlink, taken as one.
 */
const inputBasePaths = (name: string, pc: ProcessConfig) =>
  (["inputs", "optionalInputs"] as const).flatMap((field) =>
    (pc[field] ?? []).flatMap((glob, i) =>
      glob.startsWith("!") ? [] : [{
        field: `processes.${name}.${field}[${i}]`,
        declared: glob,
        segments: segments(Glob.baseOf(glob)).slice(0, -1),
        input: true
      }]
    )
  )

/**
 * Refuses, before anything runs, a process whose working directory, named cache, output parent or input glob's base
 * goes through a symlink in the workspace (a committed `pkg -> /elsewhere`): plain `lstat`s, a few per process.
 *
 * @internal
 */
export const symlinkedPaths = (
  workspace: string,
  config: Config,
  names: ReadonlyArray<string>,
  configName: string
): InvalidConfig | undefined => {
  // Processes share parents (`out`, `packages/a`): each path is looked at once.
  const kinds = new Map<string, "directory" | "symlink" | "other">()
  const kindOf = (abs: string) => {
    let kind = kinds.get(abs)
    if (kind === undefined) {
      const st = fs.lstatSync(abs, { throwIfNoEntry: false })
      kind = st?.isDirectory() ? "directory" : st?.isSymbolicLink() ? "symlink" : "other"
      kinds.set(abs, kind)
    }
    return kind
  }
  for (const name of names) {
    const pc = config.processes[name]!
    for (const p of [...directoryPaths(name, pc), ...inputBasePaths(name, pc)]) {
      let abs = workspace
      for (const [i, segment] of p.segments.entries()) {
        // One normalized segment at a time: joined, not normalized again.
        abs = `${abs}/${segment}`
        const kind = kindOf(abs)
        if (kind === "other") break
        if (kind === "symlink") return throughSymlink(configName, p, i, fs.readlinkSync(abs), "the workspace")
      }
    }
  }
  return undefined
}

/**
 * {@link symlinkedPaths} in `name`'s merged input root: a dep's outputs (from a cache, say) may put a symlink where
 * the process's working directory, named cache or output parent goes.
 */
const symlinkedInputs = (state: RunState, name: string, root: Digest.Digest) =>
  Effect.gen(function*() {
    for (const p of directoryPaths(name, state.config.processes[name]!)) {
      let digest = root
      for (const [i, segment] of p.segments.entries()) {
        const dir = yield* state.store.getDirectory(digest)
        const link = dir.symlinks.find((s) => s.name === segment)
        if (link !== undefined) {
          return yield* throughSymlink(state.configName, p, i, link.target, "the process's inputs")
        }
        const sub = dir.directories.find((d) => d.name === segment)
        if (sub === undefined) break
        digest = sub.digest
      }
    }
  })

/** `name`'s merged input root, recorded for `kiln explain` as it is made. @internal */
export const inputOf = (state: RunState, name: string) =>
  Effect.gen(function*() {
    const pc = state.config.processes[name]!
    const own = yield* ownOf(state, name)
    const deps = depOutputs(state, name)
    const digest = yield* mergeInputs(state.store, state.config, own.digest, deps)
    yield* symlinkedInputs(state, name, digest)
    const pinnedAt = execRoot()
    state.records.set(name, {
      argv: [...pc.argv],
      env: { ...pc.env },
      workingDirectory: pc.workingDirectory ?? "",
      ...(pinnedAt !== undefined ? { execRoot: pinnedAt } : {}),
      ...RunRecords.sandboxFields(pc),
      inputs: own.files,
      deps: Object.fromEntries(Object.entries(deps).map(([k, v]) => [k, Digest.format(v)])),
      actionDigest: ""
    })
    return digest
  })

/**
 * Makes `name`'s merged input root again, every directory written whatever the store shows, and says whether
 * `missing` is in the store now. The engine is the producer of the directories a merge makes (the root, and the
 * folders it lays deps' outputs into), so when one of those is gone it is re-made like any other output. Bytes the
 * merge itself finds missing mean it cannot (false); a failing store is the process's error.
 *
 * @internal
 */
export const remake = (state: RunState, name: string, missing: Digest.Digest) =>
  Effect.suspend(() => {
    const own = state.owned.get(name)
    if (own === undefined) return Effect.succeed(false)
    return Effect.zipRight(
      mergeInputs(state.store, state.config, own.digest, depOutputs(state, name), true),
      state.store.hasDirectory(missing)
    ).pipe(Effect.catchTag("MissingDigest", () => Effect.succeed(false)))
  })

/**
 * Stores `name`'s own inputs again from the workspace, and says whether `missing` is in the store now: a blob of a
 * workspace file can leave the store during a run (one a process changed through its hard link is removed, see
 * `LinkedInputs`), and the workspace still holds its bytes. False when the workspace no longer gives the same inputs.
 *
 * @internal
 */
export const restoreOwn = (state: RunState, name: string, missing: Digest.Digest) =>
  Effect.gen(function*() {
    const own = state.owned.get(name)
    const pc = state.config.processes[name]
    const globs = pc === undefined ? [] : globsOf(pc)
    if (own === undefined || !selects(globs)) return false
    const [taken] = yield* state.store.snapshotMany(state.workspace, [{ globs }], state.session)
    const snapshot = yield* taken!
    if (!Digest.equals(snapshot.digest, own.digest)) return false
    return yield* state.store.hasFile(missing)
  }).pipe(Effect.orElseSucceed(() => false))

/** What a run says when it made a directory of `name`'s merged inputs again (see {@link remake}). @internal */
export const remadeWarning = (name: string, digest: Digest.Digest): string => {
  const skipped = skippedWriteAt(digest)
  const why = skipped === undefined
    ? ""
    : ` (this process had not written it at ${skipped.toISOString()} because the store held it then)`
  return `${name}: ${Digest.format(digest)}, a directory of its merged inputs, was missing from the store: ` +
    `made it again${why}`
}

/**
 * The workspace directories `name`'s sandbox may mount in place of shared trees: those its snapshot took whole, at
 * their paths in its input root (its own inputs are laid at the root). The runner mounts one only where the input
 * root holds exactly its tree there (a dep's outputs laid into it would make another), and checks it still holds
 * once the process ends.
 *
 * @internal
 */
export const workspaceTreesOf = (state: RunState, name: string): Array<WorkspaceTree> =>
  (state.wholeSeen.get(name) ?? []).flatMap((w) => {
    const rel = path.relative(state.workspace, w.abs)
    if (rel === "" || rel.startsWith("..")) return []
    const files = w.observations.reduce((n, o) => o.kind === "f" || o.kind === "l" ? n + 1 : n, 0)
    return [{ path: rel.split(path.sep).join("/"), abs: w.abs, digest: w.digest, files, unchanged: w.unchanged }]
  })
