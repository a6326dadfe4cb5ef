/**
 * `--affected`'s processes: those whose inputs take a file that differs from a base, and everything that depends on
 * them. Apart from `Selection.ts` because it matches globs: the run memo's check selects before it loads a glob
 * matcher, and never with `--affected`.
 */
import * as Selection from "./config/Selection.js"
import * as Glob from "./Glob.js"

/**
 * Whether input globs take a workspace-relative path: an include glob matches it, or it lies under a literal include
 * (a directory taken whole), and no exclude glob matches it.
 */
export const inputMatcher = (globs: ReadonlyArray<string>): (path: string) => boolean => {
  const include = globs.filter((g) => !g.startsWith("!"))
  const exclude = globs.filter((g) => g.startsWith("!")).map((g) => g.slice(1))
  if (include.length === 0) return () => false
  const inc = Glob.matcher(include)
  const exc = exclude.length === 0 ? () => false : Glob.matcher(exclude)
  const literals = include.filter((g) => Glob.baseOf(g) === g).map((g) => g.replace(/\/+$/, ""))
  return (p) => (inc(p) || literals.some((l) => p.startsWith(`${l}/`))) && !exc(p)
}

/**
 * `--affected`: the processes whose inputs take one of `changed` (workspace-relative paths that differ from the
 * base), and everything that depends on them. A change to the config file itself (`configFile`, relative too)
 * affects every process: any of them may be declared otherwise now.
 */
export const affected = (
  graph: Selection.Graph,
  inputsOf: (name: string) => ReadonlyArray<string>,
  changed: ReadonlyArray<string>,
  configFile?: string
): Set<string> => {
  if (configFile !== undefined && changed.includes(configFile)) return new Set(graph.names)
  const touched = graph.names.filter((name) => {
    const takes = inputMatcher(inputsOf(name))
    return changed.some(takes)
  })
  return Selection.reach(Selection.dependentsOf(graph), touched)
}
