/**
 * What each process of a workspace's last run looked like (argv, env, input files, deps' outputs, action digest),
 * kept in the store so that `kiln explain` can say what changed since.
 *
 * @internal
 */
import { createHash, randomBytes } from "node:crypto"
import * as fs from "node:fs"
import * as path from "node:path"
import { mkdirp } from "./mkdirp.js"

/** @internal */
export interface RunRecord {
  argv: Array<string>
  env: Record<string, string>
  workingDirectory: string
  /** Path → `<digest>` (` x` when executable) or `-> <target>` for a symlink. */
  inputs: Record<string, string>
  /** Dep name → its output digest. */
  deps: Record<string, string>
  actionDigest: string
}

const fileOf = (storeRoot: string, workspace: string) =>
  path.join(
    storeRoot,
    "runs",
    `${createHash("sha256").update(path.resolve(workspace)).digest("hex").slice(0, 24)}.json`
  )

/** @internal */
export const read = (storeRoot: string, workspace: string): Record<string, RunRecord> => {
  try {
    return JSON.parse(fs.readFileSync(fileOf(storeRoot, workspace), "utf8")).processes ?? {}
  } catch {
    return {}
  }
}

/** Merges this run's records over the last ones and writes them atomically (only when something changed). @internal */
export const write = (storeRoot: string, workspace: string, records: ReadonlyMap<string, RunRecord>): void => {
  if (records.size === 0) return
  const previous = read(storeRoot, workspace)
  let changed = false
  for (const [name, r] of records) {
    if (r.actionDigest === "") continue
    if (previous[name]?.actionDigest !== r.actionDigest) changed = true
    previous[name] = r
  }
  if (!changed) return
  const file = fileOf(storeRoot, workspace)
  mkdirp(path.dirname(file))
  const tmp = `${file}.${process.pid}.${randomBytes(4).toString("hex")}.tmp`
  try {
    fs.writeFileSync(tmp, JSON.stringify({ workspace: path.resolve(workspace), processes: previous }))
    fs.renameSync(tmp, file)
  } catch (e) {
    fs.rmSync(tmp, { force: true }) // A full disk leaves a partial file behind: not in the store too.
    throw e
  }
}

/** The differences between the last run of a process and now, one line each. @internal */
export const diff = (before: RunRecord, now: RunRecord): Array<string> => {
  const out: Array<string> = []
  if (JSON.stringify(before.argv) !== JSON.stringify(now.argv)) {
    out.push(`argv: ${JSON.stringify(before.argv)} -> ${JSON.stringify(now.argv)}`)
  }
  if (before.workingDirectory !== now.workingDirectory) {
    out.push(`working directory: "${before.workingDirectory}" -> "${now.workingDirectory}"`)
  }
  for (const k of [...new Set([...Object.keys(before.env), ...Object.keys(now.env)])].sort()) {
    if (!(k in now.env)) out.push(`env ${k}: removed (was ${JSON.stringify(before.env[k])})`)
    else if (!(k in before.env)) out.push(`env ${k}: added ${JSON.stringify(now.env[k])}`)
    else if (before.env[k] !== now.env[k]) {
      out.push(`env ${k}: ${JSON.stringify(before.env[k])} -> ${JSON.stringify(now.env[k])}`)
    }
  }
  for (const p of [...new Set([...Object.keys(before.inputs), ...Object.keys(now.inputs)])].sort()) {
    if (!(p in now.inputs)) out.push(`removed ${p}`)
    else if (!(p in before.inputs)) out.push(`added   ${p}`)
    else if (before.inputs[p] !== now.inputs[p]) out.push(`changed ${p}`)
  }
  for (const d of [...new Set([...Object.keys(before.deps), ...Object.keys(now.deps)])].sort()) {
    if (!(d in now.deps)) out.push(`dep ${d}: no longer a dependency`)
    else if (!(d in before.deps)) out.push(`dep ${d}: new dependency`)
    else if (before.deps[d] !== now.deps[d]) out.push(`dep ${d}: its outputs changed`)
  }
  return out
}
