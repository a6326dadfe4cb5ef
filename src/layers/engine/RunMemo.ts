/**
 * The run memo: for each process of a workspace that last ended well, what its result was and the evidence that
 * nothing it depends on has changed since: the stat of every file, symlink and directory its input globs read, and
 * of every output it left in the workspace. A process whose evidence still holds, whose config is the same and
 * whose deps still hold too would be a cache hit that writes nothing back, so a run takes it as such without
 * snapshotting, looking up or leasing anything. A run where nothing changed then costs one `lstat` per path.
 *
 * What it trusts, and why that is safe:
 * - a path whose `(dev, ino, mode, size, mtime, ctime)` is unchanged holds what it held (as git's index assumes);
 *   a stat taken within the timestamp granularity of its last change is "racy" and is only recorded after a second
 *   look once that window has passed (see {@link confirm});
 * - a directory whose stat is unchanged lists the same names (creating, removing or renaming an entry moves its
 *   mtime), so globs match what they matched;
 * - the store still holds every byte the result refers to while its generation is unchanged (see
 *   `store/Generation.ts`), and its LMDB files are the same files, none shorter than they were.
 *
 * Plain code without Effect: the CLI runs this check before it loads the engine (see `cli/noop.ts`).
 *
 * @internal
 */
import * as fs from "node:fs"
import * as path from "node:path"
import * as AtomicFile from "../../os/AtomicFile.js"
import * as Journal from "../../os/Journal.js"
import { nameHash, sha256Hex } from "../../os/LazyCrypto.js"
import * as TextFile from "../../os/TextFile.js"
import * as Generation from "../store/Generation.js"
import * as Layout from "../store/Layout.js"
import { namesOf, type Present, type SnapshotObservation } from "../store/SnapshotObservation.js"
import * as MemoGroups from "./internal/memo/memoGroups.js"
import {
  applyJournal,
  JOURNAL_MAX_BYTES,
  type JournalLine,
  journalOf,
  readJournal,
  stampOf
} from "./internal/memo/memoJournal.js"
import * as MemoPaths from "./internal/memo/memoPaths.js"
import * as MemoWatch from "./internal/memo/memoWatch.js"

/** Bump when what a memo means changes. */
export const FORMAT = 12

/** Something a walk read, with the evidence of what it found: a file's hash, a symlink's target, a listing. */
export type Seen = SnapshotObservation

/**
 * `[path relative to the workspace, kind, dev, ino, mode, size, mtimeMs, ctimeMs]`, kind `f` (file), `l` (symlink)
 * or `d` (directory); `[path, "a"]` for a path that was absent. Number stats (the nanoseconds as a double of
 * milliseconds, as Node gives them) compared field by field: a check makes one per path, and BigInt stats or
 * strings built from them cost twice as much.
 *
 * A stat taken within a timestamp tick of a change (racy: another change in that tick would leave it as it is)
 * carries its evidence as a ninth element (a file's hash, a symlink's target, a listing's names), and holds only
 * if the content still matches, as git checks a racily clean entry: the run that wrote it does not wait for the
 * tick to pass (an edit run writes its outputs last, so it would wait at the end of every run).
 */
export type Obs = readonly [string, string, ...Array<number | string>]

/**
 * `[path of a directory + "/", "g", key]`: every observation of a directory taken whole, kept once in the memo's
 * `groups` under `key` however many processes took it (eight processes over one node_modules recorded its 11,000
 * paths eight times, and a check stat'ed them eight times).
 *
 * A group (`memoGroups.Group`, packed in columns: a path, a kind, six stat numbers and evidence per row, and which
 * rows are racy) keeps for each path what was found there: the first {@link GROUP_EVIDENCE_LENGTH} hex digits of a
 * file's hash or of the hash of a directory's names (see {@link namesOf}), or a symlink's target. A no-op `pnpm install`
 * renames a file of the same bytes into `node_modules/.pnpm`, which moves its stat and its directory's: a path whose
 * stat moved holds while it holds the same content (else every run after an install walked the whole tree again).
 */
