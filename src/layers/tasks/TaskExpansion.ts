/**
 * A config file's tasks expanded, as a run takes them: the workspace read and the tasks written out as processes
 * (`Tasks.ts`), then every process checked as kiln.json's own are (`Config.check`), a problem with a task reported at
 * the task. Errors are `InvalidConfig`s: one line naming the file and the field, exit 2.
 */
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as fs from "node:fs"
import * as path from "node:path"
import { check, type Config, InvalidConfig } from "../../domain/Config.js"
import * as ResolvedConfig from "../../domain/ResolvedConfig.js"
import * as Tasks from "./Tasks.js"

/**
 * The config with its tasks written out, its defaults and passed variables resolved (`ResolvedConfig.ts`, `passEnv`
 * values from `host`, kiln's environment), checked, and where each inferred process comes from; a config without
 * tasks is resolved, checked and given back.
 */
export const expand = (
  workspace: string,
  file: string,
  config: Config,
  host: Readonly<Record<string, string | undefined>> = process.env
): Effect.Effect<Tasks.Expanded, InvalidConfig> =>
  Effect.suspend(() => {
    const expanded = config.tasks === undefined ? { config, origins: {} } : Tasks.expandAt(workspace, file, config)
    if (Tasks.isProblem(expanded)) return Effect.fail(new InvalidConfig(expanded))
    const declaredAt = (name: string): ReadonlyArray<PropertyKey> => {
      const origin = expanded.origins[name]
      return origin === undefined ? ["processes", name] : ["tasks", origin.key]
    }
    const resolved = ResolvedConfig.resolve(file, expanded.config, host, declaredAt)
    if (ResolvedConfig.isProblem(resolved)) return Effect.fail(new InvalidConfig(resolved))
    return Either.match(
      Either.flatMap(check(file, resolved, declaredAt), (c) => hostPathsOutside(workspace, file, c, declaredAt)),
      {
        onLeft: Effect.fail,
        onRight: (checked) => Effect.succeed({ config: checked, origins: expanded.origins })
      }
    )
  })

/**
 * The config when none of its processes' `hostPaths` lies in the workspace or holds it
 * (`ResolvedConfig.hostPathInWorkspace`),
 * the workspace taken as written and as its real path.
 */
export const hostPathsOutside = (
  workspace: string,
  file: string,
  config: Config,
  declaredAt?: (name: string) => ReadonlyArray<PropertyKey>
): Either.Either<Config, InvalidConfig> => {
  if (!Object.values(config.processes).some((pc) => (pc.hostPaths ?? []).length > 0)) return Either.right(config)
  const given = path.resolve(workspace)
  let real = given
  try {
    real = fs.realpathSync(given)
  } catch {
    // A workspace that cannot be resolved is reported by what reads it; the path as given is judged.
  }
  const problem = ResolvedConfig.hostPathInWorkspace(
    file,
    config.processes,
    real === given ? [given] : [given, real],
    declaredAt
  )
  return problem === undefined ? Either.right(config) : Either.left(new InvalidConfig(problem))
}
