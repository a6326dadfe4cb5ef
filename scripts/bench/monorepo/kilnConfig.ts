/**
 * The kiln.json the benchmark gives kiln: what a user would write, kiln.json's `tasks` (README, "Tasks"), the same
 * task set Turborepo runs from the repository's turbo.json, a few lines instead of a process per package and script.
 * Everything else (each process's argv, PATH, inputs, deps) is what kiln infers from the workspace.
 *
 * - `build`: its workspace dependencies' builds first (`^build`, turbo's `dependsOn: ["^build"]`), outputs `dist/`;
 * - `test`: the same deps (the turbo.json of both repositories here), no outputs, and the tools' own caches kept
 *   where Turborepo's workspace keeps them across its runs, so that a root edit compares like with like: vite's
 *   `node_modules/.vite` (vitest 3 keeps its results there, under `vitest/`) and vitest 0.x's `node_modules/.vitest`,
 *   relative to the package, as named caches. The package's `node_modules` that the caches' links make is also where
 *   vite then bundles its config (`.vite-temp`, the nearest `node_modules`), so no `writableInputs` into the root's
 *   shared tree is needed. Where the tests read a root config kiln does not take by default (react-email's
 *   `vitest.config.ts`: `globals: true`, happy-dom), `rootInputs` names it.
 *
 * A repository's packages outside the benchmark's scope get processes too (tasks cover the workspace): the benchmark
 * names the processes of its scope on kiln's command line ({@link kilnProcesses}), as Turborepo gets `--filter`s.
 */
import type { Workspace, WorkspacePackage } from "./workspace.js"

export interface GenerateOptions {
  /** The build's outputs, relative to its package: `dist/`. */
  readonly buildOutputs: ReadonlyArray<string>
  /** Root files the tests read beyond kiln's default root inputs (react-email's root vitest config). */
  readonly testRootInputs: ReadonlyArray<string>
}

/** The name of the process task `script` gives package `p` (README, "Tasks"). */
export const processName = (p: WorkspacePackage, script: string): string => `${script}:${p.name}`

/** The scripts that are tasks, in both tools. */
export const SCRIPTS = ["build", "test"] as const

/** kiln.json for the workspace: see the module's comment. */
export const kilnConfigOf = (o: GenerateOptions): Record<string, unknown> => ({
  tasks: {
    build: { deps: ["^build"], outputs: o.buildOutputs },
    test: {
      deps: ["^build"],
      namedCaches: { vite: "node_modules/.vite", vitest: "node_modules/.vitest" },
      ...(o.testRootInputs.length > 0 ? { rootInputs: o.testRootInputs } : {})
    }
  }
})

/** The processes of the packages in scope, for kiln's command line: its scope, as Turborepo's `--filter`s. */
export const kilnProcesses = (ws: Workspace): Array<string> =>
  ws.inScope.flatMap((p) => SCRIPTS.filter((s) => p.scripts[s] !== undefined).map((s) => processName(p, s)))
