/**
 * Where kiln.json writes each field of the processes a run has, once its tasks are expanded and its defaults
 * merged: a problem `Config.findingsIn` finds in a process is reported at the line of the file that says it. A
 * default input is the defaults'; a task's field is the task's (its globs rebased to the package); a field the
 * expansion made (a task's argv, inputs, deps, working directory, PATH) is the task's entry, with its package named.
 *
 * @internal
 */
import type { Config, Place, PlaceOf } from "../../../domain/config/Config.js"
import { type ConfigInput, type Origin, rebased } from "./expand.js"

/** The fields of a process that a default is added to (`ResolvedConfig.resolve`): the defaults' first. */
const MERGED = new Set<PropertyKey>(["inputs", "optionalInputs", "hostPaths"])

/** The fields a task writes as its processes have them (its paths relative to the package are rebased). */
const TASK_WRITES = new Set<PropertyKey>([
  "outputs",
  "optionalInputs",
  "writableInputs",
  "namedCaches",
  "env",
  "passEnv",
  "passThroughEnv",
  "timeout",
  "cache",
  "platform",
  "remote",
  "outputSymlinks",
  "hostPaths",
  "network"
])

type Fields = Readonly<Record<string, unknown>>

const strings = (u: unknown): ReadonlyArray<string> => (Array.isArray(u) ? u as ReadonlyArray<string> : [])

/**
 * Where `config` (kiln.json as decoded) writes each field of `resolved`'s processes (its tasks expanded as `origins`
 * say, its defaults merged).
 */
export const placesOf = (
  config: ConfigInput,
  resolved: Config,
  origins: Readonly<Record<string, Origin>>
): PlaceOf =>
(name, field) => {
  const origin = origins[name]
  const declared: ReadonlyArray<PropertyKey> = origin === undefined ? ["processes", name] : ["tasks", origin.key]
  const own: Fields = (origin === undefined ? config.processes?.[name] : config.tasks?.[origin.key]) ?? {}
  const defaults: Fields = config.defaults ?? {}
  const pkg = origin?.package
  // A field the file does not write is one the expansion made: an explicit process's are all its own.
  const entry: Place = { at: declared, written: origin === undefined, package: pkg }
  const [first, second] = field
  if (first === undefined) return entry
  if (origin !== undefined && !TASK_WRITES.has(first) && !(first === "inputs" && typeof second === "number")) {
    return entry
  }
  const as = (glob: string) => (origin === undefined || first === "hostPaths" ? glob : rebased(origin.directory, glob))
  if (MERGED.has(first) && typeof second === "number") {
    // Merged by value (hostPaths once each): the entry is found by it, the process's own before the defaults'.
    const value = strings((resolved.processes[name] as Fields | undefined)?.[first as string])[second]
    const mine = origin !== undefined && first === "inputs"
      ? -1
      : strings(own[first as string]).findIndex((g) => as(g) === value)
    if (mine >= 0) return { at: [...declared, first, mine], written: true, package: pkg }
    const theirs = strings(defaults[first as string]).indexOf(value ?? "")
    return theirs >= 0 ? { at: ["defaults", first, theirs], written: true, package: pkg } : entry
  }
  if (first === "env" && second !== undefined) {
    const mine = own.env as Fields | undefined
    if (mine !== undefined && Object.hasOwn(mine, second)) {
      return { at: [...declared, ...field], written: true, package: pkg }
    }
    const theirs = defaults.env as Fields | undefined
    if (theirs !== undefined && Object.hasOwn(theirs, second)) {
      return { at: ["defaults", ...field], written: true, package: pkg }
    }
    // A variable neither writes: a passed one's value, or a task's PATH.
    return entry
  }
  return { at: [...declared, ...field], written: true, package: pkg }
}
