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
import type { Config, ProcessConfig, TaskConfig } from "../../../domain/Config.js"
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

/** kiln.json as the expansion reads it: decoded, or the JSON the no-op check parsed (then `processes` may be absent). */
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

/** The PATH a script finds `node` on when it is in one of these (the PATH npm passes on is the caller's). */
const SYSTEM_PATH = ["/usr/local/bin", "/usr/bin", "/bin"]

const taskPath = (key: string, ...at: ReadonlyArray<string | number>) =>
  [
    `tasks${/^[A-Za-z_$][\w$]*$/.test(key) ? `.${key}` : `[${JSON.stringify(key)}]`}`,
    ...at.map((a) => typeof a === "number" ? `[${a}]` : `.${a}`)
  ].join("")

/** `rel` under the package's directory. */
const under = (directory: string, rel: string) => directory === "" ? rel : `${directory}/${rel}`

/** The glob excluding an output (`dist/`: its tree; `out.txt`: the file) of a package. */
const outputExclusion = (directory: string, output: string) =>
  output.endsWith("/") ? `!${under(directory, output.replace(/\/+$/, ""))}/**` : `!${under(directory, output)}`

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

/** The expansion of `config`'s tasks over `workspace`, or the first problem (its file is `file`, kiln.json). */
export const expand = (file: string, config: ConfigInput, workspace: Workspace): Expanded | Problem => {
  const { tasks = {}, processes: explicit = {}, ...rest } = config
  const fail = (path: string, detail: string): Problem => ({ file, path, detail })
  const byName = new Map<string, Package>()
  for (const p of workspace.packages) {
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
  // Each task's name, in the order kiln.json declares them; `pkg#task` keys declare the task for one package.
  const taskNames: Array<string> = []
  for (const key of Object.keys(tasks)) {
    const hash = key.indexOf("#")
    const task = hash < 0 ? key : key.slice(hash + 1)
    if (hash >= 0 && !byName.has(key.slice(0, hash))) {
      return fail(taskPath(key), `no workspace package is named ${JSON.stringify(key.slice(0, hash))}`)
    }
    if (task === "" || task.startsWith("^") || task.includes("#")) {
      return fail(taskPath(key), "a task's name is a script's name, without `^` or `#`")
    }
    if (Object.hasOwn(explicit, task)) {
      return fail(
        taskPath(key),
        `${JSON.stringify(task)} is also a process in processes: a dep of that name would ` +
          "name either, so rename one"
      )
    }
    if (!taskNames.includes(task)) taskNames.push(task)
  }
  /** The task `task` of package `p` as kiln.json declares it, when `p` has the script. */
  const declared = (task: string, p: Package): { key: string; tc: TaskConfig } | undefined => {
    if (p.scripts[task] === undefined) return undefined
    const own = `${p.name}#${task}`
    if (Object.hasOwn(tasks, own)) return { key: own, tc: tasks[own]! }
    return Object.hasOwn(tasks, task) ? { key: task, tc: tasks[task]! } : undefined
  }
  for (const key of Object.keys(tasks)) {
    const hash = key.indexOf("#")
    if (hash >= 0 && byName.get(key.slice(0, hash))!.scripts[key.slice(hash + 1)] === undefined) {
      return fail(taskPath(key), `package ${key.slice(0, hash)} has no script ${JSON.stringify(key.slice(hash + 1))}`)
    }
  }
  // Workspace dependencies, direct and transitive (in the order of the packages' directories).
  const direct = new Map<Package, Array<Package>>()
  for (const p of workspace.packages) {
    const deps = new Set<Package>()
    for (const [name, spec] of p.dependencies) {
      const target = byName.get(name)
      if (target !== undefined && target !== p && namesWorkspacePackage(p, spec, target)) deps.add(target)
    }
    direct.set(p, [...deps])
  }
  const closure = (p: Package): Array<Package> => {
    const seen = new Set<Package>()
    const stack = [...direct.get(p)!]
    while (stack.length > 0) {
      const d = stack.pop()!
      if (d === p || seen.has(d)) continue
      seen.add(d)
      stack.push(...direct.get(d)!)
    }
    return workspace.packages.filter((q) => seen.has(q))
  }
  const nameOf = (task: string, p: Package) => `${task}:${p.name}`
  const inferred: Record<string, ProcessConfig> = {}
  const origins: Record<string, Origin> = {}
  for (const task of taskNames) {
    for (const p of workspace.packages) {
      const found = declared(task, p)
      if (found === undefined) continue
      const name = nameOf(task, p)
      if (Object.hasOwn(explicit, name)) {
        return fail(taskPath(found.key), `gives the process ${JSON.stringify(name)}, which processes declares too`)
      }
      const made = processOf(task, p, found.key, found.tc)
      if ("detail" in made) return made
      inferred[name] = made
      origins[name] = { key: found.key, task, package: p.name, directory: p.directory }
    }
  }
  return { config: { ...rest, processes: { ...explicit, ...inferred } } as Config, origins }

  function processOf(task: string, p: Package, key: string, tc: TaskConfig): ProcessConfig | Problem {
    const deps: Array<string> = []
    const add = (name: string) => {
      if (!deps.includes(name)) deps.push(name)
    }
    // Dependencies whose outputs this process gets (their `^B` task): their own files are not inputs then.
    const built = new Set<Package>()
    const dependencies = closure(p)
    for (const [i, dep] of (tc.deps ?? []).entries()) {
      const at = taskPath(key, "deps", i)
      if (dep.startsWith("^")) {
        const t = dep.slice(1)
        if (!taskNames.includes(t)) return fail(at, `unknown task ${JSON.stringify(t)}: tasks declares no such task`)
        for (const d of dependencies) {
          if (declared(t, d) === undefined) continue
          add(nameOf(t, d))
          built.add(d)
        }
      } else if (dep.includes("#")) {
        const [pkg, t] = [dep.slice(0, dep.indexOf("#")), dep.slice(dep.indexOf("#") + 1)]
        const target = byName.get(pkg)
        if (target === undefined) return fail(at, `no workspace package is named ${JSON.stringify(pkg)}`)
        if (declared(t, target) === undefined) {
          return fail(at, `${pkg} has no task ${JSON.stringify(t)} (no such script, or no such task in tasks)`)
        }
        if (target === p && t === task) return fail(at, "a task cannot depend on itself")
        add(nameOf(t, target))
      } else if (taskNames.includes(dep)) {
        if (dep === task) {
          return fail(at, `a task cannot depend on itself: "^${dep}" is ${dep} of the package's dependencies`)
        }
        // As turbo does: a package without the script has no such task, and nothing to wait for.
        if (declared(dep, p) !== undefined) add(nameOf(dep, p))
      } else if (Object.hasOwn(explicit, dep)) {
        add(dep)
      } else {
        return fail(at, `unknown task or process ${JSON.stringify(dep)}`)
      }
    }
    const outputs = tc.outputs ?? []
    for (const [i, out] of outputs.entries()) {
      if (/[*?[\]{}]/.test(out)) {
        return fail(
          taskPath(key, "outputs", i),
          `${JSON.stringify(out)} is a glob: outputs are paths, and a ` +
            `directory ends with / (${JSON.stringify(out.replace(/\/?\*\*?.*$/, "/"))})`
        )
      }
    }
    const relative = (field: "inputs" | "rootInputs" | "writableInputs", globs: ReadonlyArray<string>) => {
      for (const [i, g] of globs.entries()) {
        if (!staysInside(g.replace(/^!/, ""))) {
          return fail(
            taskPath(key, field, i),
            `${JSON.stringify(g)} must be relative and stay inside the ` +
              (field === "rootInputs" ? "workspace" : "package")
          )
        }
      }
      return undefined
    }
    const bad = relative("inputs", tc.inputs ?? []) ?? relative("rootInputs", tc.rootInputs ?? []) ??
      relative("writableInputs", tc.writableInputs ?? [])
    if (bad !== undefined) return bad
    const dir = p.directory
    /** The package's files but the outputs of its tasks (which their processes give, fresh, where they are deps). */
    const filesOf = (q: Package) => {
      const excluded = new Set<string>()
      for (const t of taskNames) {
        for (const out of declared(t, q)?.tc.outputs ?? []) excluded.add(outputExclusion(q.directory, out))
      }
      if (q.directory === "") excluded.add("!.git/**")
      return { include: [under(q.directory, "**")], exclude: [...excluded] }
    }
    const include: Array<string> = []
    const exclude: Array<string> = []
    if (tc.inputs === undefined) {
      const own = filesOf(p)
      include.push(...own.include)
      exclude.push(...own.exclude)
    } else {
      for (const g of tc.inputs) {
        ;(g.startsWith("!") ? exclude : include).push(g.startsWith("!") ? `!${under(dir, g.slice(1))}` : under(dir, g))
      }
      include.push(under(dir, "package.json"))
      if (p.nodeModules) include.push(under(dir, "node_modules/**"))
    }
    include.push(...workspace.rootFiles.filter((f) => ROOT_FILES.some((re) => re.test(f))))
    if (workspace.rootNodeModules) include.push("node_modules/**")
    for (const d of dependencies) {
      if (built.has(d)) {
        include.push(under(d.directory, "package.json"))
        if (d.nodeModules) include.push(under(d.directory, "node_modules/**"))
      } else {
        const files = filesOf(d)
        include.push(...files.include)
        exclude.push(...files.exclude)
      }
    }
    for (const g of tc.rootInputs ?? []) (g.startsWith("!") ? exclude : include).push(g)
    const inputs = [...new Set(include), ...new Set(exclude)]
    // Each directory up to the root, as npm puts every `node_modules/.bin` on the way up onto a script's PATH.
    const bins: Array<string> = []
    for (let d = dir;; d = d.includes("/") ? d.slice(0, d.lastIndexOf("/")) : "") {
      bins.push(`{chroot}/${under(d, "node_modules/.bin")}`)
      if (d === "") break
    }
    const system = SYSTEM_PATH.includes(workspace.nodeDirectory)
      ? SYSTEM_PATH
      : [workspace.nodeDirectory, ...SYSTEM_PATH]
    const pc: Record<string, unknown> = {
      argv: ["/bin/sh", "-c", p.scripts[task]!],
      inputs,
      ...(deps.length > 0 ? { deps } : {}),
      ...(outputs.length > 0 ? { outputs } : {}),
      env: { PATH: [...bins, ...system].join(":"), ...tc.env },
      ...(dir !== "" ? { workingDirectory: dir } : {})
    }
    if (tc.timeout !== undefined) pc.timeout = tc.timeout
    if (tc.cache !== undefined) pc.cache = tc.cache
    if (tc.namedCaches !== undefined) {
      pc.namedCaches = Object.fromEntries(Object.entries(tc.namedCaches).map(([k, v]) => [k, under(dir, v)]))
    }
    if (tc.platform !== undefined) pc.platform = tc.platform
    if (tc.remote !== undefined) pc.remote = tc.remote
    if (tc.outputSymlinks !== undefined) pc.outputSymlinks = tc.outputSymlinks
    if (tc.writableInputs !== undefined) pc.writableInputs = tc.writableInputs.map((w) => under(dir, w))
    return pc as ProcessConfig
  }
}
