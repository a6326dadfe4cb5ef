/**
 * Writes the run memo at the end of a run (see `../RunMemo.ts`): an entry for each process that ended well and whose
 * evidence is complete and still holds (what changed within a timestamp tick is kept with its content's evidence),
 * the entries of the last memo for processes this run did not look at (while the store's generation is the one
 * they were made under), and nothing for a process that failed or changed.
 *
 * @internal
 */
import * as Effect from "effect/Effect"
import * as path from "node:path"
import type { Config } from "../../../../domain/config/Config.js"
import * as Digest from "../../../../domain/Digest.js"
import type { ProcessResult } from "../../../../domain/Process.js"
import * as Generation from "../../../store/Generation.js"
import type { WholeDirectory } from "../../../store/SnapshotObservation.js"
import * as RunMemo from "../../RunMemo.js"
import * as MemoGroups from "./memoGroups.js"

/**
 * A racy observation is kept with its evidence, checked by content on every later check (see `RunMemo.Obs`); a file
 * larger than this is not worth re-hashing each time, and its process is memoized next time instead.
 */
const RACY_CONTENT_MAX_BYTES = 1024n * 1024n

/** @internal */
export interface Candidate {
  readonly name: string
  readonly result: ProcessResult
  /** Its own input files, by path relative to the workspace, as its snapshot found them. */
  readonly files: Readonly<Record<string, string>>
  readonly inputs: ReadonlyArray<RunMemo.Seen>
  /** Directories its snapshot took whole: their observations (among `inputs`) are recorded once, as a group. */
  readonly wholes: ReadonlyArray<WholeDirectory>
  readonly outputs: ReadonlyArray<RunMemo.Seen>
  /** Each dep's output digest its inputs were made of. */
  readonly deps: Readonly<Record<string, string>> | undefined
  /**
   * The last memo's entry, for a result written back again from it: its input observations (which held at the
   * start of this run) are kept as they were, and `inputs` is empty.
   */
  readonly carried?: RunMemo.Entry
}

/**
 * Every file and symlink of its inputs was seen: an input nobody observed would go unchecked. A directory taken whole
 * (`node_modules/`) was seen path by path by the walk that took it, and its listing with it: its paths are neither
 * collected nor looked up here, so that a tree shared by every process costs nothing per process (issue #36: a
 * restore of 39 processes over a 52k-path tree spent a third of its time making relative paths and sets of them).
 */
const complete = (workspace: string, c: Candidate, own: ReadonlyArray<RunMemo.Seen>): boolean => {
  if (c.carried !== undefined) return true
  if (c.deps === undefined) return false
  const wholeAbs = underAny(c.wholes.map((w) => w.abs))
  const wholeRel = underAny(c.wholes.map((w) => RunMemo.relativeTo(workspace, w.abs)))
  const seen = new Set<string>()
  for (const s of own) {
    if (s.kind === "a" || wholeAbs(s.abs)) continue
    seen.add(RunMemo.relativeTo(workspace, s.abs) + (s.kind === "d" ? "/" : ""))
  }
  for (const f in c.files) if (!wholeRel(f) && !seen.has(f)) return false
  return true
}

/**
 * The observations of a whole directory, as a set, made once per run for every process that took it (the snapshot
 * gives them all the same array).
 */
const wholeSets = new WeakMap<ReadonlyArray<RunMemo.Seen>, ReadonlySet<RunMemo.Seen>>()
const wholeSetOf = (observations: ReadonlyArray<RunMemo.Seen>): ReadonlySet<RunMemo.Seen> => {
  let set = wholeSets.get(observations)
  if (set === undefined) wholeSets.set(observations, set = new Set(observations))
  return set
}

/**
 * A candidate's input observations but those of the directories it took whole: its snapshot lists theirs among its
 * own, and they are recorded (and checked for races) once per group. Told apart by identity, without reading their
 * paths: comparing each path with the directories' (issue #36, the react-email restore: 39 processes over a
 * 52k-path tree) cost three passes of path prefixes per process, most of what recording a run cost.
 */
