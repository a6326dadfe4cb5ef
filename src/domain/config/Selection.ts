/**
 * Which processes a command acts on, from the words a user gives `kiln run`, `kiln ls` and `kiln graph`:
 *
 * - `build` — a process by name; `'build:*'`, `'*:web'` — every process a glob matches (`*`: any run of characters,
 *   `?`: any one);
 * - `build...` — it and its deps, transitively; `...build` — it and everything that depends on it, transitively;
 *   `...build...` — both (the dots on the side of what is added, as pnpm's and turbo's `--filter` read them);
 * - `!name`, `!glob` (with `...` too) — never selected, whatever else selects it;
 * - with `--affected`, the processes whose inputs changed and their dependents (`Affected.ts`): the words then
 *   narrow that set (none: all of it).
 *
 * No word selects every process. A name that is a process's whole name is that process, whatever it holds. A word that
 * names no process, or a glob that matches none, is an error that suggests the nearest names. What is selected is
 * what a command acts on: `kiln run` also runs the deps of what it selects (an excluded dep too: its outputs are
 * inputs), as it always has.
 *
 * Plain code without Effect: the run memo's check (`programs/kiln/noop.ts`) selects too, before Effect is loaded.
 */
import { didYouMean, hasWildcards, nearest } from "../internal/nearestNames.js"

/**
 * The process graph a selection is made in: the names in kiln.json's order, and each one's deps.
 */
export interface Graph {
  readonly names: ReadonlyArray<string>
  readonly depsOf: (name: string) => ReadonlyArray<string>
}

/**
 * One word of a selection, read.
 */
export interface Term {
  /** The word as given. */
  readonly word: string
  readonly exclude: boolean
  /** The name or glob, without `!` and the dots. */
  readonly pattern: string
  /** `x...`: its deps too. */
  readonly deps: boolean
  /** `...x`: its dependents too. */
  readonly dependents: boolean
}

/**
 * A selection that cannot be made: a word that names no process, with the nearest names.
 */
export interface Unknown {
  readonly _tag: "Unknown"
  readonly word: string
  readonly suggestions: ReadonlyArray<string>
  /** One line saying so, and what the user may have meant. */
  readonly message: string
}

export interface Selected {
  readonly _tag: "Selected"
  /** In kiln.json's order. */
  readonly names: ReadonlyArray<string>
}

const DOTS = "..."

/**
 * A word read as a selection term. `names` are the graph's: a word that is a process's whole name is that process.
 */
export const parseTerm = (word: string, names: ReadonlySet<string> = new Set()): Term => {
  const exact = (pattern: string, exclude: boolean): Term => ({
    word,
    exclude,
    pattern,
    deps: false,
    dependents: false
  })
  if (names.has(word)) return exact(word, false)
  const exclude = word.startsWith("!")
  let pattern = exclude ? word.slice(1) : word
  if (names.has(pattern)) return exact(pattern, exclude)
  const dependents = pattern.startsWith(DOTS) && pattern.length > DOTS.length
  if (dependents) pattern = pattern.slice(DOTS.length)
  const deps = pattern.endsWith(DOTS) && pattern.length > DOTS.length
  if (deps) pattern = pattern.slice(0, -DOTS.length)
  return { word, exclude, pattern, deps, dependents }
}

const globCache = new Map<string, RegExp>()

/** A glob of names as a regular expression: `*` any run of characters, `?` any one, everything else literal. */
const globRegExp = (glob: string): RegExp => {
  let re = globCache.get(glob)
  if (re === undefined) {
    const source = [...glob].map((c) => c === "*" ? ".*" : c === "?" ? "." : c.replace(/[.+^${}()|[\]\\/-]/g, "\\$&"))
    re = new RegExp(`^${source.join("")}$`, "s")
    globCache.set(glob, re)
  }
  return re
}

/**
 * The names a pattern matches (in the graph's order): itself if it is a name, else those its glob matches.
 */
export const matching = (graph: Graph, pattern: string): Array<string> => {
  if (graph.names.includes(pattern)) return [pattern]
  if (!hasWildcards(pattern)) return []
  const re = globRegExp(pattern)
  return graph.names.filter((n) => re.test(n))
}

/**
 * `from` and everything reachable from it through `next`, transitively.
 */
export const reach = (next: (name: string) => ReadonlyArray<string>, from: Iterable<string>): Set<string> => {
  const seen = new Set<string>()
  const stack = [...from]
  while (stack.length > 0) {
    const name = stack.pop()!
    if (seen.has(name)) continue
    seen.add(name)
    for (const n of next(name)) if (!seen.has(n)) stack.push(n)
  }
  return seen
}

/**
 * Each process's dependents: the processes that name it among their deps.
 */
export const dependentsOf = (graph: Graph): (name: string) => ReadonlyArray<string> => {
  const dependents = new Map<string, Array<string>>()
  for (const name of graph.names) {
    for (const dep of graph.depsOf(name)) {
      const list = dependents.get(dep)
      if (list === undefined) dependents.set(dep, [name])
      else list.push(name)
    }
  }
  return (name) => dependents.get(name) ?? []
}

/**
 * The line that says a word names no process, with the nearest names.
 */
export const unknownOf = (graph: Graph, term: Term): Unknown => {
  const glob = hasWildcards(term.pattern)
  const suggestions = nearest(term.pattern, graph.names, { wildcards: glob })
  const what = glob ? `"${term.pattern}" matches no process` : `unknown process "${term.pattern}"`
  const hint = didYouMean(suggestions)
  return {
    _tag: "Unknown",
    word: term.word,
    suggestions,
    message: hint === "" ? what : `${what}: ${hint}`
  }
}

/**
 * The processes `words` select in `graph`; with `affected` (the processes `--affected` found, see `Affected.ts`),
 * only those among them.
 */
export const select = (
  graph: Graph,
  words: ReadonlyArray<string>,
  affected?: ReadonlySet<string>
): Selected | Unknown => {
  const names = new Set(graph.names)
  const dependents = dependentsOf(graph)
  const included = new Set<string>()
  const excluded = new Set<string>()
  let includes = 0
  for (const word of words) {
    const term = parseTerm(word, names)
    const matched = matching(graph, term.pattern)
    if (matched.length === 0) return unknownOf(graph, term)
    const into = term.exclude ? excluded : included
    if (!term.exclude) includes++
    for (const name of matched) into.add(name)
    if (term.deps) { for (const name of reach(graph.depsOf, matched)) into.add(name) }
    if (term.dependents) { for (const name of reach(dependents, matched)) into.add(name) }
  }
  const selected = graph.names.filter((n) =>
    (includes === 0 || included.has(n)) && (affected === undefined || affected.has(n)) && !excluded.has(n)
  )
  return { _tag: "Selected", names: selected }
}