export const GROUP = "g"

/**
 * Hex digits of a hash a group keeps as evidence: 128 bits tell content apart as well as the whole hash does here,
 * at half the size (a group holds one per path of a tree of tens of thousands).
 */
export const GROUP_EVIDENCE_LENGTH = 32

/**
 * Paths of groups whose stat moved that a check reads again, and the largest file it hashes again: past either, the
 * check says the group changed, and the run snapshots it (which costs what reading them would).
 */
const REREAD_AT_MOST = 256

export interface Entry {
  /** The process's entry in kiln.json, as JSON. */
  readonly key: string
  /** Each dep's output digest (`hash/size`) this result was computed from. */
  readonly deps: Record<string, string>
  readonly action: string
  readonly output: string
  readonly stdout: string
  readonly stderr: string
  readonly inputs: ReadonlyArray<Obs>
  readonly outputs: ReadonlyArray<Obs>
}

export interface Memo {
  readonly v: number
  readonly build: string
  /** The workspace's absolute path: the memo's file name is only a hash of it (see {@link fileOf}). */
  readonly workspace: string
  /** The store's generation when the run that wrote it began. */
  readonly generation: string
  /** sha256 of the config file's bytes when it was written. */
  readonly config: string
  /**
   * The config file's text itself, when it is at most {@link CONFIG_TEXT_MAX_LENGTH}: the no-op check compares it
   * instead of hashing the file (see {@link configHolds}).
   */
  readonly configText?: string
  /** The store's LMDB data files: `[path relative to the store, dev, ino, size]`. */
  readonly store: ReadonlyArray<[string, string, string, number]>
  readonly processes: Record<string, Entry>
  /** The observations of directories taken whole, by key (see {@link GROUP}). */
  readonly groups?: Record<string, MemoGroups.Group>
  /**
   * Whether the last run that ran processes needed the sandboxer (a sandbox too large to lay out in the engine): the
   * next run that will run something starts it at once, its Node start beside the snapshot.
   */
  readonly sandboxer?: boolean
}

/** Which kiln wrote it, whether processes run at the exec root, and the run's sandbox mode (`auto` adds nothing). */
export const buildId = (sandbox = "auto"): string => {
  const cli = process.env.KILN_CLI
  const ns = `ns=${process.env.KILN_MOUNT_NAMESPACES ?? ""}${sandbox === "auto" ? "" : `:sandbox=${sandbox}`}`
  if (cli === undefined) return `${FORMAT}:lib:${ns}`
  try {
    const st = fs.statSync(path.join(path.dirname(cli), "kiln.cjs"))
    return `${FORMAT}:${st.size}:${st.mtimeMs}:${ns}`
  } catch {
    return `${FORMAT}:lib:${ns}`
  }
}

/** The memo file of a workspace, named without hashing it cryptographically (see `os/LazyCrypto.ts`). */
export const fileOf = (storeRoot: string, workspace: string): string =>
  path.join(Layout.ownedDirectory(storeRoot, "engine"), "memo", `${nameHash(path.resolve(workspace))}.json`)

/** The longest config text a memo keeps (UTF-16 units); a longer one is compared by its hash, cheaper than a parse. */
export const CONFIG_TEXT_MAX_LENGTH = 256 * 1024

/** Whether `text` is the config a memo was written under: compared whole when the memo keeps it, else by hash. */
export const configHolds = (memo: Memo, text: string): boolean =>
  memo.configText !== undefined ? memo.configText === text : hashOf(text) === memo.config

/**
 * Evidence already checked, by process name (why it does not hold, or undefined when it does, and whether only its
 * outputs changed), kept on the memo object under a symbol (JSON leaves it out).
 */
const EVIDENCE = Symbol.for("kiln.memoEvidence")

