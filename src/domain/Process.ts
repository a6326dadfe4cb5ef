/**
 * A process to run hermetically, and its result. A tool that exits non-zero is a result, not an error: the error
 * channel is for kiln's own failures.
 *
 * @since 0.1.0
 */
import * as Schema from "effect/Schema"
import * as path from "node:path"
import { Digest } from "./Digest.js"

/**
 * `always` caches failures too; `successful` (the default) only exit code 0; `never` never reads or writes.
 *
 * @since 0.1.0
 * @category models
 */
export const CachePolicy = Schema.Literal("always", "successful", "never")

/**
 * @since 0.1.0
 * @category models
 */
export type CachePolicy = typeof CachePolicy.Type

/**
 * The placeholder replaced by the sandbox's absolute path in argv and env. The cache key sees the placeholder, so
 * the same process in two sandboxes has one key.
 *
 * @since 0.1.0
 * @category constants
 */
export const CHROOT = "{chroot}"

/**
 * @since 0.1.0
 * @category models
 */
export class Process extends Schema.Class<Process>("kiln/Process")({
  argv: Schema.NonEmptyArray(Schema.String),
  /** Exactly the environment the process sees: nothing is inherited, not even `PATH`. */
  env: Schema.optionalWith(Schema.Record({ key: Schema.String, value: Schema.String }), { default: () => ({}) }),
  inputDigest: Digest,
  /** Relative to the sandbox root; outputs are relative to it too. */
  workingDirectory: Schema.optionalWith(Schema.String, { default: () => "" }),
  outputFiles: Schema.optionalWith(Schema.Array(Schema.String), { default: () => [] }),
  outputDirectories: Schema.optionalWith(Schema.Array(Schema.String), { default: () => [] }),
  timeoutMs: Schema.optional(Schema.Number),
  description: Schema.optionalWith(Schema.String, { default: () => "a process" }),
  cache: Schema.optionalWith(CachePolicy, { default: () => "successful" as const }),
  /** `{ name: path relative to the sandbox }`; names are `[a-z0-9_]+`. */
  namedCaches: Schema.optionalWith(
    Schema.Record({ key: Schema.String.pipe(Schema.pattern(/^[a-z0-9_]+$/)), value: Schema.String }),
    { default: () => ({}) }
  ),
  /**
   * Input paths (relative to the sandbox root) the process writes into: each is private and writable (a writable
   * copy, or a writable layer over a shared tree) rather than a share of a read-only tree. Not part of the action
   * key: the bytes the process sees are the same.
   */
  writablePaths: Schema.optionalWith(Schema.Array(Schema.String), { default: () => [] }),
  /** Part of the action key (its salt): results cached under another namespace are not this process's. */
  cacheNamespace: Schema.optional(Schema.String),
  /** REAPI platform properties (part of the action key): what a remote executor matches workers by. */
  platform: Schema.optionalWith(Schema.Record({ key: Schema.String, value: Schema.String }), { default: () => ({}) }),
  /**
   * `contained` (the default): an output symlink must point inside the working directory (see
   * `Directory.escapingTargetReason`), from a cache as from the process itself; `any`: anywhere. Part of the key.
   */
  outputSymlinks: Schema.optionalWith(Schema.Literal("contained", "any"), { default: () => "contained" as const }),
  /**
   * The absolute path the process sees its sandbox at (put in for `{chroot}`, its working directory under it), the
   * same on every run and machine (see `MountNamespace.EXEC_ROOT`); absent: wherever its sandbox is, a path that
   * differs for every process. Part of the key (its salt): a result made at one path is not one made at another, and
   * a machine that cannot pin the path never shares keys with one that does.
   */
  execRoot: Schema.optional(Schema.String),
  /**
   * Variables the process gets from kiln's environment when it is spawned (`NAME`, or `NAME=default`): names only,
   * their values never held here, so never in the key, a record or anything uploaded. Not part of the key.
   */
  passThroughEnv: Schema.optionalWith(Schema.Array(Schema.String), { default: () => [] }),
  /**
   * Declared outputs (as in `outputFiles` and `outputDirectories`) the process may leave unmade (`"?coverage/"` in
   * kiln.json). Not part of the key: what the process computes is the same.
   */
  optionalOutputs: Schema.optionalWith(Schema.Array(Schema.String), { default: () => [] }),
  /** False: never executed remotely. Not part of the key. */
  remote: Schema.optionalWith(Schema.Boolean, { default: () => true }),
  /**
   * Host paths (absolute, normalised, sorted) the process sees read-only at their own path under the strict sandbox,
   * beside the system's directories: a toolchain in `/opt`, a licence file. Part of the key (its salt) when there are
   * any: what the process could read is part of what its result means.
   */
  hostPaths: Schema.optionalWith(Schema.Array(Schema.String), { default: () => [] }),
  /**
   * True: the process keeps the host's network under the strict sandbox (else it has only a loopback of its own).
   * Part of the key (its salt) when true: a result that may have come from the network is not one that could not.
   */
  network: Schema.optionalWith(Schema.Boolean, { default: () => false })
}) {}

