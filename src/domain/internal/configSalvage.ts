/**
 * The rest of a config's errors when the schema refused some of its values: every error of a file in one run (#38),
 * not the schema's first and the checks' after those are fixed. Each refused value is deleted where it is (a field of
 * a process, of a task, of the defaults; a whole entry when the entry itself is refused), and what is left is decoded
 * again and checked as a valid config is (the graph, the paths, the tasks' expansion). The checks' errors in an entry
 * the schema refused part of are not said: they would be about a process the user has yet to fix (a dep whose type
 * was wrong, now missing).
 *
 * @internal
 */
import * as Either from "effect/Either"
import type { ParseIssue } from "effect/ParseResult"
import type { ConfigProblem, InvalidConfig } from "../config/Config.js"
import * as ConfigText from "../config/ConfigText.js"

/** A value the schema refused: where the file has it. */
interface Refused {
  readonly at: ReadonlyArray<PropertyKey>
}

/** What a salvage gives: the config's JSON without the refused values, and the entries that held them. */
export interface Pruned {
  readonly json: unknown
  /** `processes.NAME`, `tasks.NAME`, `defaults.FIELD`: the prefixes of the paths whose other errors are not said. */
  readonly broken: ReadonlyArray<string>
  /** Processes deleted whole: a dep on one is not an error of the dependent. */
  readonly gone: ReadonlyArray<string>
}

const SECTIONS = new Set(["processes", "tasks", "defaults"])

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null

/**
 * `json` without each refused value, or undefined when one is not inside an entry of `processes`, `tasks` or
 * `defaults` (a top-level field: nothing is left to check) or cannot be found.
 */
export const prune = (json: unknown, refused: ReadonlyArray<Refused>, wholeEntries = false): Pruned | undefined => {
  if (!isObject(json) || refused.length === 0) return undefined
  const copy = structuredClone(json) as Record<string, unknown>
  const broken = new Set<string>()
  const gone = new Set<string>()
  for (const refusal of refused) {
    const at = wholeEntries ? refusal.at.slice(0, 2) : refusal.at
    // A key that names a prototype would walk out of the file's own objects: nothing is salvaged from such a file.
    if (at.some((k) => k === "__proto__" || k === "constructor" || k === "prototype")) return undefined
    const [section, entry] = at
    if (typeof section !== "string" || !SECTIONS.has(section) || at.length < 2) return undefined
    broken.add(`${section}.${String(entry)}`)
    if (section === "processes" && at.length === 2) gone.add(String(entry))
    let holder: unknown = copy
    for (const key of at.slice(0, -1)) holder = isObject(holder) ? holder[key as string] : undefined
    if (!isObject(holder)) continue
    const last = at[at.length - 1] as string | number
    // An element of an array becomes a hole the second decode would refuse: the array goes instead.
    if (Array.isArray(holder)) {
      let parent: unknown = copy
      for (const key of at.slice(0, -2)) parent = isObject(parent) ? parent[key as string] : undefined
      if (isObject(parent)) delete parent[at[at.length - 2] as string]
    } else {
      delete holder[last]
    }
  }
  return { json: copy, broken: [...broken], gone: [...gone] }
}

/**
 * The config of `text` without the values `decode` refused (`refusedBy` says where they are), decoded again; undefined
 * when `text` decodes, or what is left does not either.
 */
export const salvage = <A>(
  text: string,
  decode: (json: unknown) => Either.Either<A, { readonly issue: ParseIssue }>,
  refusedBy: (issue: ParseIssue) => ReadonlyArray<Refused>
): (Pruned & { readonly config: A }) | undefined => {
  const read = ConfigText.parse(text)
  if ("errors" in read) return undefined
  let decoded = decode(read.json)
  if (Either.isRight(decoded)) return undefined
  let json = read.json
  const [broken, gone] = [new Set<string>(), new Set<string>()]
  // A required field refused leaves its entry without it, which the next decode refuses: then the entry goes whole.
  for (let round = 0; round < 3 && Either.isLeft(decoded); round++) {
    const pruned = prune(json, refusedBy(decoded.left.issue), round > 0)
    if (pruned === undefined) return undefined
    json = pruned.json
    for (const b of pruned.broken) broken.add(b)
    for (const g of pruned.gone) gone.add(g)
    decoded = decode(json)
  }
  return Either.isRight(decoded) ? { json, broken: [...broken], gone: [...gone], config: decoded.right } : undefined
}

/** Whether a problem's path is in one of `broken`'s entries. */
const inBroken = (broken: ReadonlyArray<string>) => (p: ConfigProblem) =>
  broken.some((b) =>
    p.path === b || p.path.startsWith(`${b}.`) || p.path.startsWith(`${b}[`) ||
    p.path.startsWith(`${b} `)
  )

/** Every problem of an error: its own, then its `more`. */
const problemsOf = (e: InvalidConfig): Array<ConfigProblem> => [
  { path: e.path, detail: e.detail, ...(e.location !== undefined ? { location: e.location } : {}) },
  ...(e.more ?? [])
]

/**
 * The schema's error with the checks' problems of the salvaged config added, in the file's order, but for those in
 * an entry the schema refused part of. `make` builds the error (`Config.invalidConfig`).
 */
export const merged = (
  schema: InvalidConfig,
  checks: InvalidConfig,
  broken: ReadonlyArray<string>,
  make: (file: string, problems: ReadonlyArray<ConfigProblem>) => InvalidConfig
): InvalidConfig => {
  const more = problemsOf(checks).filter((p) => !inBroken(broken)(p))
  if (more.length === 0) return schema
  const order = (p: ConfigProblem) => p.location === undefined ? [Infinity, 0] : [p.location.line, p.location.column]
  const all = [...problemsOf(schema), ...more].sort((a, b) => {
    const [x, y] = [order(a), order(b)]
    return x[0]! - y[0]! || x[1]! - y[1]!
  })
  return make(schema.file, all)
}