/**
 * The last {@link holding} answer for a config object, kept on the memo beside the evidence: the engine asks again,
 * about the same names of the same config the no-op check handed over, and the answer is the same (it is computed
 * from the memo, the config and the evidence alone), and comparing every key and every process's deps again is
 * work proportional to the workspace on every edit run.
 */
const HELD = Symbol.for("kiln.memoHeld")
interface Held {
  readonly config: object
  readonly names: ReadonlyArray<string>
  readonly answer: Holding
}
/** How many paths of groups this check read again (see {@link REREAD_AT_MOST}). */
const REREAD = Symbol.for("kiln.memoReread")
/** What each path observed held when this memo was checked (see `holdsOnce`). */
const PATHS = Symbol.for("kiln.memoPaths")
/** The paths of every recorded output, and the directories above them (see `outputPathsOf`). */
const OUTPUT_PATHS = Symbol.for("kiln.memoOutputPaths")
/** Which groups held when this memo was checked. */
const GROUPS = Symbol.for("kiln.memoGroups")
/** Groups every path of which held at its recorded stat during this check (see {@link heldByStat}). */
const BY_STAT = Symbol.for("kiln.memoGroupsByStat")
type Checked = Memo & {
  [EVIDENCE]?: Map<string, Evidence>
  [HELD]?: Held
  [PATHS]?: Map<string, readonly [Obs, boolean]>
  [GROUPS]?: Map<string, string | undefined>
  [REREAD]?: number
  [BY_STAT]?: Set<string>
  [OUTPUT_PATHS]?: ReadonlySet<string>
}

/** Why a process's evidence does not hold (undefined: it holds), and whether its inputs still do. */
interface Evidence {
  readonly why: string | undefined
  readonly inputsHold: boolean
}

/** What {@link holding} answers. */
export interface Holding {
  readonly valid: ReadonlyMap<string, Entry>
  /**
   * Entries whose inputs (and deps) hold but whose outputs do not: deleted or changed in the workspace. Their result
   * is still the one to write back, without looking at their inputs or the action cache again.
   */
  readonly restorable: ReadonlyMap<string, Entry>
  readonly why: ReadonlyMap<string, string>
}

const sameNames = (a: ReadonlyArray<string>, b: ReadonlyArray<string>): boolean =>
  a.length === b.length && a.every((n, i) => n === b[i])

/**
 * The memo the CLI's no-op check read and checked, handed to the engine it then loads (a separate bundle: hence a
 * global), so that a run where one file changed does not read, parse and check every path a second time. Taken
 * once, and only while the memo file is the very file that was read.
 */
const HANDOVER = Symbol.for("kiln.memoHandover")
interface Handover {
  readonly file: string
  readonly stamp: string
  readonly memo: Memo
}

/**
 * The memo as this process last parsed it, its journal applied and no check's findings on it: a standby reads the
 * same memo for its rehearsal, for each no-op it answers and for the run it takes, and parsing a memo that holds a
 * large tree's group (react-email's `node_modules`: 14 MB) was a third of each check. Kept while only checks read
 * it (the CLI's, in the loader's bundle: hence a global); the engine's read drops it, so that a run never keeps a
 * memo it has replaced.
 */
const PARSED = Symbol.for("kiln.memoParsed")

/** `memo`'s own fields, without what a check kept on it (symbol keys): a check of it starts from nothing. */
const unchecked = (memo: Memo): Memo => {
  const out: Record<string, unknown> = {}
  for (const key of Object.keys(memo)) out[key] = (memo as unknown as Record<string, unknown>)[key]
  return out as unknown as Memo
}

/**
 * Drops a memo a check handed over: a process that checked a run and did not start its engine (a standby that answered
 * a no-op) must check the next run afresh, never through evidence the last check cached on the memo.
 */
export const forgetHandover = (): void => {
  delete (globalThis as { [HANDOVER]?: Handover })[HANDOVER]
}

