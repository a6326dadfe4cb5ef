/**
 * kiln as a library: `Kiln.layer(options)` is the stack the CLI runs (Store, Sandboxer, Sandboxes, ProcessRunner,
 * Engine, with the helpers' lifetime beneath); each service is also a Tag with `layer(options)` of its own. Every
 * module here is also its own entry of the package (`kiln/Store`, …), and the package exports no other.
 *
 * @since 0.1.0
 */
export * as Action from "./domain/Action.js"
export * as Config from "./domain/config/Config.js"
export * as ResolvedConfig from "./domain/config/ResolvedConfig.js"
export * as Digest from "./domain/Digest.js"
export * as Directory from "./domain/Directory.js"
export * as Process from "./domain/Process.js"
export * as RemoteTier from "./domain/RemoteTier.js"
export * as RunErrors from "./domain/RunErrors.js"
export * as Sandbox from "./domain/Sandbox.js"
export * as StoreErrors from "./domain/StoreErrors.js"
export * as TreeErrors from "./domain/TreeErrors.js"
export * as UnsafeDirectory from "./domain/UnsafeDirectory.js"
export * as Engine from "./layers/engine/Engine.js"
export * as Kiln from "./layers/kiln/Kiln.js"
export * as HelperLifetime from "./layers/lifetime/HelperLifetime.js"
export * as Capabilities from "./layers/remote/Capabilities.js"
export * as Endpoint from "./layers/remote/Endpoint.js"
export * as RemoteCache from "./layers/remote/RemoteCache.js"
export * as RemoteErrors from "./layers/remote/RemoteErrors.js"
export * as RemoteSettings from "./layers/remote/RemoteSettings.js"
export * as HostEnv from "./layers/runner/HostEnv.js"
export * as ProcessRunner from "./layers/runner/ProcessRunner.js"
export * as SandboxMode from "./layers/runner/SandboxMode.js"
export * as Sandboxes from "./layers/sandbox/Sandboxes.js"
export * as Sandboxer from "./layers/sandboxer/Sandboxer.js"
export * as SnapshotObservation from "./layers/store/SnapshotObservation.js"
export * as SnapshotSession from "./layers/store/SnapshotSession.js"
export * as Store from "./layers/store/Store.js"
export * as StoreMaintenance from "./layers/store/StoreMaintenance.js"
export * as Workspace from "./layers/workspace/Workspace.js"
