/**
 * What each process of a workspace's last run looked like (argv, env, input files, deps' outputs, action digest),
 * kept in the store so that `kiln explain` can say what changed since.
 *
 * A run that recorded a few processes (an edit run: the one that changed) appends them to a journal beside the
 * records, one JSON line, instead of reading, merging and rewriting every process's record (work proportional to the
 * workspace, for a run that changed one process). A run that recorded many, or finds the journal grown, merges everything into the records
 * and starts the journal afresh. They are advice for `kiln explain`: two engines merging at the same moment may
 * drop a line one of them appended meanwhile, which costs an explanation, never a build.
 *
 * @internal
 */
import { createHash, randomBytes } from "node:crypto"
import * as fs from "node:fs"
import * as path from "node:path"
import * as AtomicFile from "../../../os/AtomicFile.js"
import * as Journal from "../../../os/Journal.js"
import { mkdirp } from "../../../os/Mkdirp.js"
import { readSmallFile } from "../../../os/TextFile.js"
import * as Layout from "../../store/Layout.js"

/** @internal */
export interface RunRecord {
  argv: Array<string>
  env: Record<string, string>
  workingDirectory: string
  /** The path it ran at (its `Process.execRoot`); absent: its sandbox's own. */
  execRoot?: string
  /** Its `hostPaths`, sorted, when it declares any. */
  hostPaths?: Array<string>
  /** True when it declares `"network": true`. */
  network?: boolean
  /** Path → `<digest>` (` x` when executable) or `-> <target>` for a symlink. */
  inputs: Record<string, string>
  /** Dep name → its output digest. */
  deps: Record<string, string>
  actionDigest: string
  /** How its run failed (`exit 3`, `timed out`, …), when it did: a failure is not cached, so it runs again. */
  failed?: string
  /** Its stdout and stderr (`hash/size`), the cached result's for a hit: what `kiln logs` prints. */
  stdout?: string
  stderr?: string
}

/**
 * The sandbox a process declares, as its record keeps it: only what differs from the default, so that the records of
 * processes that declare nothing are what they were. @internal
 */
export const sandboxFields = (
  pc: { readonly hostPaths?: ReadonlyArray<string> | undefined; readonly network?: boolean | undefined }
): Pick<RunRecord, "hostPaths" | "network"> => ({
  ...(pc.hostPaths !== undefined && pc.hostPaths.length > 0 ? { hostPaths: [...new Set(pc.hostPaths)].sort() } : {}),
  ...(pc.network === true ? { network: true } : {})
})

/** The records file of a workspace. @internal */
export const fileOf = (storeRoot: string, workspace: string): string =>
  path.join(
    Layout.ownedDirectory(storeRoot, "engine"),
    "runs",
    `${createHash("sha256").update(path.resolve(workspace)).digest("hex").slice(0, 24)}.json`
  )

const journalOf = (file: string) => file.replace(/\.json$/, ".journal")

/** Runs with at most this many records append them to the journal. */
const APPEND_AT_MOST = 32
/** A journal that would grow past this size is merged into the records. */
const JOURNAL_MAX_BYTES = 256 * 1024

/** Run records larger than this are not read (a large monorepo's are a few megabytes): taken as none. */
const LARGEST_READ = 1024 * 1024 * 1024

/** A records file's text, if it is a regular file (not a link, FIFO or device) of a size a real one has; else "". */
const readText = (file: string): string => {
  const read = readSmallFile(file, LARGEST_READ)
  return read._tag === "Read" ? read.text : ""
}

const readJson = (file: string): Record<string, RunRecord> => {
  try {
    return JSON.parse(readText(file)).processes ?? {}
  } catch {
    return {}
  }
}

/** Applies a journal's lines in order; a line cut short (a crash while appending) is skipped. */
const applyJournal = (into: Record<string, RunRecord>, text: string) => {
  Journal.replay(text, (line) => Object.assign(into, (line as { processes?: Record<string, RunRecord> }).processes))
  return into
}

/** @internal */
export const read = (storeRoot: string, workspace: string): Record<string, RunRecord> => {
  const file = fileOf(storeRoot, workspace)
  return applyJournal(readJson(file), readText(journalOf(file)))
}