/**
 * The memo of a workspace, if there is one this build can use under `sandbox` (see {@link buildId}), with its journal
 * applied. With `handOver`, what its checks find is kept for the next `read` of the same files in this process (see
 * {@link HANDOVER}).
 */
export const read = (storeRoot: string, workspace: string, handOver = false, sandbox = "auto"): Memo | undefined => {
  const file = fileOf(storeRoot, workspace)
  const g = globalThis as { [HANDOVER]?: Handover; [PARSED]?: Handover }
  const handed = g[HANDOVER]
  delete g[HANDOVER]
  const parsed = g[PARSED]
  if (!handOver) delete g[PARSED]
  let fd: number | undefined
  try {
    fd = TextFile.openRegular(file)
    const base = stampOf(fs.fstatSync(fd, { bigint: true }))
    const journal = readJournal(file)
    const stamp = `${base} ${journal.stamp}`
    if (handed !== undefined && handed.file === file && handed.stamp === stamp) return handed.memo
    let memo: Memo
    if (parsed !== undefined && parsed.file === file && parsed.stamp === stamp) memo = unchecked(parsed.memo)
    else {
      memo = JSON.parse(TextFile.read(fd)) as Memo
      if (typeof memo.processes !== "object" || memo.processes === null) return undefined
      applyJournal(memo, journal.text)
      if (handOver) {
        // The watches were on the groups of the memo this one replaces.
        MemoWatch.carryOver(path.resolve(workspace), memo.groups)
        g[PARSED] = { file, stamp, memo }
        memo = unchecked(memo)
      }
    }
    if (
      memo.v !== FORMAT || memo.build !== buildId(sandbox) || memo.workspace !== path.resolve(workspace) ||
      typeof memo.processes !== "object"
    ) return undefined
    if (handOver) {
      ;(memo as Checked)[EVIDENCE] = new Map()
      g[HANDOVER] = { file, stamp, memo }
    }
    return memo
  } catch {
    return undefined
  } finally {
    if (fd !== undefined) fs.closeSync(fd)
  }
}

export const hashOf = (bytes: Uint8Array | string): string => sha256Hex(bytes)

/**
 * A standby's watches of the memo's groups (see `internal/memo/memoWatch.ts`): `arming` while its rehearsal checks,
 * `lost` whether one reported a change since it was last asked (then it rehearses again), `heldByWatch` how many
 * groups held by their watch since it was last asked.
 */
export const groupWatches = {
  arming: MemoWatch.setArming,
  lost: MemoWatch.lost,
  heldByWatch: MemoWatch.heldByWatch
} as const

/**
 * Whether the store is the one the memo saw (see `Generation.holds`).
 */
export const storeHolds = (storeRoot: string, memo: Memo): string | undefined =>
  Generation.holds(storeRoot, { generation: memo.generation, files: memo.store })

const fieldsOfBig = MemoPaths.numbersOf

/** An observation as the memo keeps it; with `racy`, with its evidence (see {@link GROUP}). */
export const obsOf = (workspace: string, seen: Seen, racy = false): Obs =>
  seen.kind === "a"
    ? [relativeTo(workspace, seen.abs), "a"]
    : seen.kind === "d"
    ? [relativeTo(workspace, seen.abs), "d", ...fieldsOfBig(seen), seen.evidence, ...(racy ? [1] : [])]
    : racy
    ? [relativeTo(workspace, seen.abs), seen.kind, ...fieldsOfBig(seen), seen.evidence]
    : [relativeTo(workspace, seen.abs), seen.kind, ...fieldsOfBig(seen)]

/** The evidence a group keeps of a path (see {@link GROUP}). */
export const groupEvidenceOf = (seen: Present): string =>
  seen.kind === "l"
    ? seen.evidence
    : (seen.kind === "d" ? hashOf(seen.evidence) : seen.evidence).slice(0, GROUP_EVIDENCE_LENGTH)

