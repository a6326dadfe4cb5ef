/**
 * A config file's tasks expanded, as a run takes them: the workspace read and the tasks written out as processes
 * (`Tasks.ts`), then every process checked as kiln.json's own are (`Config.check`), a problem with a task reported at
 * the task. Errors are `InvalidConfig`s: one line naming the file and the field, exit 2.
 */
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import { check, type Config, InvalidConfig } from "../../domain/Config.js"
import * as Tasks from "./Tasks.js"

/**
 * The config with its tasks written out, checked, and where each inferred process comes from; a config without tasks
 * is checked and given back as it is.
 */
export const expand = (
  workspace: string,
  file: string,
  config: Config
): Effect.Effect<Tasks.Expanded, InvalidConfig> =>
  Effect.suspend(() => {
    if (config.tasks === undefined) {
      return Either.match(check(file, config), {
        onLeft: Effect.fail,
        onRight: (checked) => Effect.succeed({ config: checked, origins: {} })
      })
    }
    const expanded = Tasks.expandAt(workspace, file, config)
    if (Tasks.isProblem(expanded)) return Effect.fail(new InvalidConfig(expanded))
    const declaredAt = (name: string): ReadonlyArray<PropertyKey> => {
      const origin = expanded.origins[name]
      return origin === undefined ? ["processes", name] : ["tasks", origin.key]
    }
    return Either.match(check(file, expanded.config, declaredAt), {
      onLeft: Effect.fail,
      onRight: () => Effect.succeed(expanded)
    })
  })
