/**
 * kiln.json's `defaults`, `passEnv` and `passThroughEnv` resolved into the processes a run has: every process given
 * the defaults under its own fields, and each `passEnv` variable's value taken from kiln's environment into its `env`,
 * where it is hashed into the action key like any literal. `passThroughEnv` keeps only the names (with their
 * defaults): the values are read when the process is spawned (`runner/HostEnv.ts`), so they never reach the config a
 * run memo keeps, the action, a run record or anything uploaded.
 *
 * Plain code without Effect, by design: the no-op check (`programs/kiln/noop.ts`) resolves too, before it loads
 * anything, so that a `passEnv` value that changed is a config that changed.
 *
 * @since 0.1.0
 */
import { pathText, quoted } from "../internal/fieldText.js"

/** A process's fields this resolves (the rest is carried as it is). */
interface EnvFields {
  readonly env?: Readonly<Record<string, string>> | undefined
  readonly passEnv?: ReadonlyArray<string> | undefined
  readonly passThroughEnv?: ReadonlyArray<string> | undefined
  readonly inputs?: ReadonlyArray<string> | undefined
  readonly optionalInputs?: ReadonlyArray<string> | undefined
  readonly timeout?: string | undefined
  readonly cache?: string | undefined
  readonly hostPaths?: ReadonlyArray<string> | undefined
  readonly network?: boolean | undefined
}

/**
 * A config as this reads it: decoded, or JSON as the no-op check parsed it.
 *
 * @since 0.1.0
 * @category models
 */
export interface ConfigInput {
  readonly defaults?: EnvFields | undefined
  readonly processes?: Readonly<Record<string, EnvFields & { readonly [field: string]: unknown }>> | undefined
}

/**
 * Where the config is wrong: the file, the field (`processes.build.passEnv[0]`) and what is wrong.
 *
 * @since 0.1.0
 * @category models
 */
export interface Problem {
  readonly file: string
  readonly path: string
  readonly detail: string
}

/**
 * A `passEnv` or `passThroughEnv` entry: `NAME`, or `NAME=default` (the value when kiln's environment has no `NAME`).
 *
 * @since 0.1.0
 * @category parsing
 */
export const entryOf = (entry: string): { readonly name: string; readonly fallback: string | undefined } => {
  const eq = entry.indexOf("=")
  return eq === -1 ? { name: entry, fallback: undefined } : { name: entry.slice(0, eq), fallback: entry.slice(eq + 1) }
}

/**
 * A pass-through entry's value now: kiln's environment's, else its default. The engine has checked at load time
 * that one of them is there; undefined if the variable was unset since.
 *
 * @since 0.1.0
 * @category parsing
 */
export const valueOf = (entry: string, host: Readonly<Record<string, string | undefined>>): string | undefined => {
  const { fallback, name } = entryOf(entry)
  return host[name] ?? fallback
}

/**
 * Whether `config` has anything to resolve: `defaults`, or a process with `passEnv` or `passThroughEnv`.
 *
 * @since 0.1.0
 * @category resolving
 */
export const needsResolving = (config: ConfigInput): boolean =>
  config.defaults !== undefined ||
  Object.values(config.processes ?? {}).some((pc) => pc.passEnv !== undefined || pc.passThroughEnv !== undefined)

/**
 * What is wrong with a `hostPaths` entry, if anything: it is an absolute path, normalised (no `.`, `..`, `//` or
 * trailing `/`: the path the sandbox binds is the path written), not `/` itself (the whole host would be no sandbox),
 * without NUL. Whether it lies in the workspace is judged where the workspace is known (`TaskExpansion.ts`).
 *
 * @since 0.1.0
 * @category parsing
 */
export const hostPathProblem = (p: string): string | undefined => {
  if (p.includes("\u0000")) return "holds a NUL byte, which no path can"
  if (!p.startsWith("/")) return `${quoted(p)} must be an absolute path (a directory or file of the host)`
  if (p.split("/").includes("..")) return `${quoted(p)} must not hold ..: name the directory itself`
  const normal = p.replace(/\/+/g, "/").split("/").filter((s) => s !== ".").join("/").replace(/\/$/, "")
  if (normal === "") return `${quoted(p)} is the whole host: name the directories the process needs`
  if (normal !== p) return `${quoted(p)} is not normalised: write it as ${quoted(normal)}`
  return undefined
}

/**
 * The check of `hostPaths` that needs the workspace: a host path in it (or holding it) would show the process the
 * workspace's files, which it reads only as declared inputs. `workspaces`: the workspace's absolute path, and its real
 * path where that differs. `declaredAt` says where the file declares a process.
 *
 * @since 0.1.0
 * @category parsing
 */