/**
 * `path.relative` for a path under `workspace` (every observation of a snapshot is), without its normalizing: a
 * run records tens of thousands of them when a tool tree is among the inputs.
 *
 * @internal
 */
export const relativeTo = (workspace: string, abs: string): string => {
  if (abs.length > workspace.length && abs.startsWith(workspace) && abs.charCodeAt(workspace.length) === 47) {
    return abs.slice(workspace.length + 1)
  }
  return path.relative(workspace, abs)
}

/** Every path a process's recorded outputs are at, and every directory above them. */
const outputPathsOf = (memo: Checked): ReadonlySet<string> => {
  if (memo[OUTPUT_PATHS] !== undefined) return memo[OUTPUT_PATHS]
  const paths = new Set<string>()
  for (const e of Object.values(memo.processes)) {
    for (const o of e.outputs) {
      let p = o[0]
      while (p !== "" && p !== "." && !paths.has(p)) {
        paths.add(p)
        const slash = p.lastIndexOf("/")
        p = slash === -1 ? "" : p.slice(0, slash)
      }
    }
  }
  memo[OUTPUT_PATHS] = paths
  return paths
}

/**
 * {@link holds}, where a directory may have gained or lost names the process's globs never take (see
 * `memoPaths.excludedRootsOf`: its own outputs, made in a directory it listed, and what it excludes), and may have lost the
 * recorded outputs of other processes: deleting `dist/` to have it written back moves the stat of the package's
 * directory. A glob that takes another process's outputs needs a dep on it (`declarations.ts`), and then observed
 * each of its files, which are checked on their own.
 */
const holdsFor = (memo: Checked, e: Entry) => {
  let roots: ReadonlyArray<string> | undefined
  const unseen: MemoPaths.Unseen = (p, added) => {
    roots ??= MemoPaths.excludedRootsOf(e.key)
    if (roots.some((r) => p === r || p.startsWith(`${r}/`))) return true
    return !added && outputPathsOf(memo).has(p)
  }
  return (workspace: string, o: Obs): boolean => MemoPaths.directoryHolds(workspace, o, unseen)
}

/** Whether one more path of a group may be read again in this check (see {@link REREAD_AT_MOST}). */
const mayReread = (memo: Checked): boolean => (memo[REREAD] = (memo[REREAD] ?? 0) + 1) <= REREAD_AT_MOST

/** The names of a listing, as evidence (the store's, which its snapshots record). */
export { namesOf }

/** Whether the path of an observation is as it was (see `memoPaths.holds`). */
export const holds = MemoPaths.holds

/** Whether a stat is racy at `atNs` (see `memoPaths.isRacy`). */
export const isRacy = MemoPaths.isRacy

/**
 * Whether a racy observation still holds at the end of the run: the stat is unchanged and the content is still what
 * the run used (re-hashed, re-read, re-listed). With `settled`, only once its tick has passed too (a change made
 * after this look then moves the stat); without, the memo keeps its evidence and checks the content again each time
 * (see {@link GROUP}). A file's content is as a snapshot of `workspace` takes it (see `Shims.readStored`).
 */
export const confirm = (s: Seen, settled = true, workspace?: string): boolean => {
  if (s.kind === "a") return true
  try {
    const st = fs.lstatSync(s.abs, { bigint: true })
    const [before, now] = [fieldsOfBig(s), fieldsOfBig(st)]
    if (before.some((v, i) => v !== now[i])) return false
    if (settled && isRacy(st, BigInt(Date.now()) * 1_000_000n)) return false
  } catch {
    return false
  }
  return MemoPaths.contentIs(s.abs, s.kind, s.evidence, workspace)
}

/**
 * {@link holds}, once per path per check: processes that share a tool tree (`node_modules/**`) each observed its
 * 11,000 paths, with the same stats; a path observed again with the same fields has the same answer.
 */
