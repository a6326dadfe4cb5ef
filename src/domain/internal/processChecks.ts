/**
 * The checks of a process's fields the schema cannot make (`Config.check`): plain code, each problem of a process.
 *
 * @internal
 */
import type { Config, PlaceOf } from "../config/Config.js"
import { entryOf, hostPathProblem } from "../config/ResolvedConfig.js"
import type { Found } from "./configIssues.js"
import { conflictsIn, findCycle } from "./declarations.js"
import { didYouMean } from "./didYouMean.js"
import { escapeControls, pathText, quoted } from "./fieldText.js"

/** Why a field of a process is refused: where in the process, and what is wrong. */
export interface Refused {
  readonly at: ReadonlyArray<PropertyKey>
  readonly detail: string
}

/** No path, argument or variable can hold a NUL: the C strings `execve` and every path call take end at it. */
const NUL = "\u0000"

/** A relative path that stays where it is relative to: not empty, not absolute, no `..` and no NUL. */
const staysInside = (p: string) => p !== "" && !p.startsWith("/") && !p.split("/").includes("..") && !p.includes(NUL)

/** Version control's own directories, which no output may be in: what they hold runs as the user (hooks, config). */
const REPOSITORY = new Set([".git", ".hg", ".svn"])

/** `.`, `./`, `a/..`-free spellings of the directory itself, which no file or symlink can stand in for. */
const isItself = (p: string) => p.split("/").every((s) => s === "" || s === ".")

/** The places of processes the file declares where `declaredAt` says, every field as written. */
export const placesUnder = (declaredAt: (name: string) => ReadonlyArray<PropertyKey>): PlaceOf => (name, field) => ({
  at: [...declaredAt(name), ...field],
  written: true
})

/**
 * Every problem of a config's processes the schema cannot find: each process's name and fields (`refusedIn`; a field
 * the file does not write as it is, made from fields checked where they are written, is not judged twice), then a
 * cycle, then the conflicts of their declarations (only when there is no problem else: each would follow from one).
 * `known`: names a dep may give though the config lacks them (the processes of a task refused on its own).
 */
export const problemsIn = (config: Config, placeOf: PlaceOf, known: ReadonlySet<string> = new Set()): Array<Found> => {
  const found: Array<Found> = []
  for (const name of Object.keys(config.processes)) {
    const badName = nameProblem(name)
    if (badName !== undefined) {
      found.push({ at: placeOf(name, []).at, detail: `is not a process name: ${badName}`, key: true })
    }
  }
  for (const name of Object.keys(config.processes)) {
    for (const refused of refusedIn(config, name, known)) {
      const place = placeOf(name, refused.at)
      if (place.written) found.push({ at: place.at, detail: refused.detail })
    }
  }
  if (found.length > 0 || known.size > 0) return found
  const cycle = findCycle(config.processes)
  if (cycle !== undefined) {
    const at = cycle.some((name) => placeOf(name, []).at[0] === "tasks") ? "tasks" : "processes"
    return [{ at: [at], detail: `dependency cycle: ${cycle.join(" -> ")}`, key: true }]
  }
  for (const conflict of conflictsIn(config.processes)) {
    const place = placeOf(conflict.name, conflict.at)
    // What a conflict is of depends on the process: a default's or a task's line says which.
    const whose = place.at[0] === "defaults"
      ? `process ${conflict.name}`
      : place.package !== undefined
      ? `package ${place.package}`
      : undefined
    found.push({
      at: place.at,
      detail: conflict.detail,
      // A task's entry, where the field was made: its name is the line's place, as a key's error is.
      ...(place.written ? {} : { key: true }),
      ...(whose !== undefined ? { path: `${pathText(place.at)} (${escapeControls(whose)})` } : {})
    })
  }
  return found
}

/**
 * Why `name` cannot name a process, if it cannot: one that would print as another, or print what kiln did not say.
 *
 * @internal
 */
export const nameProblem = (name: string): string | undefined => {
  if (name === "") return "it is empty"
  // A name is printed on the terminal: the status line, `✓ name`, errors.
  const control = /[\u0000-\u001f\u007f-\u009f]/.exec(name)
  if (control !== null) {
    const code = control[0].charCodeAt(0).toString(16).toUpperCase().padStart(4, "0")
    return `it holds the control character U+${code}, which would reach the terminal as it is`
  }
  // A bidirectional override or isolate shows what follows it in another order ("Trojan Source"): a name that prints
  // as another's.
  const bidi = /[\u202a-\u202e\u2066-\u2069]/.exec(name)
  if (bidi !== null) {
    const code = bidi[0].charCodeAt(0).toString(16).toUpperCase().padStart(4, "0")
    return `it holds the bidirectional control U+${code}, which makes a terminal show it in another order`
  }
  // An invisible character (a zero-width space or joiner, a soft hyphen, a BOM): "a\u200b" prints as "a".
  const invisible = /[\u00ad\u200b-\u200f\u2060-\u2064\ufeff]/.exec(name)
  if (invisible !== null) {
    const code = invisible[0].charCodeAt(0).toString(16).toUpperCase().padStart(4, "0")
    return `it holds the invisible character U+${code}, which would print as another name`
  }
  // " a" would print as "a": two processes that look like one.
  if (/^\s|\s$/.test(name)) return "it begins or ends with whitespace"
  return undefined
}

