/**
 * The execution stack the commands share, the library's own (`Kiln.layer`): Store → Sandboxer and Sandboxes →
 * ProcessRunner (→ Engine), with the helpers' lifetime beneath.
 */
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import type { InvalidConfig } from "../../domain/config/Config.js"
import type { KeepSandboxes } from "../../domain/Sandbox.js"
import * as Kiln from "../../layers/kiln/Kiln.js"
import type { Settings as RemoteSettings } from "../../layers/remote/RemoteSettings.js"
import type * as ProcessRunner from "../../layers/runner/ProcessRunner.js"
import type * as SandboxMode from "../../layers/runner/SandboxMode.js"
import type * as Store from "../../layers/store/Store.js"

export interface StackOptions {
  readonly store: Partial<Store.Options>
  readonly sandboxRoot: Option.Option<string>
  readonly namedCachesDir: Option.Option<string>
  readonly keepSandboxes?: KeepSandboxes
  readonly reuseSandboxes?: boolean
  readonly sweepOnStart?: boolean
  readonly runner?: ProcessRunner.Options
  /** A remote cache behind the store (the runner asks it after the local cache). */
  readonly remote?: RemoteSettings
  /** How local processes are sandboxed (`--sandbox`, else kiln.json's, else auto). */
  readonly sandbox?: SandboxMode.Mode
}

const some = <K extends string, A>(key: K, o: Option.Option<A>) =>
  Option.match(o, { onNone: () => ({}), onSome: (value) => ({ [key]: value }) as Record<K, A> })

/** The remote cache over the store, for the runner (its `RemoteTier`) and the command (its stats and flush). */
export const remoteLayer = Kiln.remoteLayer

/** The command line's options as the library's (`Kiln.Options`): the CLI runs the stack a library user gets. */
const kilnOptions = (o: StackOptions): Kiln.Options => ({
  store: o.store,
  sandboxes: {
    keep: o.keepSandboxes ?? "never",
    reuse: o.reuseSandboxes ?? true,
    sweepOnStart: o.sweepOnStart ?? true,
    ...some("root", o.sandboxRoot)
  },
  runner: { ...o.runner, ...some("namedCachesDir", o.namedCachesDir) },
  ...(o.remote !== undefined ? { remote: o.remote } : {}),
  ...(o.sandbox !== undefined ? { sandbox: o.sandbox } : {})
})

export const runnerStack = (o: StackOptions) => Kiln.runnerLayer(kilnOptions(o))

export const engineStack = (o: StackOptions) => Kiln.layer(kilnOptions(o))

/** A config error: each of its problems on stderr (a line, then the file's line and a caret), exit code 2. */
export const exitOnInvalidConfig = <A, E, R>(effect: Effect.Effect<A, E | InvalidConfig, R>) =>
  Effect.catchIf(
    effect,
    (e): e is InvalidConfig => typeof e === "object" && e !== null && "_tag" in e && e._tag === "InvalidConfig",
    (e) =>
      Effect.sync(() => {
        // Every problem's own line says it is kiln's; the quoted lines of the file are indented.
        process.stderr.write(`${e.message.split("\n").map((l) => (l.startsWith(" ") ? l : `kiln: ${l}`)).join("\n")}\n`)
        process.exitCode = 2
      })
  )
