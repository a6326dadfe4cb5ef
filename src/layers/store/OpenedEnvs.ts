/**
 * The LMDB environments this process opened, as a standby engine is told of them by the run that starts it (see
 * `programs/kiln/standby/`): it opens the same ones while it waits, so that the next run's store finds them open
 * (`OpenAhead.ts`). Plain data on `globalThis`, importing nothing of the store: the CLI's loader reads it at a
 * run's end without loading the store, and the engine's bundle writes it.
 */
import * as path from "node:path"

/** An environment as opened: its directory and the settings every opener in a process must share. */
export interface OpenedEnv {
  readonly dir: string
  readonly mapSize: number
  readonly maxReaders: number
  readonly lockTable: boolean
}

/** At most this many are kept (a run of a store of 64 shards a kind opens them all; the rest is left to the run). */
export const MAX_OPENED = 64

const key = Symbol.for("kiln/lmdbOpened")

const list = (): Array<OpenedEnv> => ((globalThis as Record<symbol, unknown>)[key] ??= []) as Array<OpenedEnv>

/** Notes that this process opened `env` (once per directory). */
export const note = (env: OpenedEnv): void => {
  const opened = list()
  if (opened.length < MAX_OPENED && !opened.some((o) => o.dir === env.dir)) opened.push(env)
}

/**
 * Forgets what this process opened under `dir` (a throwaway store: `workspace/RestoreWarmUp.ts`), so that no standby is
 * told to open it.
 */
export const forgetUnder = (dir: string): void => {
  const opened = list()
  const kept = opened.filter((o) => o.dir !== dir && !o.dir.startsWith(`${dir}/`))
  opened.splice(0, opened.length, ...kept)
}

/** What this process opened, in order. */
export const openedHere = (): ReadonlyArray<OpenedEnv> => [...list()]

const isCount = (n: unknown, max: number): n is number =>
  typeof n === "number" && Number.isSafeInteger(n) && n > 0 && n <= max

/**
 * The environments of `value` (as JSON gave it back), or undefined when it is not a list of them: at most
 * {@link MAX_OPENED}, each an absolute path as `path.resolve` gives it with settings LMDB takes.
 */
export const parse = (value: unknown): ReadonlyArray<OpenedEnv> | undefined => {
  if (!Array.isArray(value) || value.length > MAX_OPENED) return undefined
  const envs: Array<OpenedEnv> = []
  for (const v of value as ReadonlyArray<Record<string, unknown>>) {
    if (typeof v !== "object" || v === null) return undefined
    const { dir, lockTable, mapSize, maxReaders } = v
    if (typeof dir !== "string" || !path.isAbsolute(dir) || path.resolve(dir) !== dir || dir.includes("\0")) {
      return undefined
    }
    if (!isCount(mapSize, 2 ** 52) || !isCount(maxReaders, 1 << 20) || typeof lockTable !== "boolean") return undefined
    envs.push({ dir, mapSize, maxReaders, lockTable })
  }
  return envs
}