const ownObservations = (c: Candidate): ReadonlyArray<RunMemo.Seen> => {
  if (c.wholes.length === 0) return c.inputs
  const sets = c.wholes.map((w) => wholeSetOf(w.observations))
  return c.inputs.filter((s) => !sets.some((set) => set.has(s)))
}

/** Whether a path is one of `dirs` or under one (none: never). */
const underAny = (dirs: ReadonlyArray<string>): (p: string) => boolean => {
  if (dirs.length === 0) return () => false
  const prefixes = dirs.map((d) => `${d}/`)
  return (p) => {
    for (let i = 0; i < dirs.length; i++) if (p === dirs[i] || p.startsWith(prefixes[i]!)) return true
    return false
  }
}

/** A candidate's input observations, those under a directory taken whole replaced by a reference to its group. */
const groupedInputs = (
  c: Candidate,
  own: ReadonlyArray<RunMemo.Seen>,
  obsOf: (s: RunMemo.Seen) => RunMemo.Obs,
  groupOf: (w: WholeDirectory) => string,
  rel: (abs: string) => string
): Array<RunMemo.Obs> => {
  if (c.wholes.length === 0) return own.map(obsOf)
  const whole = underAny(c.wholes.map((w) => w.abs))
  const obs: Array<RunMemo.Obs> = []
  for (const s of own) if (!whole(s.abs)) obs.push(obsOf(s))
  const refs = c.wholes.map((w): RunMemo.Obs => [`${rel(w.abs)}/`, RunMemo.GROUP, groupOf(w)])
  return [...obs, ...refs]
}

const unique = (obs: Array<RunMemo.Obs>): Array<RunMemo.Obs> => {
  const byKey = new Map(obs.map((o) => [o.join("\0"), o]))
  return [...byKey.values()]
}

/**
 * Each directory taken whole is recorded once, under a key of what was seen in it (so that a copy of it elsewhere,
 * or the same tree made again, is another group); by its observations, which every process's snapshot shares for a
 * directory the session walked once. One taken from a saved walk as it was saved is kept under that walk's key,
 * which the next run's check vouches for to its snapshot session (`SessionOptions.vouched`), and is not made again
 * when the memo has it already.
 */
const groupsOf = (
  workspace: string,
  previous: RunMemo.Memo | undefined,
  racy: (s: RunMemo.Seen) => boolean
) => {
  const groups: Record<string, MemoGroups.Group> = {}
  const keys = new Map<ReadonlyArray<RunMemo.Seen>, string>()
  const groupOf = (w: WholeDirectory) => {
    const known = keys.get(w.observations)
    if (known !== undefined) return known
    if (w.savedWalk !== undefined && previous?.groups?.[w.savedWalk] !== undefined) {
      keys.set(w.observations, w.savedWalk)
      return w.savedWalk
    }
    const group = MemoGroups.pack(
      w.observations,
      (abs) => RunMemo.relativeTo(workspace, abs),
      RunMemo.groupEvidenceOf,
      racy
    )
    const settledWalk = w.savedWalk !== undefined && group.racy.length === 0
    const key = settledWalk ? w.savedWalk! : RunMemo.hashOf(JSON.stringify(group)).slice(0, 32)
    keys.set(w.observations, key)
    groups[key] = group
    return key
  }
  return { groups, groupOf }
}

/**
 * A directory this run recorded under another key than the memo's other entries refer to (the cold run's walk, then
 * the same walk taken from its saved file; or a walk made again) left those entries on the old group: the same tree
 * twice in the memo, and `lstat`ed twice by every run's check. Each entry of a process that did not run here is
 * pointed at this run's group when its own holds the same observations, and dropped when it does not (it could not
 * hold: the directory is no longer as its group saw it).
 */
