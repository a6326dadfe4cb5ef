/**
 * kiln's own environment, as the runner reads the values of a process's pass-through variables from it when it spawns
 * the process (`Process.passThroughEnv`): the values are never held in a `Process`, so never in its key, a record or
 * anything uploaded. kiln's `process.env` unless a caller provides another (a test, a library caller).
 *
 * @since 0.1.0
 */
import * as Context from "effect/Context"

/**
 * @since 0.1.0
 * @category services
 */
export class HostEnv extends Context.Reference<HostEnv>()("kiln/HostEnv", {
  defaultValue: (): Readonly<Record<string, string | undefined>> => process.env
}) {}
