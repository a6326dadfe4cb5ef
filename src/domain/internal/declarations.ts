/**
 * What kiln.json's processes declare of each other's outputs, checked before anything runs: two processes that
 * declare the same output (or one inside the other's directory) would each overwrite what the other wrote back, and
 * a process whose input globs take another's outputs without depending on it reads whatever an earlier run left
 * there: a stale file, and a cache key that says nothing of where it came from.
 *
 * @internal
 */
import * as path from "node:path"
import * as Glob from "../Glob.js"

/** The fields of a process these checks read. */
export interface Declared {
  readonly inputs?: ReadonlyArray<string> | undefined
  readonly optionalInputs?: ReadonlyArray<string> | undefined
  readonly outputs?: ReadonlyArray<string> | undefined
  readonly deps?: ReadonlyArray<string> | undefined
  readonly workingDirectory?: string | undefined
}

/** A declaration refused: the process, where in it, and what is wrong. */
export interface Conflict {
  readonly name: string
  readonly at: ReadonlyArray<PropertyKey>
  readonly detail: string
}

/** An output as a workspace path: a file, or a directory (written with a trailing `/`). */
interface Output {
  readonly owner: string
  readonly index: number
  readonly path: string
  readonly directory: boolean
  /** Its place among all outputs, in process name order then as declared: which of two conflicts is said first. */
  readonly position: number
}

/** An output as written (an optional one starts with `?`) as a workspace path, from its working directory. */
const outputOf = (
  owner: string,
  index: number,
  written: string,
  wd: string | undefined,
  position: number
): Output => {
  const bare = written.replace(/^\?/, "")
  const directory = bare.endsWith("/")
  const joined = path.posix.normalize(path.posix.join(wd ?? "", bare)).replace(/\/+$/, "")
  return { owner, index, path: joined === "." ? "" : joined, directory, position }
}

/** Whether `inner` is `outer` or lies under it (`""`: the workspace's root, under which everything lies). */
const within = (inner: string, outer: string) => outer === "" || inner === outer || inner.startsWith(`${outer}/`)

const overlaps = (a: Output, b: Output) =>
  a.path === b.path || (a.directory && within(b.path, a.path)) || (b.directory && within(a.path, b.path))

const shown = (o: Output) => (o.path === "" ? "./" : o.directory ? `${o.path}/` : o.path)

/**
 * The outputs by path, so that what a path or a glob can meet is found without looking at every output: comparing
 * each process's globs and outputs with every other's made a config of a thousand processes cost ~200 ms to check,
 * and five thousand seconds.
 */
interface OutputIndex {
  readonly all: ReadonlyArray<Output>
  /** In path order: the paths under a directory are one run of it. */
  readonly sorted: ReadonlyArray<Output>
  readonly byPath: ReadonlyMap<string, ReadonlyArray<Output>>
}

const indexOf = (outputs: ReadonlyArray<Output>): OutputIndex => {
  const byPath = new Map<string, Array<Output>>()
  for (const o of outputs) {
    const same = byPath.get(o.path)
    if (same === undefined) byPath.set(o.path, [o])
    else same.push(o)
  }
  const sorted = [...outputs].sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : a.position - b.position))
  return { all: outputs, sorted, byPath }
}

/** The outputs at `p` or under it (every one under the workspace's root, `""`). */
const atOrUnder = (index: OutputIndex, p: string): ReadonlyArray<Output> => {
  if (p === "") return index.all
  const prefix = `${p}/`
  const { sorted } = index
  let lo = 0
  let hi = sorted.length
  while (lo < hi) {
    const mid = (lo + hi) >>> 1
    if (sorted[mid]!.path < prefix) lo = mid + 1
    else hi = mid
  }
  const found = [...(index.byPath.get(p) ?? [])]
  for (let i = lo; i < sorted.length && sorted[i]!.path.startsWith(prefix); i++) found.push(sorted[i]!)
  return found
}

/** The directory outputs strictly above `p`: the workspace's root (`""`) and each of `p`'s parents. */
const directoriesAbove = (index: OutputIndex, p: string): Array<Output> => {
  if (p === "") return []
  const found: Array<Output> = []
  const names = p.split("/")
  for (let n = 0; n < names.length; n++) {
    for (const o of index.byPath.get(names.slice(0, n).join("/")) ?? []) if (o.directory) found.push(o)
  }
  return found
}

/** A process's input globs, each with where it is declared, and the exclusions among them (without their `!`). */
export const declaredGlobsOf = (declared: Declared) => {
  const { inputs = [], optionalInputs = [] } = declared
  const globs = [
    ...inputs.map((glob, i) => ({ glob, at: ["inputs", i] as const })),
    ...optionalInputs.map((glob, i) => ({ glob, at: ["optionalInputs", i] as const }))
  ]
  return { globs, exclusions: globs.filter((g) => g.glob.startsWith("!")).map((g) => g.glob.slice(1)) }
}

/** The first of `candidates` (in {@link Output.position} order) that `keep` keeps. */
const firstOf = (candidates: Iterable<Output>, keep: (o: Output) => boolean): Output | undefined => {
  let first: Output | undefined
  for (const o of candidates) if ((first === undefined || o.position < first.position) && keep(o)) first = o
  return first
}