/**
 * What the schema cannot say about a process: deps that name no process (an own key: `toString` is not one), paths
 * that leave the sandbox or the workspace, NUL bytes, variable names that are not names; each of them. Each is refused
 * before anything runs, rather than found by the spawner, the sandbox or the process.
 */
export function* refusedIn(
  config: Config,
  name: string,
  known: ReadonlySet<string> = new Set()
): Generator<Refused> {
  const pc = config.processes[name]!
  for (const [i, dep] of (pc.deps ?? []).entries()) {
    if (!Object.hasOwn(config.processes, dep) && !known.has(dep)) {
      yield {
        at: ["deps", i],
        detail: `unknown process ${quoted(dep)}${didYouMean(dep, Object.keys(config.processes), quoted)}`
      }
    }
  }
  for (const [i, arg] of pc.argv.entries()) {
    if (arg.includes(NUL)) yield { at: ["argv", i], detail: "holds a NUL byte, which no argument can" }
  }
  for (const [k, v] of Object.entries(pc.env ?? {})) {
    if (k === "" || k.includes("=") || /[\u0000-\u001f\u007f-\u009f]/.test(k)) {
      yield {
        at: ["env", k],
        detail: `${quoted(k)} is not a variable name: it must be non-empty, without = or a control character`
      }
    }
    if (v.includes(NUL)) yield { at: ["env", k], detail: "holds a NUL byte, which no variable's value can" }
  }
  for (const [i, entry] of (pc.passThroughEnv ?? []).entries()) {
    const { fallback, name } = entryOf(entry)
    if (name === "" || name.includes(NUL) || fallback?.includes(NUL)) {
      yield { at: ["passThroughEnv", i], detail: `${quoted(entry)} is not a variable name (NAME or NAME=default)` }
    }
  }
  const wd = pc.workingDirectory
  if (wd !== undefined && (wd.startsWith("/") || wd.split("/").includes("..") || wd.includes(NUL))) {
    yield { at: ["workingDirectory"], detail: `${quoted(wd)} must be a relative path inside the sandbox` }
  }
  for (const [i, declared] of (pc.outputs ?? []).entries()) {
    // A leading `?`: an output the process may leave unmade (see `Process.optionalOutputs`).
    const out = declared.replace(/^\?/, "")
    if (!staysInside(out)) {
      yield {
        at: ["outputs", i],
        detail: `${quoted(out)} must be a relative path inside the working directory`
      }
    } else if (isItself(out) && !out.endsWith("/")) {
      yield {
        at: ["outputs", i],
        detail: `${quoted(out)} is the working directory itself, not a file: a directory output ends with /`
      }
    } else if (`${wd ?? ""}/${out}`.split("/").some((s) => REPOSITORY.has(s))) {
      yield {
        at: ["outputs", i],
        detail: `${quoted(out)} is in the repository's own directory (${
          `${wd ?? ""}/${out}`.split("/").find((s) => REPOSITORY.has(s))
        }): its config and hooks run outside any sandbox, and its history is the user's`
      }
    }
  }
  for (const [i, input] of (pc.inputs ?? []).entries()) {
    if (!staysInside(input.replace(/^!/, ""))) {
      yield {
        at: ["inputs", i],
        detail: `invalid glob ${quoted(input)}: globs are relative to the workspace and stay inside it`
      }
    }
  }
  for (const [i, input] of (pc.optionalInputs ?? []).entries()) {
    if (!staysInside(input.replace(/^!/, ""))) {
      yield {
        at: ["optionalInputs", i],
        detail: `invalid glob ${quoted(input)}: globs are relative to the workspace and stay inside it`
      }
    }
  }
  for (const [i, writable] of (pc.writableInputs ?? []).entries()) {
    if (!staysInside(writable)) {
      yield {
        at: ["writableInputs", i],
        detail: `${quoted(writable)} must be a relative path inside the workspace`
      }
    }
  }
  for (const [i, p] of (pc.hostPaths ?? []).entries()) {
    const bad = hostPathProblem(p)
    if (bad !== undefined) yield { at: ["hostPaths", i], detail: bad }
  }
  for (const [cache, at] of Object.entries(pc.namedCaches ?? {})) {
    if (!staysInside(at) || isItself(at)) {
      yield {
        at: ["namedCaches", cache],
        detail: `${quoted(at)} must be a relative path inside the sandbox, below its root`
      }
    }
  }
}
