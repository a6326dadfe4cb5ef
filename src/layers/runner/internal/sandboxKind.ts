/**
 * Which sandbox a local process had, as the summary and `--trace` report it (`ProcessResult.sandbox`): `strict` (the
 * strict view: namespaces of its own, only its inputs, the system's directories and its `hostPaths`), `mount` (a
 * mount namespace for shared trees or a pinned exec root, the rest of the host visible), `none` (a sandbox directory
 * only). The rule is the one the spawn decides the view by (`localSpawn.ts`): strict when the mode is not `off` and
 * this machine can make the strict view.
 *
 * @internal
 */
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import type { SandboxKind } from "../../../domain/Process.js"
import * as MountNamespace from "../../../os/mounts/MountNamespace.js"
import { SandboxMode } from "../SandboxMode.js"

/** @internal */
export const sandboxKind = (
  mode: SandboxMode["Type"],
  strictWorks: boolean,
  mountNamespace: boolean
): SandboxKind => mode !== "off" && strictWorks ? "strict" : mountNamespace ? "mount" : "none"

/** Whether this machine can make the strict view (probed once per kiln process). @internal */
export const strictWorks = (): boolean => MountNamespace.strictProbe().works

/** The kind of a process that ran here, with or without a mount namespace, under the run's mode. @internal */
export const kindOf = (mountNamespace: boolean): Effect.Effect<SandboxKind> =>
  Effect.map(
    Effect.serviceOption(SandboxMode),
    (mode) => sandboxKind(Option.getOrElse(mode, () => "auto" as const), strictWorks(), mountNamespace)
  )
