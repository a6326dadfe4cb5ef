/**
 * How the runner sandboxes the processes it runs locally, a run-level setting (`--sandbox`, kiln.json's `"sandbox"`):
 * - `strict`: each process sees its inputs, the system's directories and its declared `hostPaths`, and nothing else,
 *   in namespaces of its own (no network unless it declares `"network": true`); a machine that cannot make that view
 *   refuses to run (exit 2, naming why), for CI.
 * - `auto` (the default): strict where this machine can make the view, else as `off`, said once in a warning line.
 * - `off`: a sandbox directory, and the read-only mounts of shared trees, as before there was a strict view; for
 *   debugging.
 *
 * The runner reads it with `Effect.serviceOption` (absent is `auto`).
 *
 * @since 0.1.0
 */
import * as Context from "effect/Context"
import * as Layer from "effect/Layer"

/**
 * @since 0.1.0
 * @category models
 */
export type Mode = "strict" | "auto" | "off"

/**
 * The modes, in the order the help lists them.
 *
 * @since 0.1.0
 * @category models
 */
export const modes: ReadonlyArray<Mode> = ["strict", "auto", "off"]

/**
 * @since 0.1.0
 * @category services
 */
export class SandboxMode extends Context.Tag("kiln/SandboxMode")<SandboxMode, "strict" | "auto" | "off">() {}

/**
 * @since 0.1.0
 * @category layers
 */
export const layer = (mode: Mode): Layer.Layer<SandboxMode> => Layer.succeed(SandboxMode, mode)