const repoint = (
  processes: Record<string, RunMemo.Entry>,
  set: Record<string, RunMemo.Entry>,
  drop: Array<string>,
  groups: Readonly<Record<string, MemoGroups.Group>>
) => {
  // Each directory's group, as this run's entries refer to it.
  const current = new Map<string, string>()
  for (const e of Object.values(set)) {
    for (const ob of e.inputs) if (ob[1] === RunMemo.GROUP) current.set(ob[0], String(ob[2]))
  }
  if (current.size === 0) return
  const sameAs = new Map<string, boolean>()
  const same = (was: string, now: string) => {
    const pair = `${was} ${now}`
    if (!sameAs.has(pair)) sameAs.set(pair, MemoGroups.equal(groups[was], groups[now]))
    return sameAs.get(pair)!
  }
  for (const [name, e] of Object.entries(processes)) {
    if (name in set) continue
    let moved = false
    let stale = false
    const inputs = e.inputs.map((ob): RunMemo.Obs => {
      const now = ob[1] === RunMemo.GROUP ? current.get(ob[0]) : undefined
      if (now === undefined || now === String(ob[2])) return ob
      if (!same(String(ob[2]), now)) stale = true
      moved = true
      return [ob[0], RunMemo.GROUP, now]
    })
    if (stale) {
      delete processes[name]
      drop.push(name)
    } else if (moved) {
      processes[name] = set[name] = { ...e, inputs }
    }
  }
}

