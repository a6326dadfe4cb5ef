/**
 * How local processes are sandboxed, for a run: `strict` (the strict view, `MountNamespace.View`, or no run where
 * this machine cannot make it), `auto` (the strict view where it can, else the mount namespace alone) or `off` (the
 * mount namespace alone). The runner reads it where it spawns; absent, the mode is `auto`.
 *
 * @since 0.1.0
 * @category tags
 */
import * as Context from "effect/Context"

/**
 * @since 0.1.0
 * @category tags
 */
export class SandboxMode extends Context.Tag("kiln/SandboxMode")<SandboxMode, "strict" | "auto" | "off">() {}
