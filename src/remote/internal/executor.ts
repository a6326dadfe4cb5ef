/**
 * The executor's side of the remote tier: processes that may run remotely go to the executor, `remoteJobs` at a
 * time; one it cannot take runs locally with one warning (or fails, with fallback off).
 *
 * @internal
 */
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Option from "effect/Option"
import { CHROOT, type Process, SpawnError } from "../../domain/Process.js"
import type { Executed, RemoteTier } from "../../domain/RemoteTier.js"
import type { Capabilities } from "../Capabilities.js"
import type { Settings } from "../RemoteSettings.js"
import * as Execution from "./execution.js"

/** Whether a process names its sandbox's path: it could not run anywhere else. */
const namesItsSandbox = (process: Process) =>
  process.argv.some((a) => a.includes(CHROOT)) || Object.values(process.env).some((v) => v.includes(CHROOT))

export const make = (
  settings: Settings,
  deps: Execution.Deps & {
    readonly usable: Effect.Effect<Capabilities | undefined>
    readonly counters: { executed: number; fallbacks: number }
  }
) =>
  Effect.gen(function*() {
    const jobs = yield* Effect.makeSemaphore(settings.remoteJobs)
    const execution = Execution.make(deps)
    let warned = false
    const fallBack = (process: Process, why: string) =>
      Effect.gen(function*() {
        if (!settings.fallback) {
          return yield* new SpawnError({ argv0: process.argv[0], detail: `remote executor ${deps.endpoint}: ${why}` })
        }
        deps.counters.fallbacks++
        if (!warned) {
          warned = true
          yield* Effect.logWarning(`remote executor ${deps.endpoint}: ${why}: running processes locally instead`)
        }
        return Option.none<Executed>()
      })
    const execute: RemoteTier["Type"]["execute"] = (process, key, options) =>
      Effect.gen(function*() {
        if (!settings.executor || !process.remote || namesItsSandbox(process)) return Option.none<Executed>()
        const caps = yield* deps.usable
        if (caps === undefined) return yield* fallBack(process, "it cannot be used")
        if (!caps.execution) return yield* fallBack(process, "it does not offer remote execution")
        // An execution silent for the remote timeout is re-attached to; the process's own timeout bounds the whole.
        const ran = yield* Effect.either(
          execution.run(process, key, settings.timeoutMs, jobs.withPermits(1), options?.skipCache === true)
        )
        if (Either.isLeft(ran)) {
          const e = ran.left
          return yield* fallBack(
            process,
            e._tag === "RemoteError" ? `${e.code}${e.detail ? `: ${e.detail}` : ""}` : e.message
          )
        }
        deps.counters.executed++
        return Option.some<Executed>(ran.right)
      })
    return execute
  })
