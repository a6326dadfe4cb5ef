/**
 * A real workspace as the benchmark sees it: its packages in scope (from the package manager's workspace globs, the
 * benchmark's exclusions left out), each with its directory, its scripts and the workspace packages it depends on.
 * What both tools are asked to run is read from here: Turborepo reads the same package.json files itself.
 */
import * as fs from "node:fs"
import * as path from "node:path"

export interface WorkspacePackage {
  readonly name: string
  /** Relative to the workspace root, `/`-separated: `packages/button`. */
  readonly dir: string
  readonly scripts: Readonly<Record<string, string>>
  /** The names of the workspace packages it depends on (dependencies, devDependencies, peerDependencies). */
  readonly deps: ReadonlyArray<string>
}

export interface Workspace {
  readonly root: string
  /** Every workspace package, in scope or not (a package out of scope can still be a dependency's files). */
  readonly all: ReadonlyArray<WorkspacePackage>
  /** The packages whose tasks run. */
  readonly inScope: ReadonlyArray<WorkspacePackage>
}

/** `packages/*` and `packages/x`: the globs package managers take (one `*` segment at the end, or none). */
const expand = (root: string, glob: string): Array<string> => {
  const clean = glob.replace(/^\.\//, "").replace(/\/$/, "")
  if (!clean.endsWith("/*")) return fs.existsSync(path.join(root, clean, "package.json")) ? [clean] : []
  const base = clean.slice(0, -2)
  const dir = path.join(root, base)
  if (!fs.existsSync(dir)) return []
  return fs.readdirSync(dir, { withFileTypes: true })
    .filter((e) => e.isDirectory() && fs.existsSync(path.join(dir, e.name, "package.json")))
    .map((e) => `${base}/${e.name}`)
    .sort()
}

/** The workspace globs: pnpm-workspace.yaml's `packages:` list, else package.json's `workspaces`. */
const workspaceGlobs = (root: string): Array<string> => {
  const yaml = path.join(root, "pnpm-workspace.yaml")
  if (fs.existsSync(yaml)) {
    const globs: Array<string> = []
    let inPackages = false
    for (const line of fs.readFileSync(yaml, "utf8").split("\n")) {
      if (/^packages:\s*$/.test(line)) inPackages = true
      else if (inPackages && /^\s+-\s+/.test(line)) globs.push(line.replace(/^\s+-\s+/, "").replace(/^["']|["']$/g, ""))
      else if (inPackages && /^\S/.test(line)) inPackages = false
    }
    return globs
  }
  const pkg = JSON.parse(fs.readFileSync(path.join(root, "package.json"), "utf8")) as {
    workspaces?: Array<string> | { packages?: Array<string> }
  }
  return Array.isArray(pkg.workspaces) ? pkg.workspaces : (pkg.workspaces?.packages ?? [])
}

interface PackageJson {
  readonly name?: string
  readonly scripts?: Record<string, string>
  readonly dependencies?: Record<string, string>
  readonly devDependencies?: Record<string, string>
  readonly peerDependencies?: Record<string, string>
}

export interface Scope {
  /** Globs of the package directories whose tasks run (`packages/*`); default every workspace package. */
  readonly include?: ReadonlyArray<string>
  /** Package directories among those whose tasks do not run. */
  readonly exclude: ReadonlyArray<string>
}

/** Reads the workspace at `root`, its packages in `scope`. */
export const readWorkspace = (root: string, scope: Scope): Workspace => {
  const dirs = [...new Set(workspaceGlobs(root).flatMap((g) => expand(root, g)))]
  const raw = dirs.map((dir) => ({
    dir,
    json: JSON.parse(fs.readFileSync(path.join(root, dir, "package.json"), "utf8")) as PackageJson
  }))
  const names = new Set(raw.flatMap((r) => (r.json.name === undefined ? [] : [r.json.name])))
  const all = raw.filter((r) => r.json.name !== undefined).map((r): WorkspacePackage => ({
    name: r.json.name!,
    dir: r.dir,
    scripts: r.json.scripts ?? {},
    deps: [
      ...new Set(
        [r.json.dependencies, r.json.devDependencies, r.json.peerDependencies]
          .flatMap((d) => Object.keys(d ?? {}))
          .filter((n) => names.has(n) && n !== r.json.name)
      )
    ].sort()
  }))
  const included = scope.include === undefined ? undefined : new Set(scope.include.flatMap((g) => expand(root, g)))
  return {
    root,
    all,
    inScope: all.filter((p) => (included === undefined || included.has(p.dir)) && !scope.exclude.includes(p.dir))
  }
}

/** Every workspace package `p` depends on, directly or not. */
export const transitiveDeps = (ws: Workspace, p: WorkspacePackage): Array<WorkspacePackage> => {
  const byName = new Map(ws.all.map((x) => [x.name, x]))
  const seen = new Map<string, WorkspacePackage>()
  const stack = [...p.deps]
  while (stack.length > 0) {
    const name = stack.pop()!
    const dep = byName.get(name)
    if (dep === undefined || seen.has(name)) continue
    seen.set(name, dep)
    stack.push(...dep.deps)
  }
  return [...seen.values()].sort((a, b) => a.dir.localeCompare(b.dir))
}
