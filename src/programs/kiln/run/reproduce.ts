/**
 * The options of a `kiln run` that a failed process's re-run line (`kiln exec …`, made by the engine) must carry for
 * the process to run as it did: where sandboxes and named caches are, the store's settings, the remote (from the
 * flags, or from kiln.json, which `kiln exec` does not read) and the cache namespace. The environment the process saw
 * is the engine's to add (`--env`, its pass-through variables by reference).
 */
import * as Duration from "effect/Duration"
import * as Option from "effect/Option"
import * as path from "node:path"
import type { Config } from "../../../domain/config/Config.js"
import type { OptionSpec } from "../../common/optionSpec.js"
import { RUN_OPTIONS } from "../optionTable.js"
import type { RunArgs } from "./runDirect.js"

/**
 * The run options a re-run takes as they were given. Not those `kiln exec` has no use for (what to run, how to
 * report, the run's own cache mode: the re-run line runs with `--cache never`), nor `--store-dir`, which the engine
 * prints as the store resolved it.
 */
const CARRIED = [
  "sandboxRoot",
  "namedCachesDir",
  "storeShards",
  "storeMaxReaders",
  "storeFilesMapSize",
  "storeDirectoriesMapSize",
  "storeActionsMapSize",
  "remoteCache",
  "remoteExecutor",
  "remoteJobs",
  "remoteFallback",
  "remoteInstanceName",
  "remoteHeader",
  "remoteCa",
  "remoteClientCert",
  "remoteClientKey",
  "remoteCacheMode",
  "remoteRequired",
  "remoteTimeout",
  "remoteCorrelationId",
  "cacheNamespace"
] as const satisfies ReadonlyArray<keyof typeof RUN_OPTIONS>

/** An option's value as its flag reads it again; a path made absolute, for a re-run from another directory. */
const given = (spec: OptionSpec, value: unknown): Array<string> => {
  if (spec.kind === "boolean") return value === true ? [`--${spec.flag}`] : []
  if (spec.kind === "list") return (value as ReadonlyArray<string>).flatMap((v) => [`--${spec.flag}`, v])
  const v = Option.isOption(value) ? Option.getOrUndefined(value) : value
  if (v === undefined) return []
  const text = spec.kind === "duration"
    ? `${Duration.toMillis(v as Duration.Duration)}ms`
    : spec.kind === "file" || spec.kind === "directory"
    ? path.resolve(v as string)
    : String(v)
  return [`--${spec.flag}`, text]
}

/** What kiln.json's `"remote"` gave, as flags; its paths are relative to the workspace. Headers are the flags' only. */
const fromConfig = (o: RunArgs, config: Config, workspace: string): Array<string> => {
  const remote = config.remote
  if (remote === undefined) return []
  const flag = (name: string, value: string | undefined, isPath = false) =>
    value === undefined ? [] : [`--${name}`, isPath ? path.resolve(workspace, value) : value]
  return [
    ...(Option.isNone(o.remoteCache) ? flag("remote-cache", remote.cache) : []),
    ...(Option.isNone(o.remoteExecutor) ? flag("remote-executor", remote.executor) : []),
    ...(Option.isNone(o.remoteInstanceName) ? flag("remote-instance-name", remote.instanceName) : []),
    ...(Option.isNone(o.remoteCa) ? flag("remote-ca", remote.ca, true) : []),
    ...(Option.isNone(o.remoteClientCert) ? flag("remote-client-cert", remote.clientCert, true) : []),
    ...(Option.isNone(o.remoteClientKey) ? flag("remote-client-key", remote.clientKey, true) : []),
    ...(Option.isNone(o.remoteCacheMode) ? flag("remote-cache-mode", remote.mode) : []),
    ...(Option.isNone(o.remoteTimeout) ? flag("remote-timeout", remote.timeout) : [])
  ]
}

/** The `kiln exec` arguments (unquoted) that re-run a process of this run with the run's settings. */
export const reproduceArgs = (o: RunArgs, config: Config, workspace: string): ReadonlyArray<string> => [
  ...CARRIED.flatMap((key) => given(RUN_OPTIONS[key], o[key])),
  ...fromConfig(o, config, workspace),
  ...(Option.isNone(o.cacheNamespace) && config.cacheNamespace !== undefined
    ? ["--cache-namespace", config.cacheNamespace]
    : [])
]
