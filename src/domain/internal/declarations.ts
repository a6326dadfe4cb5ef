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
}

/** An output as written (an optional one starts with `?`) as a workspace path, from its working directory. */
const outputOf = (owner: string, index: number, written: string, wd: string | undefined): Output => {
  const bare = written.replace(/^\?/, "")
  const directory = bare.endsWith("/")
  const joined = path.posix.normalize(path.posix.join(wd ?? "", bare)).replace(/\/+$/, "")
  return { owner, index, path: joined === "." ? "" : joined, directory }
}

/** Whether `inner` is `outer` or lies under it (`""`: the workspace's root, under which everything lies). */
const within = (inner: string, outer: string) => outer === "" || inner === outer || inner.startsWith(`${outer}/`)

const overlaps = (a: Output, b: Output) =>
  a.path === b.path || (a.directory && within(b.path, a.path)) || (b.directory && within(a.path, b.path))

const shown = (o: Output) => (o.path === "" ? "./" : o.directory ? `${o.path}/` : o.path)

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
  const outputs = names.flatMap((name) =>
    (processes[name]!.outputs ?? []).map((o, i) => outputOf(name, i, o, processes[name]!.workingDirectory))
  )
  const byOwner = new Map<string, Array<Output>>()
  for (const o of outputs) byOwner.set(o.owner, [...(byOwner.get(o.owner) ?? []), o])
  for (const a of outputs) {
    const other = outputs.find((b) => b.owner < a.owner && overlaps(a, b))
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
    const { inputs = [], optionalInputs = [] } = processes[name]!
    const globs = [
      ...inputs.map((glob, i) => ({ glob, at: ["inputs", i] })),
      ...optionalInputs.map((glob, i) => ({ glob, at: ["optionalInputs", i] }))
    ]
    const exclusions = globs.filter((g) => g.glob.startsWith("!")).map((g) => g.glob.slice(1))
    const deps = depsOf(name)
    for (const { at, glob } of globs) {
      if (glob.startsWith("!")) continue
      for (const [owner, owned] of byOwner) {
        if (owner === name || deps.has(owner)) continue
        const taken = owned.find((o) => takes(glob, exclusions, o))
        if (taken !== undefined) {
          yield {
            name,
            at,
            detail: `${JSON.stringify(glob)} takes ${shown(taken)}, an output of ${JSON.stringify(owner)}: ` +
              `add ${JSON.stringify(owner)} to deps (or exclude it: "!${shown(taken)}${taken.directory ? "**" : ""}")`
          }
          break
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