export const hostPathInWorkspace = (
  file: string,
  processes: Readonly<Record<string, { readonly hostPaths?: ReadonlyArray<string> | undefined }>>,
  workspaces: ReadonlyArray<string>,
  declaredAt: (name: string) => ReadonlyArray<PropertyKey> = (name) => ["processes", name]
):
  | (Problem & { readonly at: ReadonlyArray<PropertyKey>; readonly name: string; readonly index: number })
  | undefined =>
{
  const within = (inner: string, outer: string) => inner === outer || inner.startsWith(`${outer}/`)
  for (const [name, pc] of Object.entries(processes)) {
    for (const [i, p] of (pc.hostPaths ?? []).entries()) {
      const ws = workspaces.find((w) => within(p, w) || within(w, p))
      if (ws === undefined) continue
      const how = within(p, ws) ? "is inside" : "holds"
      const at = [...declaredAt(name), "hostPaths", i]
      return {
        file,
        at,
        name,
        index: i,
        path: pathText(at),
        detail: `${quoted(p)} ${how} the workspace: a process reads the workspace's files only as declared inputs`
      }
    }
  }
  return undefined
}

/** What is wrong with an entry's name or default, if anything. */
const entryProblem = (entry: string): string | undefined => {
  const { fallback, name } = entryOf(entry)
  if (name === "" || name.includes("\u0000")) {
    return `${quoted(name)} is not a variable name: it must be non-empty, without = or NUL`
  }
  if (fallback?.includes("\u0000")) return "holds a NUL byte, which no variable's value can"
  return undefined
}

interface Merged {
  readonly env: Map<string, string>
  /** Pass-through entries by name. */
  readonly through: Map<string, string>
}

type Level = readonly [at: ReadonlyArray<PropertyKey>, fields: EnvFields]

/** A problem of a field: where (keys) and what is wrong. */
interface Found {
  readonly at: ReadonlyArray<PropertyKey>
  readonly detail: string
}

/**
 * Merges one level's env fields (the defaults', then a process's own) over what is there: a variable a level names
 * takes the place of what an earlier one said of it, whatever the kind. Each problem is added to `found`, and its entry
 * left out.
 */
const mergeLevel = (
  merged: Merged,
  [at, fields]: Level,
  host: Readonly<Record<string, string | undefined>>,
  found: Array<Found>
): void => {
  const named = new Map<string, string>()
  const claim = (name: string, field: string, where: ReadonlyArray<PropertyKey>): Found | undefined => {
    const other = named.get(name)
    if (other !== undefined) {
      return { at: where, detail: `${quoted(name)} is in ${other} too: a variable is given one way` }
    }
    named.set(name, field)
    return undefined
  }
  /** The problem with a pass entry, if any: its name or default, the name given twice, or unset without a default. */
  const passProblem = (entry: string, field: string, where: ReadonlyArray<PropertyKey>, needsValue: boolean) => {
    const bad = entryProblem(entry)
    if (bad !== undefined) return { at: where, detail: bad }
    const { fallback, name } = entryOf(entry)
    const twice = claim(name, field, where)
    if (twice !== undefined) return twice
    return needsValue && host[name] === undefined && fallback === undefined
      ? { at: where, detail: unsetDetail(name) }
      : undefined
  }
  for (const [k, v] of Object.entries(fields.env ?? {})) {
    claim(k, "env", [...at, "env", k])
    merged.env.set(k, v)
    merged.through.delete(k)
  }
  for (const [i, entry] of (fields.passEnv ?? []).entries()) {
    const problem = passProblem(entry, "passEnv", [...at, "passEnv", i], true)
    if (problem !== undefined) {
      found.push(problem)
      continue
    }
    const { fallback, name } = entryOf(entry)
    merged.env.set(name, (host[name] ?? fallback)!)
    merged.through.delete(name)
  }
  for (const [i, entry] of (fields.passThroughEnv ?? []).entries()) {
    const problem = passProblem(entry, "passThroughEnv", [...at, "passThroughEnv", i], true)
    if (problem !== undefined) {
      found.push(problem)
      continue
    }
    const { name } = entryOf(entry)
    merged.through.set(name, entry)
    merged.env.delete(name)
  }
}

/** Why an input glob is refused, if it is: one that leaves the workspace (as `Config.check` says of a process's). */
const globProblem = (glob: string): string | undefined => {
  const p = glob.replace(/^!/, "")
  return p === "" || p.startsWith("/") || p.split("/").includes("..") || p.includes("\u0000")
    ? `invalid glob ${quoted(glob)}: globs are relative to the workspace and stay inside it`
    : undefined
}

