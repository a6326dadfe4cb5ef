/**
 * The expansion of kiln.json's `tasks` over a workspace, as read (`workspaceFiles.ts`): pure, and the processes it
 * gives are those kiln.json would hold written out by hand (`kiln ls --json` prints them so).
 *
 * A task `T` gives the process `T:<package>` for every package with a script `T`, which runs that script directly
 * (`/bin/sh -c`, as npm, pnpm, yarn and bun run it; see docs/architecture.md for why not through them) in the
 * package's directory. Its inputs are the package's files (but the outputs of its tasks) with its `node_modules`, the
 * root's `package.json`, lockfile, workspace file and the configs packages extend, the root's `node_modules`, and for
 * each workspace package it depends on (transitively): its `package.json` and `node_modules`, and either its files
 * or, when the task depends on that package's task `^B`, the outputs of `B:<dependency>`.
 *
 * @internal
 */
import type { Config, ProcessConfig, TaskConfig } from "../../../domain/config/Config.js"
import * as ProcessName from "../../../domain/config/ProcessName.js"
import { staysInside } from "./packageGlobs.js"
import { satisfies } from "./semver.js"
import type { Package, Problem, Workspace } from "./workspaceFiles.js"

/** Where an inferred process comes from. */
export interface Origin {
  /** Its key in `tasks`: `build`, or `web#build`. */
  readonly key: string
  readonly task: string
  readonly package: string
  readonly directory: string
}

/** The config with its tasks written out as processes, and where each inferred process comes from. */
export interface Expanded {
  readonly config: Config
  readonly origins: Readonly<Record<string, Origin>>
}

/**
 * A problem with kiln.json's tasks: as any `Problem`, and where in kiln.json (`at`: keys from `tasks`), about the
 * field's name rather than its value when `key`.
 */
export interface TaskProblem extends Problem {
  readonly at: ReadonlyArray<PropertyKey>
  readonly key?: boolean
}

/**
 * The expansion with every problem of kiln.json's tasks: the processes of the tasks refused are left out, and named
 * (`refused`), so that what depends on them is not refused again.
 */
export interface ExpandedAll extends Expanded {
  readonly problems: ReadonlyArray<TaskProblem>
  readonly refused: ReadonlySet<string>
}

/** kiln.json as the expansion reads it: decoded, or as the no-op check parsed it (then `processes` may be absent). */
export type ConfigInput = Omit<Config, "processes"> & { readonly processes?: Config["processes"] | undefined }

/**
 * Files at the root that a package's processes read besides its own: the package manager's (the lockfile says which
 * versions `node_modules` holds; the workspace file, which packages there are), and the configs packages extend or
 * that compilers look for up the tree (`tsconfig.base.json`, Babel's and SWC's, browserslist's). Lint and format
 * configs are not: a change to one would run every build again; a task that reads one says so (`rootInputs`).
 */
const ROOT_FILES: ReadonlyArray<RegExp> = [
  /^package\.json$/,
  /^(package-lock\.json|npm-shrinkwrap\.json|pnpm-lock\.yaml|yarn\.lock|bun\.lockb?|pnpm-workspace\.yaml)$/,
  /^tsconfig.*\.json$/,
  /^(babel\.config\.(js|cjs|mjs|cts|mts|json)|\.babelrc(\.(js|cjs|mjs|json))?|\.swcrc|\.browserslistrc)$/
]

/** Where scripts find the system's commands (and `node`, when it is in one of these). */
const SYSTEM_PATH = ["/usr/local/bin", "/usr/bin", "/bin"]

const taskPath = (key: string, ...at: ReadonlyArray<string | number>) =>
  [
    `tasks${/^[A-Za-z_$][\w$]*$/.test(key) ? `.${key}` : `[${JSON.stringify(key)}]`}`,
    ...at.map((a) => typeof a === "number" ? `[${a}]` : `.${a}`)
  ].join("")

/**
 * The sandbox's root in a process's env (`Process.CHROOT`, which this plain module cannot import): the PATH is
 * absolute, so that a script that changes directory keeps it.
 */
const CHROOT = "{chroot}"

/** `rel` under the package's directory. */
/**
 * Characters a glob reads as more than themselves: a package in a directory named with one (`!x`, `a[1]`) would have
 * its files named by a glob that matches other files, or excludes its own.
 */
const GLOB_MAGIC = /[*?[\]{}\\()|]/

const under = (directory: string, rel: string) => directory === "" ? rel : `${directory}/${rel}`

