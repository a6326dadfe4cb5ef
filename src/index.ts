/**
 * kiln as a library: each service is a Tag with `layer(options)`; compose them as the CLI does.
 *
 * @since 0.1.0
 */
export * as Action from "./domain/Action.js"
export * as Config from "./domain/Config.js"
export * as Digest from "./domain/Digest.js"
export * as Directory from "./domain/Directory.js"
export * as Process from "./domain/Process.js"
export * as Engine from "./layers/engine/Engine.js"
export * as ProcessRunner from "./layers/runner/ProcessRunner.js"
export * as Sandboxes from "./layers/sandbox/Sandboxes.js"
export * as Sandboxer from "./layers/sandboxer/Sandboxer.js"
export * as SnapshotSession from "./layers/store/SnapshotSession.js"
export * as Store from "./layers/store/Store.js"
export * as Workspace from "./layers/workspace/Workspace.js"