/** This run's records, over the last ones: appended to the journal when few, else all merged and rewritten. @internal */
export const write = (storeRoot: string, workspace: string, records: ReadonlyMap<string, RunRecord>): void => {
  const done = [...records].filter(([, r]) => r.actionDigest !== "")
  if (done.length === 0) return
  const file = fileOf(storeRoot, workspace)
  const journal = journalOf(file)
  mkdirp(path.dirname(file))
  // Appends of other engines land before or after this line, never inside it (see `os/Journal.ts`).
  if (
    done.length <= APPEND_AT_MOST &&
    Journal.append(journal, { processes: Object.fromEntries(done) }, JOURNAL_MAX_BYTES)
  ) return
  // Taken aside first, so that an engine appending meanwhile starts a new journal rather than one about to go.
  const aside = `${journal}.${process.pid}.${randomBytes(4).toString("hex")}`
  let journalText = ""
  try {
    fs.renameSync(journal, aside)
    journalText = readText(aside)
    fs.rmSync(aside, { force: true })
  } catch {
    // No journal.
  }
  const merged = applyJournal(readJson(file), journalText)
  let changed = journalText !== ""
  for (const [name, r] of done) {
    // A failure run again may say other things than it did: its logs are recorded anew.
    if (merged[name]?.actionDigest !== r.actionDigest || merged[name]?.stdout !== r.stdout) changed = true
    merged[name] = r
  }
  if (!changed) return
  try {
    AtomicFile.write(file, JSON.stringify({ workspace: path.resolve(workspace), processes: merged }))
  } catch (e) {
    // What was taken aside goes back, so that nothing of it is lost with the failed rewrite.
    if (journalText !== "") fs.appendFileSync(journal, journalText)
    throw e
  }
}

/** Inputs named, outside directories taken whole (which name their own, see {@link diff}); the rest are counted. */
const PATHS_NAMED_AT_MOST = 40

/** The digest of the tree a record's input `p` is (a directory taken whole: `tree <digest>`), if it is one. */
const treeOf = (record: RunRecord, p: string): string | undefined => {
  const value = record.inputs[p]
  return p.endsWith("/") && value?.startsWith("tree ") === true ? value.slice(5) : undefined
}

/**
 * The directories taken whole in both records whose trees differ: `[path, before, now]`, each digest as text.
 *
 * @internal
 */
export const changedTrees = (before: RunRecord, now: RunRecord): Array<readonly [string, string, string]> =>
  Object.keys(now.inputs).flatMap((p) => {
    const [was, is] = [treeOf(before, p), treeOf(now, p)]
    return was !== undefined && is !== undefined && was !== is ? [[p, was, is] as const] : []
  })

/**
 * The differences between the last run of a process and now, one line each; `trees` gives the lines of a directory
 * taken whole that changed (what changed in it, see {@link changedTrees}), which is otherwise named alone.
 *
 * @internal
 */
export const diff = (
  before: RunRecord,
  now: RunRecord,
  trees: ReadonlyMap<string, ReadonlyArray<string>> = new Map()
): Array<string> => {
  const out: Array<string> = []
  if (JSON.stringify(before.argv) !== JSON.stringify(now.argv)) {
    out.push(`argv: ${JSON.stringify(before.argv)} -> ${JSON.stringify(now.argv)}`)
  }
  if (before.workingDirectory !== now.workingDirectory) {
    out.push(`working directory: "${before.workingDirectory}" -> "${now.workingDirectory}"`)
  }
  if (before.execRoot !== now.execRoot) {
    const at = (r: string | undefined) => (r === undefined ? "its sandbox's own path" : r)
    out.push(`runs at: ${at(before.execRoot)} -> ${at(now.execRoot)}`)
  }
  const hostPaths = (r: RunRecord) => JSON.stringify(r.hostPaths ?? [])
  if (hostPaths(before) !== hostPaths(now)) out.push(`hostPaths: ${hostPaths(before)} -> ${hostPaths(now)}`)
  if ((before.network ?? false) !== (now.network ?? false)) {
    const net = (r: RunRecord) => (r.network === true ? "on" : "off")
    out.push(`network: ${net(before)} -> ${net(now)}`)
  }
  for (const k of [...new Set([...Object.keys(before.env), ...Object.keys(now.env)])].sort()) {
    if (!(k in now.env)) out.push(`env ${k}: removed (was ${JSON.stringify(before.env[k])})`)
    else if (!(k in before.env)) out.push(`env ${k}: added ${JSON.stringify(now.env[k])}`)
    else if (before.env[k] !== now.env[k]) {
      out.push(`env ${k}: ${JSON.stringify(before.env[k])} -> ${JSON.stringify(now.env[k])}`)
    }
  }
  let named = 0
  let unnamed = 0
  const name = (line: string) => {
    if (named < PATHS_NAMED_AT_MOST) {
      named++
      out.push(line)
    } else unnamed++
  }
  for (const p of [...new Set([...Object.keys(before.inputs), ...Object.keys(now.inputs)])].sort()) {
    if (!(p in now.inputs)) name(`removed ${p}`)
    else if (!(p in before.inputs)) name(`added   ${p}`)
    else if (before.inputs[p] !== now.inputs[p]) {
      const lines = trees.get(p)
      if (lines !== undefined) out.push(...lines)
      else name(`changed ${p}`)
    }
  }
  if (unnamed > 0) out.push(`… and ${unnamed} more inputs changed`)
  for (const d of [...new Set([...Object.keys(before.deps), ...Object.keys(now.deps)])].sort()) {
    if (!(d in now.deps)) out.push(`dep ${d}: no longer a dependency`)
    else if (!(d in before.deps)) out.push(`dep ${d}: new dependency`)
    else if (before.deps[d] !== now.deps[d]) out.push(`dep ${d}: its outputs changed`)
  }
  return out
}
