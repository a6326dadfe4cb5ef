/**
 * Hints in a failed process's report that point at what the sandbox kept from it (#37), read from the tail of its
 * stdout and stderr as `readOnlyHint.ts` reads a write refused:
 * - the network: a process without one (the strict sandbox, no `"network": true`) whose output shows a failed name
 *   lookup or a refused or unreachable connection is told how to get one;
 * - an undeclared read: each path its output names that is a file of the workspace but not among its inputs (no
 *   input glob of it matches, no dep's output is there) is named, since a process that cannot see a file usually
 *   fails by naming it; and a path that another process declares among its outputs (made or not yet) names that
 *   process as the dep to add (#38 §5).
 *
 * @internal
 */
import * as fs from "node:fs"
import * as path from "node:path"
import type { Config } from "../../../domain/config/Config.js"
import * as Glob from "../../../domain/Glob.js"
import type { Process, ProcessResult } from "../../../domain/Process.js"

/** What tools print when a name lookup fails or a connection is refused or cannot be made. */
const NO_NETWORK =
  /EAI_AGAIN|ENOTFOUND|getaddrinfo|ECONNREFUSED|ENETUNREACH|Network is unreachable|Temporary failure in name resolution|Could not resolve host/i

/** The hint for a process that ran without a network and failed as one that needs it does, if it did. */
export const networkHint = (
  name: string,
  tail: string,
  proc: Process,
  result: ProcessResult
): string | undefined =>
  // Only the strict sandbox takes the network away; elsewhere a refused connection is the tool's own business.
  result.sandbox === "strict" && !proc.network && NO_NETWORK.test(tail)
    ? `hint: ${name} runs without network: add "network": true to it in kiln.json if it needs one`
    : undefined

/** At most so many undeclared paths are named: the first are the ones to look at. */
const UNDECLARED_NAMED_AT_MOST = 3

/** Words of a tail that may be paths: with a `/`, or a name with an extension (`x.ts`). */
const PATH_LIKE = /[\w.@+~-]*\/[\w.@+~/-]*|[\w@+~-]+\.[A-Za-z]\w*/g

/** The workspace-relative path a word names, if it lies in the sandbox (or in the workspace, by its own path). */
const relativeOf = (word: string, proc: Process, workspace: string): string | undefined => {
  let rel: string
  if (path.posix.isAbsolute(word)) {
    const root = [proc.execRoot, workspace].find((r) => r !== undefined && word.startsWith(`${r}/`))
    if (root === undefined) return undefined
    rel = path.posix.normalize(word.slice(root.length + 1))
  } else {
    rel = path.posix.normalize(path.posix.join(proc.workingDirectory, word))
  }
  return rel === "." || rel === ".." || rel.startsWith("../") ? undefined : rel.replace(/\/$/, "")
}

/** A process's declared outputs as workspace paths (a directory's with its `/`), the optional ones' `?` taken off. */
const outputsOf = (config: Config, name: string): Array<string> => {
  const of = config.processes[name]
  return (of?.outputs ?? []).map((o) => path.posix.join(of?.workingDirectory ?? "", o.replace(/^\?/, "")))
}

/**
 * Whether `rel` is among the process's inputs (its globs', a leading `!` excluding, or a dep's declared outputs): true,
 * or false, or the exclusion that leaves out a path an include takes (one a task's `.gitignore` rule gave, say).
 */
const declared = (config: Config, name: string) => {
  const pc = config.processes[name]
  const globs = [...pc?.inputs ?? [], ...pc?.optionalInputs ?? []]
  const include = Glob.matcher(globs.filter((g) => !g.startsWith("!")))
  const exclusions = globs.filter((g) => g.startsWith("!"))
  const outputs = [name, ...(pc?.deps ?? [])].flatMap((n) => outputsOf(config, n))
  return (rel: string): boolean | string => {
    if (outputs.some((o) => covers(o, rel))) return true
    if (!include(rel)) return false
    return exclusions.find((x) => Glob.matcher([x.slice(1)])(rel)) ?? true
  }
}

/** Whether the output `o` (a directory's ends with `/`) is `rel` or holds it. */
const covers = (o: string, rel: string) => o.endsWith("/") ? rel.startsWith(o) : rel === o

/** The process, not `name` nor one of its deps, whose declared outputs hold `rel`, if one's do. */
const producers = (config: Config, name: string) => {
  const skip = new Set([name, ...config.processes[name]?.deps ?? []])
  const outputs = Object.keys(config.processes).filter((n) => !skip.has(n))
    .flatMap((producer) => outputsOf(config, producer).map((o) => ({ producer, o })))
  return (rel: string) => outputs.find(({ o }) => covers(o, rel))?.producer
}

const isFile = (abs: string): boolean => {
  try {
    return fs.statSync(abs, { throwIfNoEntry: false })?.isFile() === true
  } catch {
    // Through a file (ENOTDIR), a loop, a directory kiln may not read: not a file to name.
    return false
  }
}

/**
 * One line for each file of the workspace the tail names that is not among the process's inputs, or that another
 * process makes (then that process is the dep to add), at most {@link UNDECLARED_NAMED_AT_MOST}.
 */
export const undeclaredHints = (
  name: string,
  tail: string,
  proc: Process,
  config: Config,
  workspace: string
): Array<string> => {
  const isDeclared = declared(config, name)
  const producerOf = producers(config, name)
  const named = new Map<string, string>()
  for (const match of tail.matchAll(PATH_LIKE)) {
    const word = match[0].replace(/[.:,]+$/, "")
    const rel = relativeOf(word, proc, workspace)
    if (rel === undefined || named.has(rel)) continue
    const taken = isDeclared(rel)
    if (taken === true) continue
    // Another process's output: there or not yet, it is that process's to make, and this one's to wait for.
    const producer = producerOf(rel)
    if (producer !== undefined) {
      named.set(rel, `hint: ${rel} is an output of ${producer}: add "${producer}" to the deps of ${name}`)
    } else if (isFile(path.join(workspace, rel))) {
      named.set(
        rel,
        taken === false
          ? `hint: ${name} mentions ${rel}, which is not among its inputs`
          : `hint: ${name} mentions ${rel}, which its inputs leave out (${JSON.stringify(taken)})`
      )
    } else {
      continue
    }
    if (named.size === UNDECLARED_NAMED_AT_MOST) break
  }
  return [...named.values()]
}
