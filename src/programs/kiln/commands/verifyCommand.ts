/**
 * `kiln verify [NAME…]`: re-runs processes whose results the cache holds, each in a fresh sandbox with the cache
 * off, and says which do not reproduce them (a process whose outputs differ from run to run poisons a shared cache).
 * Exit codes: 0 every process re-run reproduced its result; 1 one did not, or could not be re-run; 2 a usage or config
 * error.
 */
import * as Args from "@effect/cli/Args"
import * as Command from "@effect/cli/Command"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as path from "node:path"
import { InvalidConfig } from "../../../domain/config/Config.js"
import * as ProcessName from "../../../domain/config/ProcessName.js"
import * as Engine from "../../../layers/engine/Engine.js"
import type * as RemoteSettings from "../../../layers/remote/RemoteSettings.js"
import { cliOptions, storeOptions } from "../../common/cliOptions.js"
import { toStoreOptions } from "../../common/storeSettings.js"
import { VERIFY_OPTIONS } from "../commandTable.js"
import { COMMANDS } from "../help.js"
import { REMOTE_OPTIONS, SANDBOX_OPTIONS } from "../optionTable.js"
import { configFileOf, loadConfig } from "../run/runDirect.js"
import { exitOnInvalidRemote, remoteSettings } from "../settings.js"
import { engineStack, exitOnInvalidConfig } from "../stack.js"

/** The lines that say how one process fared. */
export const linesOf = (p: Engine.VerifiedProcess): Array<string> => {
  switch (p.status) {
    case "reproduced":
      return [`✓ ${p.name}: reproduced its cached result`]
    case "not-cached":
      return [`- ${p.name}: not in the cache, nothing to verify`]
    case "error":
      return [`! ${p.name}: could not be re-run: ${p.detail ?? ""}`]
    case "differs": {
      const lines = [
        `✗ ${p.name}: does not reproduce its cached result (action ${p.actionDigest})${
          p.evicted === true ? "; its entry was evicted" : ""
        }`
      ]
      if (p.exitCodes !== undefined) {
        lines.push(`  exit code: cached ${p.exitCodes.cached ?? "none"}, now ${p.exitCodes.fresh ?? "none"}`)
      }
      for (const d of p.differences) {
        lines.push(
          d.change === "changed"
            ? `  changed ${d.path}${d.line !== undefined ? `: line ${d.line.number}` : ""}`
            : d.change === "added"
            ? `  added ${d.path} (only the re-run made it)`
            : `  missing ${d.path} (only the cached result has it)`
        )
        if (d.line !== undefined) {
          lines.push(`    cached: ${JSON.stringify(d.line.cached)}`, `    now:    ${JSON.stringify(d.line.fresh)}`)
        }
      }
      return lines
    }
  }
}

/** The counts of a verification, as `--json` gives them and the closing line says them. */
export const tally = (reports: ReadonlyArray<Engine.VerifiedProcess>) => {
  const count = (s: Engine.VerifiedProcess["status"]) => reports.filter((r) => r.status === s).length
  return {
    reproduced: count("reproduced"),
    differ: count("differs"),
    errors: count("error"),
    notCached: count("not-cached"),
    evicted: reports.filter((r) => r.evicted === true).length
  }
}

const closingLine = (t: ReturnType<typeof tally>) =>
  `kiln: verify: ${t.reproduced + t.differ + t.errors} re-run: ${t.reproduced} reproduced, ${t.differ} differ` +
  `${t.errors > 0 ? `, ${t.errors} could not run` : ""}` +
  `${t.notCached > 0 ? `; ${t.notCached} not in the cache` : ""}` +
  `${t.evicted > 0 ? `; ${t.evicted} entries evicted` : ""}`

/** The remote cache's settings for verifying: read only, never an executor (every process re-runs here). */
const readOnly = (settings: RemoteSettings.Settings): RemoteSettings.Settings => {
  const { executorEndpoint: _apart, ...rest } = settings
  return { ...rest, mode: "read", executor: false }
}

export const verify = Command.make(
  "verify",
  {
    names: Args.text({ name: "name" }).pipe(Args.repeated),
    ...cliOptions({ ...VERIFY_OPTIONS, ...SANDBOX_OPTIONS, ...REMOTE_OPTIONS }),
    ...storeOptions
  },
  (o) =>
    Effect.gen(function*() {
      const configFile = yield* exitOnInvalidConfig(configFileOf(o.config))
      if (configFile === undefined) return
      const sample = Option.getOrUndefined(o.sample)
      const loaded = yield* exitOnInvalidConfig(Effect.gen(function*() {
        const { config } = yield* loadConfig(configFile)
        const unknown = o.names.find((n) => !Object.hasOwn(config.processes, n))
        if (unknown !== undefined || (sample !== undefined && sample < 1)) {
          return yield* new InvalidConfig({
            file: unknown !== undefined ? path.basename(configFile) : "--sample",
            path: "",
            detail: unknown !== undefined ? `unknown process "${unknown}"` : "must be at least 1"
          })
        }
        return config
      }))
      if (loaded === undefined) return
      // `--remote-cache` verifies that server's entries (kiln.json's and the environment's other remote settings
      // apply to it); without it, the local ones. The remote is only read: verifying uploads nothing, and every
      // process re-runs here.
      const remote = Option.isSome(o.remoteCache)
        ? yield* remoteSettings(o, loaded, path.dirname(configFile))
        : undefined
      const reports = yield* Effect.flatMap(Engine.Engine, (engine) =>
        engine.verify({
          workspace: path.dirname(configFile),
          config: loaded,
          configName: path.basename(configFile),
          ...(o.names.length > 0 ? { names: o.names } : {}),
          ...(sample !== undefined ? { sample } : {}),
          evict: o.evict,
          remoteEntries: remote !== undefined
        })).pipe(
          Effect.provide(engineStack({
            store: toStoreOptions(o),
            sandboxRoot: o.sandboxRoot,
            namedCachesDir: o.namedCachesDir,
            keepSandboxes: o.keepSandboxes,
            // A remote entry's outputs are downloaded to be compared, as explain's hits are.
            runner: { concurrency: o.concurrency, cacheContent: "fetch" },
            ...(remote !== undefined ? { remote: readOnly(remote) } : {})
          }))
        )
      const t = tally(reports)
      if (o.json) {
        process.stdout.write(`${ProcessName.printableJson({ processes: reports, ...t }, 2)}\n`)
      } else {
        const lines = reports.flatMap(linesOf)
        // Output paths and lines a process made are escaped: a name holding an escape sequence reaches no terminal.
        if (lines.length > 0) process.stdout.write(`${lines.map(ProcessName.printable).join("\n")}\n`)
        process.stderr.write(`${closingLine(t)}\n`)
      }
      if (remote !== undefined && o.evict && t.differ > 0) {
        process.stderr.write(
          `kiln: verify: the entries on ${remote.endpoint.display} stay: a remote cache gives a client no way to ` +
            "remove one (change `cacheNamespace` to disown them)\n"
        )
      }
      if (t.differ > 0 || t.errors > 0) process.exitCode = 1
    }).pipe(exitOnInvalidRemote)
).pipe(Command.withDescription(COMMANDS.verify))