/** A glob relative to the package's directory as one relative to the workspace: an exclusion stays one. */
export const rebased = (directory: string, glob: string) =>
  glob.startsWith("!") ? `!${under(directory, glob.slice(1))}` : under(directory, glob)

/** The glob excluding an output (`dist/`: its tree; `out.txt`: the file) of a package. */
const outputExclusion = (directory: string, declared: string) => {
  const output = declared.replace(/^\?/, "")
  return output.endsWith("/") ? `!${under(directory, output.replace(/\/+$/, ""))}/**` : `!${under(directory, output)}`
}

/** Whether a dependency's spec names the workspace's package `target` (see the module's comment in Tasks.ts). */
const namesWorkspacePackage = (from: Package, spec: string, target: Package): boolean => {
  if (spec.startsWith("workspace:")) return true
  const local = /^(file|link):(.*)$/.exec(spec)
  if (local !== null) {
    const parts: Array<string> = from.directory === "" ? [] : from.directory.split("/")
    for (const s of local[2]!.split("/")) {
      if (s === "..") parts.pop()
      else if (s !== "." && s !== "") parts.push(s)
    }
    return parts.join("/") === target.directory
  }
  if (spec === "*" || spec === "" || spec === "x") return true
  return target.version !== undefined && satisfies(target.version, spec)
}

/** What the expansion of one config over one workspace knows, for each process it writes out. */
interface Context {
  readonly file: string
  readonly tasks: Readonly<Record<string, TaskConfig>>
  readonly explicit: Readonly<Record<string, ProcessConfig>>
  readonly workspace: Workspace
  readonly byName: ReadonlyMap<string, Package>
  /** Each task's name, in the order kiln.json declares them; `pkg#task` keys declare the task for one package. */
  readonly taskNames: ReadonlyArray<string>
  /** Each package's workspace dependencies, transitive, in the order of their directories. */
  readonly dependencies: ReadonlyMap<Package, ReadonlyArray<Package>>
}

/** A problem at `tasks[key]` (then `at`), in `file`. */
const problemAt = (
  file: string,
  [key, ...at]: readonly [string, ...ReadonlyArray<string | number>],
  detail: string,
  onKey = false
): TaskProblem => ({
  file,
  path: taskPath(key, ...at),
  detail,
  at: ["tasks", key, ...at],
  ...(onKey ? { key: true } : {})
})

const fail = (ctx: Context, at: readonly [string, ...ReadonlyArray<string | number>], detail: string) =>
  problemAt(ctx.file, at, detail)

/** The task `task` of package `p` as kiln.json declares it, when `p` has the script. */
const declared = (ctx: Context, task: string, p: Package): { key: string; tc: TaskConfig } | undefined => {
  if (p.scripts[task] === undefined) return undefined
  const own = `${p.name}#${task}`
  if (Object.hasOwn(ctx.tasks, own)) return { key: own, tc: ctx.tasks[own]! }
  return Object.hasOwn(ctx.tasks, task) ? { key: task, tc: ctx.tasks[task]! } : undefined
}

const nameOf = (task: string, p: Package) => `${task}:${p.name}`

/** Each package's workspace dependencies, direct and then transitive. */
const dependenciesOf = (workspace: Workspace, byName: ReadonlyMap<string, Package>) => {
  const direct = new Map<Package, Array<Package>>()
  for (const p of workspace.packages) {
    const deps = new Set<Package>()
    for (const [name, spec] of p.dependencies) {
      const target = byName.get(name)
      if (target !== undefined && target !== p && namesWorkspacePackage(p, spec, target)) deps.add(target)
    }
    direct.set(p, [...deps])
  }
  const all = new Map<Package, ReadonlyArray<Package>>()
  for (const p of workspace.packages) {
    const seen = new Set<Package>()
    const stack = [...direct.get(p)!]
    while (stack.length > 0) {
      const d = stack.pop()!
      if (d === p || seen.has(d)) continue
      seen.add(d)
      stack.push(...direct.get(d)!)
    }
    all.set(p, workspace.packages.filter((q) => seen.has(q)))
  }
  return all
}

/**
 * The context of an expansion and every problem with the tasks' keys (a task whose key is refused is left out of
 * it, and the processes it would give are `refused`), or the first problem with the packages' names.
 */