/** The outputs that {@link overlaps} `a` can be true of: at its path, under it when a directory, directories above. */
const mayOverlap = (index: OutputIndex, a: Output): Iterable<Output> => [
  ...(a.directory ? atOrUnder(index, a.path) : index.byPath.get(a.path) ?? []),
  ...directoriesAbove(index, a.path)
]

/**
 * The outputs {@link takes} can be true of for `glob`: for one matched segment by segment, those at its literal
 * start (`lib` of `lib/**`) or under it, and the directories above it; every output for any other glob.
 */
const mayBeTaken = (index: OutputIndex, glob: string): Iterable<Output> => {
  const base = Glob.literalBaseOf(glob)
  if (base === undefined || base === "") return index.all
  return [...atOrUnder(index, base), ...directoriesAbove(index, base)]
}

/** Each process's deps, transitively (the config's graph is acyclic when this runs). */
const closures = (processes: Readonly<Record<string, Declared>>) => {
  const memo = new Map<string, ReadonlySet<string>>()
  const of = (name: string): ReadonlySet<string> => {
    const known = memo.get(name)
    if (known !== undefined) return known
    const all = new Set<string>()
    memo.set(name, all)
    for (const dep of processes[name]?.deps ?? []) {
      all.add(dep)
      for (const d of of(dep)) all.add(d)
    }
    return all
  }
  return of
}

/** Whether the include glob `glob`, less `exclusions`, takes any of `output`'s paths. */
const takes = (glob: string, exclusions: ReadonlyArray<string>, output: Output): boolean => {
  if (!output.directory) {
    return Glob.matcher([glob])(output.path) && !exclusions.some((x) => Glob.matcher([x])(output.path))
  }
  if (output.path === "") return true
  const reach = Glob.reachUnder(glob, output.path)
  if (reach === undefined || !reach.some) return false
  return !exclusions.some((x) => Glob.reachUnder(x, output.path)?.all === true)
}

/**
 * The first conflict among `processes`' declarations (see {@link conflictsIn}).
 */
export const conflictIn = (processes: Readonly<Record<string, Declared>>): Conflict | undefined => {
  for (const conflict of conflictsIn(processes)) return conflict
  return undefined
}

/**
 * The conflicts among `processes`' declarations, in name order: each output two processes declare, then each input
 * glob that takes another process's outputs without a dep on it (its deps' deps count: they run before it too), once
 * for each glob.
 */
export function* conflictsIn(processes: Readonly<Record<string, Declared>>): Generator<Conflict> {
  const names = Object.keys(processes).sort()
  const outputs: Array<Output> = []
  for (const name of names) {
    for (const [i, o] of (processes[name]!.outputs ?? []).entries()) {
      outputs.push(outputOf(name, i, o, processes[name]!.workingDirectory, outputs.length))
    }
  }
  const index = indexOf(outputs)
  for (const a of outputs) {
    const other = firstOf(mayOverlap(index, a), (b) => b.owner < a.owner && overlaps(a, b))
    if (other !== undefined) {
      yield {
        name: a.owner,
        at: ["outputs", a.index],
        detail: `${shown(a)} is also an output of ${JSON.stringify(other.owner)} (${shown(other)}): ` +
          "two processes cannot write the same path back"
      }
    }
  }
  const depsOf = closures(processes)
  for (const name of names) {
    const { exclusions, globs } = declaredGlobsOf(processes[name]!)
    for (const { at, glob } of globs) {
      if (glob.startsWith("!")) continue
      // The first producer in name order, and its first output taken: what the message names.
      const taken = firstOf(
        mayBeTaken(index, glob),
        (o) => o.owner !== name && takes(glob, exclusions, o) && !depsOf(name).has(o.owner)
      )
      if (taken !== undefined) {
        yield {
          name,
          at,
          detail: `${JSON.stringify(glob)} takes ${shown(taken)}, an output of ${JSON.stringify(taken.owner)}: ` +
            `add ${JSON.stringify(taken.owner)} to deps (or exclude it: "!${shown(taken)}${
              taken.directory ? "**" : ""
            }")`
        }
      }
    }
  }
}

/** A dependency cycle among `processes`, as the names along it (the first again at its end), if there is one. */
export const findCycle = (processes: Readonly<Record<string, Declared>>): Array<string> | undefined => {
  const state = new Map<string, "visiting" | "done">()
  const stack: Array<string> = []
  const visit = (name: string): Array<string> | undefined => {
    if (state.get(name) === "done") return undefined
    if (state.get(name) === "visiting") return [...stack.slice(stack.indexOf(name)), name]
    state.set(name, "visiting")
    stack.push(name)
    for (const dep of processes[name]!.deps ?? []) {
      const found = visit(dep)
      if (found !== undefined) return found
    }
    stack.pop()
    state.set(name, "done")
    return undefined
  }
  for (const name of Object.keys(processes).sort()) {
    const found = visit(name)
    if (found !== undefined) return found
  }
  return undefined
}