/**
 * @since 0.1.0
 * @category models
 */
export const ResultSource = Schema.Literal("ran", "cache-hit", "remote-cache", "remote")

/**
 * Which sandbox a process that ran here had: `strict` (namespaces of its own; it sees only its inputs, the system's
 * directories and its `hostPaths`), `mount` (a mount namespace for shared trees or a pinned exec root; the rest of the
 * host is visible), `none` (a sandbox directory only).
 *
 * @since 0.1.0
 * @category models
 */
export const SandboxKind = Schema.Literal("strict", "mount", "none")

/**
 * @since 0.1.0
 * @category models
 */
export type SandboxKind = typeof SandboxKind.Type

/**
 * Files a process that ran here left in its sandbox that are neither its declared outputs nor its inputs: how many,
 * the first few paths found (relative to the input root), and whether the count stopped at a bound (`truncated`: the
 * process wrote at least that many, and the walk went no further).
 *
 * @since 0.1.0
 * @category models
 */
export const UndeclaredWrites = Schema.Struct({
  count: Schema.Int,
  sample: Schema.Array(Schema.String),
  truncated: Schema.optional(Schema.Boolean)
})

/**
 * @since 0.1.0
 * @category models
 */
export type UndeclaredWrites = typeof UndeclaredWrites.Type

/**
 * @since 0.1.0
 * @category models
 */
export class ProcessResult extends Schema.Class<ProcessResult>("kiln/ProcessResult")({
  exitCode: Schema.NullOr(Schema.Int),
  signal: Schema.NullOr(Schema.String),
  timedOut: Schema.Boolean,
  stdoutDigest: Digest,
  stderrDigest: Digest,
  outputDigest: Digest,
  actionDigest: Digest,
  durationMs: Schema.Number,
  source: ResultSource,
  /** Milliseconds spent in each phase of this run (a cache hit only has `cacheLookup`). */
  timings: Schema.Record({ key: Schema.String, value: Schema.Number }),
  /**
   * The runner's ticket for the check that the workspace directories the sandbox mounted held while the process ran
   * (made for many processes at once: see `ProcessRunner.settleInputs`). The result is this run's either way; it is
   * cached only once they held (one that changed may not be what its input tree computes). Absent when it mounted
   * none.
   */
  inputsCheck: Schema.optional(Schema.Number),
  /**
   * Declared outputs, not optional, that the process did not make: the result is this run's, but it is not cached (a
   * build that forgot a file would be served forgetting it, to every machine, until its inputs change).
   */
  missingOutputs: Schema.optional(Schema.Array(Schema.String)),
  /**
   * What it wrote in its sandbox outside its declared outputs (absent when it wrote nothing else, when it failed, and
   * for a cache hit or a remote run: only a success here is looked at). Not cached: it says how this run went.
   */
  undeclaredWrites: Schema.optional(UndeclaredWrites),
  /** The sandbox it had, when it ran here (absent for a cache hit or a remote execution). */
  sandbox: Schema.optional(SandboxKind)
}) {
  get succeeded(): boolean {
    return this.exitCode === 0 && !this.timedOut
  }

  /**
   * Whether this result is one its action computes whatever the run: none that kiln refuses to cache for itself (but
   * for the check of its mounted directories, which its `inputsCheck` waits for).
   */
  get reproducible(): boolean {
    return !this.timedOut && (this.missingOutputs?.length ?? 0) === 0
  }
}

/**
 * The process could not be started at all (its executable is missing or not executable, say).
 *
 * @since 0.1.0
 * @category errors
 */
export class SpawnError extends Schema.TaggedError<SpawnError>("kiln/SpawnError")("SpawnError", {
  argv0: Schema.String,
  detail: Schema.String
}) {
  override get message(): string {
    return `cannot run \`${this.argv0}\`: ${this.detail}`
  }
}

/**
 * Splits a declared output path into segments, refusing absolute paths and `..`: outputs live inside the sandbox.
 *
 * @since 0.1.0
 * @category outputs
 */
export const outputSegments = (declared: string): Array<string> | undefined => {
  if (declared.startsWith("/")) return undefined
  const normal = path.posix.normalize(declared.replace(/\/+$/, ""))
  if (normal === "." || normal === "") return []
  const segments = normal.split("/")
  return segments.includes("..") ? undefined : segments
}