const contextOf = (
  file: string,
  config: ConfigInput,
  workspace: Workspace
): { readonly ctx: Context; readonly problems: Array<TaskProblem>; readonly refused: Set<string> } | Problem => {
  const explicit = config.processes ?? {}
  const byName = new Map<string, Package>()
  for (const p of workspace.packages) {
    if (GLOB_MAGIC.test(p.directory) || p.directory.split("/").some((s) => s.startsWith("!"))) {
      return {
        file: under(p.directory, "package.json"),
        path: "",
        detail: `its directory's name holds a character a glob reads as more than itself (${
          JSON.stringify(p.directory)
        }): a package's files are its directory's glob, so rename the directory`
      }
    }
    const badName = ProcessName.problemOf(p.name)
    if (badName !== undefined) {
      return {
        file: under(p.directory, "package.json"),
        path: "name",
        detail: `${ProcessName.quote(p.name)} names processes, and ${badName}`
      }
    }
    const other = byName.get(p.name)
    if (other !== undefined) {
      return {
        file: under(p.directory, "package.json"),
        path: "name",
        detail: `${JSON.stringify(p.name)} is also the name of ${under(other.directory, "package.json")}`
      }
    }
    byName.set(p.name, p)
  }
  const problems: Array<TaskProblem> = []
  const refused = new Set<string>()
  const tasks: Record<string, TaskConfig> = {}
  const taskNames: Array<string> = []
  for (const [key, tc] of Object.entries(config.tasks ?? {})) {
    const task = key.slice(key.indexOf("#") + 1)
    const problem = keyProblem(key, byName, explicit)
    if (problem === undefined) {
      tasks[key] = tc
    } else {
      problems.push(problemAt(file, [key], problem, true))
      // What depends on the task (`^build`, `build:web`) is not refused again: it names a task the file declares.
      const only = key.includes("#") ? byName.get(key.slice(0, key.indexOf("#"))) : undefined
      for (const p of only !== undefined ? [only] : key.includes("#") ? [] : workspace.packages) {
        if (p.scripts[task] !== undefined) refused.add(nameOf(task, p))
      }
    }
    if (!taskNames.includes(task) && !/^$|^\^|#/.test(task)) taskNames.push(task)
  }
  const ctx = { file, tasks, explicit, workspace, byName, taskNames, dependencies: dependenciesOf(workspace, byName) }
  return { ctx, problems, refused }
}

/** What is wrong with a key of `tasks`, if anything. */
const keyProblem = (
  key: string,
  byName: ReadonlyMap<string, Package>,
  explicit: Readonly<Record<string, ProcessConfig>>
): string | undefined => {
  const hash = key.indexOf("#")
  const task = hash < 0 ? key : key.slice(hash + 1)
  const pkg = hash < 0 ? undefined : byName.get(key.slice(0, hash))
  if (hash >= 0 && pkg === undefined) return `no workspace package is named ${JSON.stringify(key.slice(0, hash))}`
  if (task === "" || task.startsWith("^") || task.includes("#")) {
    return "a task's name is a script's name, without `^` or `#`"
  }
  if (pkg !== undefined && pkg.scripts[task] === undefined) {
    return `package ${pkg.name} has no script ${JSON.stringify(task)}`
  }
  if (Object.hasOwn(explicit, task)) {
    return `${JSON.stringify(task)} is also a process in processes: a dep of that name would name either, so rename one`
  }
  return undefined
}

/** The expansion of `config`'s tasks over `workspace`, or the first problem (its file is `file`, kiln.json). */
export const expand = (file: string, config: ConfigInput, workspace: Workspace): Expanded | Problem => {
  const all = expandAll(file, config, workspace)
  if ("detail" in all) return all
  const first = all.problems[0]
  return first !== undefined ? first : { config: all.config, origins: all.origins }
}

/**
 * The expansion of `config`'s tasks over `workspace` with every problem of kiln.json's tasks (see {@link ExpandedAll}),
 * or the first problem of the workspace's files.
 */
export const expandAll = (file: string, config: ConfigInput, workspace: Workspace): ExpandedAll | Problem => {
  const context = contextOf(file, config, workspace)
  if ("detail" in context) return context
  const { ctx, problems, refused } = context
  const { processes: _processes, tasks: _tasks, ...rest } = config
  const inferred: Record<string, ProcessConfig> = {}
  const origins: Record<string, Origin> = {}
  // A task's own problems are the same in every package: said once, the first time.
  const said = new Set<string>()
  for (const task of ctx.taskNames) {
    for (const p of workspace.packages) {
      const found = declared(ctx, task, p)
      if (found === undefined) continue
      const name = nameOf(task, p)
      const other = Object.hasOwn(origins, name) ? origins[name] : undefined
      const made = Object.hasOwn(ctx.explicit, name)
        ? [fail(ctx, [found.key], `gives the process ${JSON.stringify(name)}, which processes declares too`)]
        : other !== undefined
        ? [
          fail(
            ctx,
            [found.key],
            `gives the process ${JSON.stringify(name)} (package ${p.name}), which task ${
              JSON.stringify(other.task)
            } of package ${other.package} gives too: rename a script or a package`
          )
        ]
        : processOf(ctx, task, p, found.key, found.tc)
      if (Array.isArray(made)) {
        refused.add(name)
        for (const problem of made) {
          const id = `${problem.path}\u0000${problem.detail}`
          if (!said.has(id)) problems.push(problem)
          said.add(id)
        }
        continue
      }
      inferred[name] = made
      origins[name] = { key: found.key, task, package: p.name, directory: p.directory }
    }
  }
  return { config: { ...rest, processes: { ...ctx.explicit, ...inferred } } as Config, origins, problems, refused }
}

/**
 * The deps of task `task` of package `p`, and the workspace dependencies whose outputs they bring (their `^B`): the
 * files of those are not inputs then.
 */
const depsOf = (
  ctx: Context,
  task: string,
  p: Package,
  key: string,
  tc: TaskConfig
): { readonly deps: Array<string>; readonly built: Set<Package>; readonly problems: Array<TaskProblem> } => {
  const problems: Array<TaskProblem> = []
  const refuse = (at: readonly [string, ...ReadonlyArray<string | number>], detail: string) => {
    problems.push(fail(ctx, at, detail))
  }
  const deps: Array<string> = []
  const add = (name: string) => {
    if (!deps.includes(name)) deps.push(name)
  }
  const built = new Set<Package>()
  for (const [i, dep] of (tc.deps ?? []).entries()) {
    const at = [key, "deps", i] as const
    if (dep.startsWith("^")) {
      const t = dep.slice(1)
      if (!ctx.taskNames.includes(t)) {
        refuse(at, `unknown task ${JSON.stringify(t)}: tasks declares no such task`)
        continue
      }
      for (const d of ctx.dependencies.get(p)!) {
        if (declared(ctx, t, d) === undefined) continue
        add(nameOf(t, d))
        built.add(d)
      }
    } else if (dep.includes("#")) {
      const [pkg, t] = [dep.slice(0, dep.indexOf("#")), dep.slice(dep.indexOf("#") + 1)]
      const target = ctx.byName.get(pkg)
      if (target === undefined) {
        refuse(at, `no workspace package is named ${JSON.stringify(pkg)}`)
      } else if (declared(ctx, t, target) === undefined) {
        refuse(at, `${pkg} has no task ${JSON.stringify(t)} (no such script, or no such task in tasks)`)
      } else if (target === p && t === task) {
        refuse(at, "a task cannot depend on itself")
      } else {
        add(nameOf(t, target))
      }
    } else if (ctx.taskNames.includes(dep)) {
      if (dep === task) {
        refuse(at, `a task cannot depend on itself ("^${dep}" is ${dep} of the package's dependencies)`)
      } else if (declared(ctx, dep, p) !== undefined) {
        // As turbo does: a package without the script has no such task, and nothing to wait for.
        add(nameOf(dep, p))
      }
    } else if (Object.hasOwn(ctx.explicit, dep)) {
      add(dep)
    } else {
      refuse(at, `unknown task or process ${JSON.stringify(dep)}`)
    }
  }
  return { deps, built, problems }
}

/** Each of the task's own paths that is not a path kiln takes. */
const pathProblems = (ctx: Context, key: string, tc: TaskConfig): Array<TaskProblem> => {
  const problems: Array<TaskProblem> = []
  for (const [i, out] of (tc.outputs ?? []).entries()) {
    // A leading `?` marks an output the task may leave unmade; any other glob character is a glob.
    if (/[*?[\]{}]/.test(out.replace(/^\?/, ""))) {
      problems.push(fail(
        ctx,
        [key, "outputs", i],
        `${JSON.stringify(out)} is a glob: outputs are paths, and a directory ends with / ` +
          `(${JSON.stringify(out.replace(/\/?\*\*?.*$/, "/"))})`
      ))
    }
  }
  for (const field of ["inputs", "optionalInputs", "rootInputs", "writableInputs"] as const) {
    for (const [i, g] of (tc[field] ?? []).entries()) {
      if (!staysInside(g.replace(/^!/, ""))) {
        problems.push(fail(
          ctx,
          [key, field, i],
          `${JSON.stringify(g)} must be relative and stay inside the ${
            field === "rootInputs" ? "workspace" : "package"
          }`
        ))
      }
    }
  }
  // A named cache's path is where it is mounted in the package: an absolute one would be rebased below the package.
  for (const [name, at] of Object.entries(tc.namedCaches ?? {})) {
    if (!staysInside(at)) {
      problems.push(
        fail(ctx, [key, "namedCaches", name], `${JSON.stringify(at)} must be relative and stay inside the package`)
      )
    }
  }
  return problems
}

/**
 * Entries at the top of a package that stay inputs though git ignores them: its package.json and `node_modules`
 * (taken on their own), `.env` files, which tools read as they build (a Next.js or Vite build without the `.env` it
 * reads by hand would be another build, and silently), and a name a glob would read as more than itself.
 */
const keptThoughIgnored = (name: string) =>
  name === "node_modules/" || name === "node_modules" || name === "package.json" || name.startsWith(".env") ||
  /[*?[\]{}()!+@\\|]/.test(name)

/**
 * The package's files but the outputs of its tasks (which their processes give, fresh, where they are deps), and the
 * exclusions of what git ignores at its top (`gitIgnore.ts`): those are kept apart, since an input named otherwise
 * wins over them (see {@link inputsOf}).
 */
const filesOf = (ctx: Context, q: Package) => {
  const excluded = new Set<string>()
  for (const t of ctx.taskNames) {
    for (const out of declared(ctx, t, q)?.tc.outputs ?? []) excluded.add(outputExclusion(q.directory, out))
  }
  if (q.directory === "") excluded.add("!.git/**")
  const ignored = q.ignored.filter((name) => !keptThoughIgnored(name)).map((name) => outputExclusion(q.directory, name))
  return { include: [under(q.directory, "**")], exclude: [...excluded], ignored }
}

/** The literal directories a glob starts with (all of it when it has no magic). */
const literalStart = (g: string) => {
  const literal: Array<string> = []
  for (const s of g.split("/")) {
    if (/[*?[\]{}()!+@\\]/.test(s)) break
    literal.push(s)
  }
  return literal.join("/")
}

/**
 * Whether the exclusion `!x` (`!dir/**` or `!file`) may leave out a path the glob `g` takes: when `g`'s literal start
 * is `x`, lies under it or holds it (told without a glob library: the no-op check runs this too).
 */
const overlaps = (exclusion: string, g: string): boolean => {
  const x = exclusion.slice(1).replace(/\/\*\*$/, "")
  const start = literalStart(g)
  return start === "" || start === x || start.startsWith(`${x}/`) || x.startsWith(`${start}/`)
}

/** The inputs of a task of package `p` (see the module's comment). */
const inputsOf = (ctx: Context, p: Package, tc: TaskConfig, built: ReadonlySet<Package>): Array<string> => {
  const dir = p.directory
  const include: Array<string> = []
  const exclude: Array<string> = []
  const ignored: Array<string> = []
  // The globs that take a package's files whole: what git ignores is left out of them alone.
  const whole = new Set<string>()
  const take = (globs: ReadonlyArray<string>, at: (g: string) => string) => {
    for (const g of globs) {
      if (g.startsWith("!")) exclude.push(`!${at(g.slice(1))}`)
      else include.push(at(g))
    }
  }
  const takeFiles = (q: Package) => {
    const files = filesOf(ctx, q)
    take([...files.include, ...files.exclude], (g) => g)
    for (const g of files.include) whole.add(g)
    ignored.push(...files.ignored)
  }
  if (tc.inputs === undefined) {
    takeFiles(p)
  } else {
    take(tc.inputs, (g) => under(dir, g))
    include.push(under(dir, "package.json"))
    if (p.nodeModules) include.push(under(dir, "node_modules/**"))
  }
  include.push(...ctx.workspace.rootFiles.filter((f) => ROOT_FILES.some((re) => re.test(f))))
  if (ctx.workspace.rootNodeModules) include.push("node_modules/**")
  for (const d of ctx.dependencies.get(p)!) {
    if (built.has(d)) {
      include.push(under(d.directory, "package.json"))
      if (d.nodeModules) include.push(under(d.directory, "node_modules/**"))
    } else {
      takeFiles(d)
    }
  }
  take(tc.rootInputs ?? [], (g) => g)
  // Excludes win over includes, so an ignored path any other glob of the process names (`rootInputs`,
  // `optionalInputs`, `writableInputs`, a dependency's `node_modules`) stays in.
  const named = [
    ...include.filter((g) => !whole.has(g)),
    ...(tc.optionalInputs ?? []).filter((g) => !g.startsWith("!")).map((g) => under(dir, g)),
    ...(tc.writableInputs ?? []).map((w) => under(dir, w))
  ]
  const leftOut = ignored.filter((x) => !named.some((g) => overlaps(x, g)))
  return [...new Set(include), ...new Set([...exclude, ...leftOut])]
}

/**
 * The PATH of a package's scripts: each `node_modules/.bin` from its directory up to the root (as npm gives a
 * script), then the system's, behind the directory of the `node` that runs kiln when that is elsewhere.
 */
const pathOf = (ctx: Context, dir: string) => {
  const bins: Array<string> = []
  for (let d = dir;; d = d.includes("/") ? d.slice(0, d.lastIndexOf("/")) : "") {
    bins.push(`${CHROOT}/${under(d, "node_modules/.bin")}`)
    if (d === "") break
  }
  const node = ctx.workspace.nodeDirectory
  return [...bins, ...(SYSTEM_PATH.includes(node) ? [] : [node]), ...SYSTEM_PATH].join(":")
}

/**
 * The shell command of task `task` of `p`: its script, between its `pre` and `post` scripts where the package manager
 * runs those. Each in a subshell of its own, on lines of their own (a comment in one ends with its line), as the
 * package manager runs each in a shell of its own, and each only if the one before succeeded.
 */
const scriptOf = (ctx: Context, task: string, p: Package): string => {
  const script = p.scripts[task]!
  if (!ctx.workspace.prePostScripts) return script
  const around = [p.scripts[`pre${task}`], script, p.scripts[`post${task}`]].filter((s) => s !== undefined)
  return around.length === 1 ? script : around.map((s) => `(\n${s}\n)`).join(" && ")
}

/** Whether the task names PATH among the variables it takes from kiln's environment. */
const passesPath = (tc: TaskConfig) =>
  [...(tc.passEnv ?? []), ...(tc.passThroughEnv ?? [])].some((entry) => entry === "PATH" || entry.startsWith("PATH="))

/** The process task `task` gives package `p`, or every problem with the task. */
const processOf = (
  ctx: Context,
  task: string,
  p: Package,
  key: string,
  tc: TaskConfig
): ProcessConfig | Array<TaskProblem> => {
  const found = depsOf(ctx, task, p, key, tc)
  const problems = [...found.problems, ...pathProblems(ctx, key, tc)]
  if (problems.length > 0) return problems
  const dir = p.directory
  const outputs = tc.outputs ?? []
  const pc: Record<string, unknown> = {
    argv: ["/bin/sh", "-c", scriptOf(ctx, task, p)],
    inputs: inputsOf(ctx, p, tc, found.built),
    // Rebased as its inputs are: relative to the package, an exclusion still one.
    ...(tc.optionalInputs !== undefined ? { optionalInputs: tc.optionalInputs.map((g) => rebased(dir, g)) } : {}),
    ...(found.deps.length > 0 ? { deps: found.deps } : {}),
    ...(outputs.length > 0 ? { outputs } : {}),
    // A task that passes its PATH from kiln's environment has that one instead.
    env: passesPath(tc) ? { ...tc.env } : { PATH: pathOf(ctx, dir), ...tc.env },
    ...(dir !== "" ? { workingDirectory: dir } : {})
  }
  if (tc.timeout !== undefined) pc.timeout = tc.timeout
  if (tc.cache !== undefined) pc.cache = tc.cache
  if (tc.namedCaches !== undefined) {
    pc.namedCaches = Object.fromEntries(Object.entries(tc.namedCaches).map(([k, v]) => [k, under(dir, v)]))
  }
  if (tc.platform !== undefined) pc.platform = tc.platform
  if (tc.passEnv !== undefined) pc.passEnv = tc.passEnv
  if (tc.passThroughEnv !== undefined) pc.passThroughEnv = tc.passThroughEnv
  if (tc.remote !== undefined) pc.remote = tc.remote
  if (tc.outputSymlinks !== undefined) pc.outputSymlinks = tc.outputSymlinks
  // Host paths are the host's, absolute: not relative to the package.
  if (tc.hostPaths !== undefined) pc.hostPaths = tc.hostPaths
  if (tc.network !== undefined) pc.network = tc.network
  if (tc.writableInputs !== undefined) pc.writableInputs = tc.writableInputs.map((w) => under(dir, w))
  return pc as ProcessConfig
}