/** @internal */
export const record = (o: {
  readonly root: string
  readonly workspace: string
  readonly config: Config
  readonly configHash: string
  readonly configText: string | undefined
  /** The store's generation when the run began. */
  readonly generation: string
  readonly previous: RunMemo.Memo | undefined
  /** The run's sandbox mode, which the memo is kept under. */
  readonly sandbox: string
  /** Whether the next run that runs something starts the sandboxer at once (see `Memo.sandboxer`). */
  readonly sandboxer: boolean
  readonly startedNs: bigint
  /** Every process of this run. */
  readonly names: ReadonlySet<string>
  /** Processes of this run whose memo held. */
  readonly remembered: ReadonlySet<string>
  readonly candidates: ReadonlyArray<Candidate>
  readonly keyOf: (name: string) => string
}): Effect.Effect<void, Error> =>
  Effect.gen(function*() {
    // KILN_NOOP_DEBUG=1: why a process that ended well is left out (the next run's check then says "not recorded").
    const debug = process.env.KILN_NOOP_DEBUG === "1"
      ? (name: string, why: string) => process.stderr.write(`kiln: run memo: ${name} not recorded: ${why}\n`)
      : undefined
    const owns = new Map(o.candidates.map((c) => [c, ownObservations(c)]))
    const candidates = o.candidates.filter((c) => {
      const ok = complete(o.workspace, c, owns.get(c)!)
      if (!ok) debug?.(c.name, "not every input file was seen")
      return ok
    })
    // Racy when seen: changed within a tick of the run's start or during the run. Such an observation must still
    // hold now, content included, or a change made during the run after it was seen would be vouched for. One whose
    // tick has passed by now is then safe as a plain stat (a later change moves it); one still inside its tick is
    // kept with its evidence rather than waited out.
    const nowNs = BigInt(Date.now()) * 1_000_000n
    const racy = (s: RunMemo.Seen) => s.kind !== "a" && RunMemo.isRacy(s, nowNs)
    const holdsNow = (s: RunMemo.Seen) =>
      !racy(s)
        ? RunMemo.confirm(s, true, o.workspace)
        : !(s.kind === "f" && s.size > RACY_CONTENT_MAX_BYTES) && RunMemo.confirm(s, false, o.workspace)
    const unsettledAt = (s: RunMemo.Seen) => s.kind !== "a" && RunMemo.isRacy(s, o.startedNs) && !holdsNow(s)
    // A directory taken whole is looked at once, however many processes took it.
    const wholeUnsettled = new Map<ReadonlyArray<RunMemo.Seen>, RunMemo.Seen | undefined>()
    const unsettledOf = (c: Candidate): RunMemo.Seen | undefined => {
      const whole = underAny(c.wholes.map((w) => w.abs))
      for (const s of owns.get(c)!) if (!whole(s.abs) && unsettledAt(s)) return s
      const output = c.outputs.find(unsettledAt)
      if (output !== undefined) return output
      for (const w of c.wholes) {
        if (!wholeUnsettled.has(w.observations)) wholeUnsettled.set(w.observations, w.observations.find(unsettledAt))
        const found = wholeUnsettled.get(w.observations)
        if (found !== undefined) return found
      }
      return undefined
    }
    const settled = candidates.filter((c) => {
      const unsettled = unsettledOf(c)
      if (unsettled !== undefined) {
        debug?.(c.name, `${path.relative(o.workspace, unsettled.abs) || "."} changed while it ran, or is large`)
      }
      return unsettled === undefined
    })
    const { groupOf, groups } = groupsOf(o.workspace, o.previous, racy)
    const processes: Record<string, RunMemo.Entry> = {}
    const set: Record<string, RunMemo.Entry> = {}
    const drop: Array<string> = []
    // Over a memo of the same generation and config, this run's changes can go to its journal.
    const over = o.previous !== undefined && o.previous.generation === o.generation &&
      o.previous.config === o.configHash
    // Entries made under another generation may refer to bytes that are gone: only this run's own checks carry over.
    if (o.previous !== undefined && o.previous.generation === o.generation) {
      for (const [name, e] of Object.entries(o.previous.processes)) {
        if (!(name in o.config.processes) || (o.names.has(name) && !o.remembered.has(name))) drop.push(name)
        else processes[name] = e
      }
    }
    for (const c of settled) {
      processes[c.name] = set[c.name] = {
        key: o.keyOf(c.name),
        deps: { ...c.deps },
        action: Digest.format(c.result.actionDigest),
        output: Digest.format(c.result.outputDigest),
        stdout: Digest.format(c.result.stdoutDigest),
        stderr: Digest.format(c.result.stderrDigest),
        inputs: c.carried?.inputs ?? unique(groupedInputs(
          c,
          owns.get(c)!,
          (s) => RunMemo.obsOf(o.workspace, s, racy(s)),
          groupOf,
          (abs) => RunMemo.relativeTo(o.workspace, abs)
        )),
        outputs: unique(c.outputs.map((s) => RunMemo.obsOf(o.workspace, s, racy(s))))
      }
    }
    const known = { ...o.previous?.groups, ...groups }
    repoint(processes, set, drop, known)
    const recorded = Object.keys(set).length
    if (over && recorded === 0 && drop.length === 0) return
    // The groups entries refer to: a journal line carries those the memo lacks, a rewrite those still in use.
    const referenced = (entries: Record<string, RunMemo.Entry>, skip?: Record<string, unknown>) => {
      const out: Record<string, MemoGroups.Group> = {}
      for (const e of Object.values(entries)) {
        for (const ob of e.inputs) {
          const key = String(ob[2])
          if (ob[1] === RunMemo.GROUP && known[key] !== undefined && skip?.[key] === undefined) out[key] = known[key]
        }
      }
      return out
    }
    yield* Effect.try({
      try: () =>
        (over && recorded + drop.length <= RunMemo.APPEND_AT_MOST &&
          RunMemo.append(o.root, o.workspace, {
            v: RunMemo.FORMAT,
            build: RunMemo.buildId(o.sandbox),
            generation: o.generation,
            config: o.configHash,
            store: Generation.fingerprint(o.root),
            set,
            drop,
            groups: referenced(set, o.previous?.groups),
            sandboxer: o.sandboxer
          })) ||
        RunMemo.write(o.root, o.workspace, {
          v: RunMemo.FORMAT,
          build: RunMemo.buildId(o.sandbox),
          generation: o.generation,
          config: o.configHash,
          ...(o.configText !== undefined && o.configText.length <= RunMemo.CONFIG_TEXT_MAX_LENGTH
            ? { configText: o.configText }
            : {}),
          store: Generation.fingerprint(o.root),
          processes,
          groups: referenced(processes),
          sandboxer: o.sandboxer
        }),
      catch: (e) => e instanceof Error ? e : new Error(String(e))
    })
  })