/** The problems of `defaults` on their own, so that one is reported even in a config of no processes. */
const defaultsProblems = (defaults: EnvFields, host: Readonly<Record<string, string | undefined>>): Array<Found> => {
  const found: Array<Found> = []
  mergeLevel({ env: new Map(), through: new Map() }, [["defaults"], defaults], host, found)
  for (const field of ["inputs", "optionalInputs"] as const) {
    for (const [i, glob] of (defaults[field] ?? []).entries()) {
      const bad = globProblem(glob)
      if (bad !== undefined) found.push({ at: ["defaults", field, i], detail: bad })
    }
  }
  for (const [i, p] of (defaults.hostPaths ?? []).entries()) {
    const bad = hostPathProblem(p)
    if (bad !== undefined) found.push({ at: ["defaults", "hostPaths", i], detail: bad })
  }
  return found
}

const unsetDetail = (name: string) =>
  `${quoted(name)} is not set in kiln's environment: set it, or give a default (${quoted(`${name}=value`)})`

/**
 * The config with its defaults applied to every process and its `passEnv` values taken from `host` (kiln's
 * environment), or the first problem: an entry that is not a variable, a variable given two ways at one level, a
 * variable listed but unset without a default, a default input glob that leaves the workspace. Merge order: the
 * defaults, then the process's own (its `env`, `timeout`, `cache` and `network` win; `inputs`, `optionalInputs` and
 * `hostPaths` are added to the defaults'). `declaredAt` says where the file declares a process (a process a task gave
 * is reported at the task). A config with nothing to resolve is given back as it is.
 *
 * @since 0.1.0
 * @category resolving
 */
export const resolve = <C extends ConfigInput>(
  file: string,
  config: C,
  host: Readonly<Record<string, string | undefined>>,
  declaredAt: (name: string) => ReadonlyArray<PropertyKey> = (name) => ["processes", name]
): C | Problem => {
  const { config: resolved, problems } = resolveAll(config, host, declaredAt)
  const first = problems[0]
  return first === undefined ? resolved : { file, path: pathText(first.at), detail: first.detail }
}

/**
 * {@link resolve}, with every problem (each where the file has it, in the order of the config: the defaults', then each
 * process's) and the config resolved without the entries they are about.
 *
 * @since 0.1.0
 * @category resolving
 */
export const resolveAll = <C extends ConfigInput>(
  config: C,
  host: Readonly<Record<string, string | undefined>>,
  declaredAt: (name: string) => ReadonlyArray<PropertyKey> = (name) => ["processes", name]
): { readonly config: C; readonly problems: ReadonlyArray<Found> } => {
  if (!needsResolving(config)) return { config, problems: [] }
  const { defaults, ...rest } = config
  const found = defaults === undefined ? [] : defaultsProblems(defaults, host)
  const processes: Record<string, object> = {}
  for (const [name, pc] of Object.entries(config.processes ?? {})) {
    const merged: Merged = { env: new Map(), through: new Map() }
    // The defaults' problems are said once, above: merged here for what they give.
    if (defaults !== undefined) mergeLevel(merged, [["defaults"], defaults], host, [])
    mergeLevel(merged, [declaredAt(name), pc], host, found)
    const { passEnv: _passEnv, passThroughEnv: _passThroughEnv, ...own } = pc
    const inputs = [...(defaults?.inputs ?? []), ...(pc.inputs ?? [])]
    const optionalInputs = [...(defaults?.optionalInputs ?? []), ...(pc.optionalInputs ?? [])]
    const timeout = pc.timeout ?? defaults?.timeout
    const cache = pc.cache ?? defaults?.cache
    const hostPaths = [...new Set([...(defaults?.hostPaths ?? []), ...(pc.hostPaths ?? [])])]
    const network = pc.network ?? defaults?.network
    processes[name] = {
      ...own,
      ...(merged.env.size > 0 || pc.env !== undefined ? { env: Object.fromEntries(merged.env) } : {}),
      ...(merged.through.size > 0 ? { passThroughEnv: [...merged.through.values()] } : {}),
      ...(inputs.length > 0 || pc.inputs !== undefined ? { inputs } : {}),
      ...(optionalInputs.length > 0 || pc.optionalInputs !== undefined ? { optionalInputs } : {}),
      ...(timeout !== undefined ? { timeout } : {}),
      ...(cache !== undefined ? { cache } : {}),
      ...(hostPaths.length > 0 || pc.hostPaths !== undefined ? { hostPaths } : {}),
      ...(network !== undefined ? { network } : {})
    }
  }
  return { config: { ...rest, processes } as unknown as C, problems: found }
}

/**
 * Whether `u` is a {@link Problem}.
 *
 * @since 0.1.0
 * @category resolving
 */
export const isProblem = (u: unknown): u is Problem =>
  typeof u === "object" && u !== null && "detail" in u && "file" in u && "path" in u