const holdsOnce = (seen: Map<string, readonly [Obs, boolean]>, workspace: string, o: Obs): boolean => {
  const before = seen.get(o[0])
  if (before !== undefined && MemoPaths.sameObs(before[0], o)) return before[1]
  const ok = holds(workspace, o)
  seen.set(o[0], [o, ok])
  return ok
}

/**
 * The first path of a group that no longer holds ("" when the group itself is gone), or undefined when all hold;
 * checked once per check (see {@link GROUP}).
 */
const groupChange = (
  memo: Checked,
  seen: Map<string, readonly [Obs, boolean]>,
  workspace: string,
  key: string
): string | undefined => {
  const held = (memo[GROUPS] ??= new Map())
  if (held.has(key)) return held.get(key)
  const group = memo.groups?.[key]
  // Found at its recorded stat under a watch that has reported nothing since: it is there still (`memoWatch.ts`).
  if (group !== undefined && MemoWatch.holds(workspace, group)) {
    held.set(key, undefined)
    ;(memo[BY_STAT] ??= new Set()).add(key)
    return undefined
  }
  const watch = group === undefined ? undefined : MemoWatch.arm(workspace, group)
  const rereadBefore = memo[REREAD] ?? 0
  const bad = group === undefined ? "" : MemoGroups.firstChanged(workspace, group, () => mayReread(memo))
  held.set(key, bad)
  const byStat = bad === undefined && (memo[REREAD] ?? 0) === rereadBefore
  if (byStat) (memo[BY_STAT] ??= new Set()).add(key)
  if (watch !== undefined) MemoWatch.settle(key, group!, watch, byStat)
  return bad
}

/**
 * The groups of `memo` that its check in this process found holding with every path at its recorded stat (none read
 * again). A group kept under a saved walk's key (`WholeDirectory.savedWalk`) is then that walk, checked: the run's
 * snapshot session takes it without a second `lstat` of every path (`SessionOptions.vouched`).
 */
export const heldByStat = (memo: Memo): ReadonlySet<string> => (memo as Checked)[BY_STAT] ?? new Set()

const changed = (memo: Checked, name: string, workspace: string, e: Entry): Evidence => {
  const known = memo[EVIDENCE]
  const before = known?.get(name)
  if (before !== undefined) return before
  const seen = (memo[PATHS] ??= new Map())
  let path: string | undefined
  // A directory's answer is the process's own (see `holdsFor`): not shared with others through `seen`.
  // Only an input's: an output directory must list what the run left there (a stray file in it is written over).
  const directoryHolds = holdsFor(memo, e)
  const holdsHere = (o: Obs) => {
    if (o[1] !== GROUP) return holdsOnce(seen, workspace, o)
    path = groupChange(memo, seen, workspace, String(o[2]))
    return path === undefined
  }
  const badInput = e.inputs.find((o) => !(o[1] === "d" ? directoryHolds(workspace, o) : holdsHere(o)))
  const bad = badInput ?? e.outputs.find((o) => !holdsHere(o))
  const why = bad === undefined ? undefined : `${bad[1] === GROUP && path !== "" ? path : bad[0]} changed`
  const evidence = { why, inputsHold: badInput === undefined }
  known?.set(name, evidence)
  return evidence
}

/**
 * The groups a check did not reach (a process's evidence stops at its first change, and `firstOnly` at the first
 * process) that a standby's watch says are at their recorded stats: held by stat, so that the run's snapshot session
 * takes their saved walks as vouched instead of stat'ing each path (an edit of one source beside a `node_modules`
 * input). Only a lookup and a poll each: a group without a watch is left for the run.
 */
const vouchWatched = (memo: Checked, workspace: string): void => {
  const held = (memo[GROUPS] ??= new Map())
  for (const [key, group] of Object.entries(memo.groups ?? {})) {
    if (held.has(key) || !MemoWatch.holds(workspace, group)) continue
    held.set(key, undefined)
    ;(memo[BY_STAT] ??= new Set()).add(key)
  }
}

