/**
 * kiln.json's `tasks`: processes inferred from the workspace a JavaScript project already has (npm, pnpm, yarn and
 * bun workspaces), declared once for every package, as turbo.json declares them:
 *
 * ```json
 * { "tasks": { "build": { "outputs": ["dist/"] }, "test": { "deps": ["build", "^build"] } } }
 * ```
 *
 * gives `build:<package>` and `test:<package>` for every package with those scripts. Reading the workspace
 * ({@link read}: its member globs, each member's `package.json`) is the only I/O; the expansion ({@link expand}) is
 * pure, and gives the processes kiln.json would hold if they were written out. Plain code without Effect: the no-op
 * check (`programs/kiln/noop.ts`) expands too, before it loads anything, to see whether the processes a run would
 * have are those the run memo remembers.
 *
 * A dependency names a workspace package when its spec is `workspace:…`, a `file:`/`link:` path to it, `*`, or a
 * range its version satisfies (npm's, yarn's and bun's rule; pnpm links only `workspace:` by default, and treating
 * a satisfied range as the workspace's only adds a dep).
 */
import type { Config } from "../../domain/config/Config.js"
import * as Expand from "./internal/expand.js"
import * as WorkspaceFiles from "./internal/workspaceFiles.js"

export type Workspace = WorkspaceFiles.Workspace

export type Package = WorkspaceFiles.Package

/**
 * A problem with kiln.json's tasks or a workspace file: the file (relative to the workspace), the field, what is
 * wrong. The CLI reports it as an `InvalidConfig` (exit 2).
 */
export type Problem = WorkspaceFiles.Problem

export type Origin = Expand.Origin

export type Expanded = Expand.Expanded

export type ConfigInput = Expand.ConfigInput

export type TaskProblem = Expand.TaskProblem

export type ExpandedAll = Expand.ExpandedAll

export const isProblem: (u: unknown) => u is Problem = WorkspaceFiles.isProblem

/**
 * Reads the workspace at `root`: its packages (from `pnpm-workspace.yaml`'s `packages`, else `package.json`'s
 * `workspaces`, else the root package alone), their scripts and dependencies, which `node_modules` exist, and the
 * root's files.
 */
export const read: (root: string, nodeDirectory?: string) => Workspace | Problem = WorkspaceFiles.read

/**
 * `config` with its tasks written out as processes over `workspace` (see the module's comment), or the first problem;
 * `file` is kiln.json's name, for errors. The processes it gives are not checked yet (`Config.check` does that).
 */
export const expand: (file: string, config: ConfigInput, workspace: Workspace) => Expanded | Problem = Expand.expand

/**
 * {@link expand} with every problem of kiln.json's tasks, each where the file has it (see `ExpandedAll`): only a
 * problem of the workspace's files is the one problem.
 */
export const expandAll: (file: string, config: ConfigInput, workspace: Workspace) => ExpandedAll | Problem =
  Expand.expandAll

/**
 * Whether a config (decoded, or JSON as parsed) declares tasks.
 */
export const declares = (json: unknown): json is ConfigInput & { readonly tasks: object } =>
  typeof json === "object" && json !== null && Object.hasOwn(json, "tasks")

/**
 * Reads the workspace at `root` and expands `config`'s tasks over it.
 */
export const expandAt = (root: string, file: string, config: ConfigInput): Expanded | Problem => {
  const workspace = read(root)
  return isProblem(workspace) ? workspace : expand(file, config, workspace)
}

/**
 * Reads the workspace at `root` and expands `config`'s tasks over it, with every problem of kiln.json's tasks.
 */
export const expandAllAt = (root: string, file: string, config: ConfigInput): ExpandedAll | Problem => {
  const workspace = read(root)
  return isProblem(workspace) ? workspace : expandAll(file, config, workspace)
}

const sortedKeys = (_: string, value: unknown) =>
  typeof value === "object" && value !== null && !Array.isArray(value)
    ? Object.fromEntries(Object.entries(value).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)))
    : value

/**
 * The text a run memo keeps for an expanded config in place of kiln.json's: the processes a run had, whatever the
 * order of kiln.json's keys, so that the no-op check, from the JSON, and a run, from the decoded config, agree.
 */
export const canonicalText = (config: Config): string => JSON.stringify(config, sortedKeys)
