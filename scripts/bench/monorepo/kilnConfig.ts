/**
 * The stand-in for kiln.json's `tasks` (being added elsewhere; this module is what it replaces): a kiln.json generated
 * from a workspace's package.json scripts, one process a package and script, the graph Turborepo derives from the same
 * files with `dependsOn: ["^build"]`. Everything the benchmark asks of it is {@link kilnConfigOf}'s signature: a
 * workspace in, a kiln.json object out.
 *
 * What each process declares, so that it sees in its sandbox what it reads in the workspace:
 * - argv: the script's text run by `/bin/sh -c` in the package's directory (as `npm run` and `pnpm run` run it), with
 *   PATH the package's and the root's `node_modules/.bin` (relative to the working directory: a sandbox has another
 *   absolute path), Node's directory, /usr/bin and /bin;
 * - inputs: the package's own files but its build outputs (and tools' litter: `.turbo`, `coverage`); every regular
 *   file at the root (tsconfig.json, vitest.config.ts, package.json, the lock file…) but the tools' own configs;
 *   the root `node_modules` whole; for each workspace package it depends on (transitively: a dependency's `dist`
 *   imports its own dependencies), its package.json and its `node_modules`, and all of it when it has no build (a
 *   shared tsconfig package);
 * - deps: the builds of those workspace packages (their outputs are laid into the input tree at their paths);
 * - outputs: the build's output directories (relative to the working directory, as kiln takes them);
 * - writableInputs: where a tool writes into the root `node_modules` (Vite's `.vite-temp`).
 */
import * as fs from "node:fs"
import * as path from "node:path"
import { transitiveDeps, type Workspace, type WorkspacePackage } from "./workspace.js"

export interface GenerateOptions {
  /** The scripts that become processes, where a package has them: `build`, `test`. */
  readonly scripts: ReadonlyArray<string>
  /** The build's outputs, relative to its package: `dist/`. */
  readonly buildOutputs: ReadonlyArray<string>
}

/** The name of the process of `script` in `p`: Turborepo's task id. */
export const taskName = (p: WorkspacePackage, script: string): string => `${p.name}#${script}`

/** Root files that are no process's input: the tools' own configs and what no build reads. */
const NOT_INPUTS = new Set(["kiln.json", "turbo.json", "LICENSE", "LICENSE.md", ".gitignore", ".prettierignore"])

const rootFiles = (ws: Workspace): Array<string> =>
  fs.readdirSync(ws.root, { withFileTypes: true })
    .filter((e) => e.isFile() && !NOT_INPUTS.has(e.name) && !e.name.endsWith(".md"))
    .map((e) => e.name)
    .sort()

const has = (ws: Workspace, rel: string) => fs.existsSync(path.join(ws.root, rel))

const depInputs = (ws: Workspace, dep: WorkspacePackage): Array<string> =>
  dep.scripts.build === undefined
    ? [`${dep.dir}/**`]
    : [`${dep.dir}/package.json`, ...(has(ws, `${dep.dir}/node_modules`) ? [`${dep.dir}/node_modules/**`] : [])]

const pathOf = (ws: Workspace, p: WorkspacePackage): string => {
  const toRoot = path.posix.relative(p.dir, ".")
  const bins = [
    ...(has(ws, `${p.dir}/node_modules/.bin`) ? ["node_modules/.bin"] : []),
    `${toRoot}/node_modules/.bin`
  ]
  return [...bins, path.dirname(process.execPath), "/usr/bin", "/bin"].join(":")
}

/**
 * Vite (and vitest, on it) bundles its config file into `.vite-temp` of the nearest `node_modules` above it: the
 * root's, when the package has none of its own, which kiln otherwise mounts read-only as a whole.
 */
const writableOf = (ws: Workspace, p: WorkspacePackage, script: string): Array<string> =>
  /\bvite(st)?\b/.test(script) && !has(ws, `${p.dir}/node_modules`) && has(ws, "node_modules")
    ? ["node_modules/.vite-temp"]
    : []

/** kiln.json for the workspace's packages in scope: see the module's comment. */
export const kilnConfigOf = (ws: Workspace, o: GenerateOptions): Record<string, unknown> => {
  const roots = rootFiles(ws)
  const hasRootModules = has(ws, "node_modules")
  const processes: Record<string, unknown> = {}
  for (const p of ws.inScope) {
    const deps = transitiveDeps(ws, p)
    const builtDeps = deps.filter((d) => d.scripts.build !== undefined && ws.inScope.includes(d))
    const excluded = [...o.buildOutputs.map((out) => out.replace(/\/$/, "")), ".turbo", "coverage"]
    const inputs = [
      `${p.dir}/**`,
      ...excluded.map((x) => `!${p.dir}/${x}/**`),
      ...roots,
      ...(hasRootModules ? ["node_modules/**"] : []),
      ...deps.flatMap((d) => depInputs(ws, d))
    ]
    for (const script of o.scripts) {
      const text = p.scripts[script]
      if (text === undefined) continue
      processes[taskName(p, script)] = {
        argv: ["/bin/sh", "-c", text],
        workingDirectory: p.dir,
        env: { PATH: pathOf(ws, p) },
        inputs,
        ...(writableOf(ws, p, text).length > 0 ? { writableInputs: writableOf(ws, p, text) } : {}),
        ...(builtDeps.length > 0 ? { deps: builtDeps.map((d) => taskName(d, "build")) } : {}),
        ...(script === "build" ? { outputs: o.buildOutputs } : {})
      }
    }
  }
  return { processes }
}
