/**
 * A standby engine's store, opened ahead of the next run: the LMDB environments the run that started it opened
 * ({@link OpenedEnvs}), which the next run's store then takes as its own instead of opening them (see
 * `internal/lmdb/envs.ts`). The standby closes those no run took once it has waited long enough.
 */
import type * as Effect from "effect/Effect"
import * as LmdbEnvs from "./internal/lmdb/envs.js"
import type * as OpenedEnvs from "./OpenedEnvs.js"

/** Opens `envs` ahead of a run: only those that exist and can be mapped; nothing is made or written. */
export const open = (envs: ReadonlyArray<OpenedEnvs.OpenedEnv>): Effect.Effect<void> => LmdbEnvs.warm(envs)

/** Closes every environment {@link open} opened that no store has taken. */
export const closeUntaken: () => void = LmdbEnvs.closeAllWaiting
