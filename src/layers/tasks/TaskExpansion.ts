/**
 * A config file's tasks expanded, as a run takes them: the workspace read and the tasks written out as processes
 * (`Tasks.ts`), then every process checked as kiln.json's own are (`Config.findingsIn`), a problem with a task
 * reported at the task. Errors are `InvalidConfig`s: a line for each problem naming the file (its line and column) and
 * the field, exit 2.
 */
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as fs from "node:fs"
import * as path from "node:path"
import {
  type Config,
  type Finding,
  findingsIn,
  invalidAt,
  InvalidConfig,
  type PlaceOf
} from "../../domain/config/Config.js"
import * as ResolvedConfig from "../../domain/config/ResolvedConfig.js"
import { placesOf } from "./internal/places.js"
import * as Tasks from "./Tasks.js"

/**
 * The config with its tasks written out, its defaults and passed variables resolved (`ResolvedConfig.ts`, `passEnv`
 * values from `host`, kiln's environment), checked, and where each inferred process comes from; a config without
 * tasks is resolved, checked and given back. Every problem of kiln.json is reported at once, the tasks', the
 * defaults' and the processes', each at its line in `text` (kiln.json's, as read) when given; a problem of a
 * workspace file (a package.json) is reported alone.
 */
export const expand = (
  workspace: string,
  file: string,
  config: Config,
  host: Readonly<Record<string, string | undefined>> = process.env,
  text?: string
): Effect.Effect<Tasks.Expanded, InvalidConfig> =>
  Effect.suspend(() => {
    const expanded: Tasks.ExpandedAll | Tasks.Problem = config.tasks === undefined
      ? { config, origins: {}, problems: [], refused: new Set() }
      : Tasks.expandAllAt(workspace, file, config)
    if (Tasks.isProblem(expanded)) return Effect.fail(new InvalidConfig(expanded))
    const declaredAt = (name: string): ReadonlyArray<PropertyKey> => {
      const origin = expanded.origins[name]
      return origin === undefined ? ["processes", name] : ["tasks", origin.key]
    }
    const resolved = ResolvedConfig.resolveAll(expanded.config, host, declaredAt)
    const placeOf = placesOf(config, resolved.config, expanded.origins)
    const found: Array<Finding> = [
      ...expanded.problems.map(({ at, detail, key }) => ({ at, detail, key })),
      ...resolved.problems,
      ...findingsIn(resolved.config, placeOf, expanded.refused)
    ]
    if (found.length > 0) return Effect.fail(invalidAt(file, found, text))
    return Either.match(hostPathsOutside(workspace, file, resolved.config, text, placeOf), {
      onLeft: Effect.fail,
      onRight: (checked) => Effect.succeed({ config: checked, origins: expanded.origins })
    })
  })

/**
 * The config when none of its processes' `hostPaths` lies in the workspace or holds it
 * (`ResolvedConfig.hostPathInWorkspace`), the workspace taken as written and as its real path. The problem is located
 * in `text` (kiln.json's, as read) when given, where `placeOf` says the file writes the entry (default: the process's
 * own `hostPaths`).
 */
export const hostPathsOutside = (
  workspace: string,
  file: string,
  config: Config,
  text?: string,
  placeOf?: PlaceOf
): Either.Either<Config, InvalidConfig> => {
  if (!Object.values(config.processes).some((pc) => (pc.hostPaths ?? []).length > 0)) return Either.right(config)
  const given = path.resolve(workspace)
  let real = given
  try {
    real = fs.realpathSync(given)
  } catch {
    // A workspace that cannot be resolved is reported by what reads it; the path as given is judged.
  }
  const problem = ResolvedConfig.hostPathInWorkspace(file, config.processes, real === given ? [given] : [given, real])
  if (problem === undefined) return Either.right(config)
  const at = placeOf?.(problem.name, ["hostPaths", problem.index]).at ?? problem.at
  return Either.left(invalidAt(file, [{ at, detail: problem.detail }], text))
}