/** The processes of `names` (deps before dependents) whose memo still holds, with why each other one does not. */
export const holding = (
  memo: Memo,
  workspace: string,
  names: ReadonlyArray<string>,
  keyOf: (name: string) => string,
  depsOf: (name: string) => ReadonlyArray<string>,
  options: {
    /** Stop at the first process that does not hold (when only "all of them?" matters). */
    readonly firstOnly?: boolean
    /**
     * The config object `keyOf` and `depsOf` read: a second question about the same names of the very same object
     * is answered from the first answer.
     */
    readonly config?: object
  } = {}
): Holding => {
  const held = (memo as Checked)[HELD]
  if (
    options.config !== undefined && options.firstOnly !== true && held?.config === options.config &&
    sameNames(held.names, names)
  ) {
    return held.answer
  }
  const firstOnly = options.firstOnly === true
  const valid = new Map<string, Entry>()
  const restorable = new Map<string, Entry>()
  const why = new Map<string, string>()
  // A dep whose outputs are to be written back again still made the output its dependents were computed from.
  const depOutput = (d: string) => (valid.get(d) ?? restorable.get(d))?.output
  for (const name of names) {
    const e = memo.processes[name]
    const evidence: Evidence = e === undefined
      ? { why: "not recorded", inputsHold: false }
      : e.key !== keyOf(name)
      ? { why: "its config changed", inputsHold: false }
      : depsOf(name).find((d) => depOutput(d) !== e.deps[d]) !== undefined ||
          depsOf(name).length !== Object.keys(e.deps).length
      ? { why: "a dep does not hold", inputsHold: false }
      : changed(memo, name, workspace, e)
    if (evidence.why === undefined) valid.set(name, e!)
    else {
      why.set(name, evidence.why)
      if (evidence.inputsHold) restorable.set(name, e!)
      if (firstOnly) break
    }
  }
  vouchWatched(memo as Checked, workspace)
  const answer = { valid, restorable, why }
  if (options.config !== undefined && !firstOnly) {
    ;(memo as Checked)[HELD] = { config: options.config, names: [...names], answer }
  }
  return answer
}

/**
 * Writes the memo whole, atomically, and starts its journal afresh (a concurrent run's memo may win: each entry is
 * checked on its own anyway).
 */
export const write = (storeRoot: string, workspace: string, memo: Omit<Memo, "workspace">): void => {
  const file = fileOf(storeRoot, workspace)
  fs.mkdirSync(path.dirname(file), { recursive: true })
  // The workspace last, whatever the object held: `kiln store gc` reads it from the file's end (`memoPrune.ts`).
  const { workspace: _held, ...fields } = memo as Memo
  AtomicFile.write(file, JSON.stringify({ ...fields, workspace: path.resolve(workspace) }), {
    // The journal goes first: a reader in between sees the old memo alone (fewer entries), never the old journal
    // over the new memo. A line another run appends meanwhile starts a new journal, which applies to this memo.
    beforeRename: () => fs.rmSync(journalOf(file), { force: true })
  })
}

/** The memo's journal: its file, its lines, and when a run appends rather than rewrites (`memoJournal.ts`). */
export { APPEND_AT_MOST, JOURNAL_MAX_BYTES, type JournalLine, journalOf } from "./internal/memo/memoJournal.js"

/** Removes the memos of workspaces that are gone (`kiln store gc`). */
export { pruneGone } from "./internal/memo/memoPrune.js"

/**
 * Appends one run's changes to the memo's journal, or says it did not (false: no memo to append to, or the journal
 * would grow past {@link JOURNAL_MAX_BYTES}), and the caller writes the memo whole.
 */
export const append = (storeRoot: string, workspace: string, line: JournalLine): boolean => {
  const file = fileOf(storeRoot, workspace)
  if (!fs.existsSync(file)) return false
  // Other runs' appends land before or after this line, never inside it (see `os/Journal.ts`).
  return Journal.append(journalOf(file), line, JOURNAL_MAX_BYTES)
}
