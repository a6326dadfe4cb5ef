/**
 * The action cache key of a process: the REAPI `Action` digest over its `Command` (argv, sorted env, sorted output
 * paths, working directory), its input root, its timeout and a salt (kiln's cache version, the named caches' layout,
 * the cache namespace and an `outputSymlinks: "any"` allowance). Argv and env keep the `{chroot}` placeholder, so the key does not depend on where the sandbox is.
 *
 * @internal
 */
import * as Action from "./Action.js"
import * as Digest from "./Digest.js"
import type { Process } from "./Process.js"

/** Bump to invalidate every cached result (a change in what a result means). @internal */
export const CACHE_VERSION = "kiln-action-cache-v1"

/**
 * Computed once per Process (immutable): the engine records it and the runner looks it up with it, and a cache hit
 * spent a tenth of its time encoding and hashing the same Command and Action again.
 */
const known = new WeakMap<Process, Digest.Digest>()

/** @internal */
export const actionDigest = (process: Process): Digest.Digest => {
  let digest = known.get(process)
  if (digest === undefined) {
    digest = compute(process)
    known.set(process, digest)
  }
  return digest
}

const compute = (process: Process): Digest.Digest => Digest.ofBytes(actionMessages(process).action)

/**
 * The serialized `Command` and `Action` whose digest is the process's key: a remote cache stores them beside the
 * result, as Bazel does.
 *
 * @internal
 */
export const actionMessages = (process: Process): { readonly command: Uint8Array; readonly action: Uint8Array } => {
  // In the Command (REAPI 2.0 servers read it there) and the Action (2.2 and later); absent when there is none.
  const properties = Object.entries(process.platform).map(([name, value]) => ({ name, value }))
  const platform = properties.length > 0 ? { properties } : undefined
  const command = Action.encodeCommand({
    arguments: process.argv,
    environmentVariables: process.env,
    outputFiles: process.outputFiles,
    outputDirectories: process.outputDirectories,
    workingDirectory: process.workingDirectory,
    ...(platform !== undefined ? { platform } : {})
  })
  const named = Object.keys(process.namedCaches).sort().map((k) => `${k}=${process.namedCaches[k]}`)
  const action = Action.encodeAction({
    commandDigest: Digest.ofBytes(command),
    inputRootDigest: process.inputDigest,
    ...(process.timeoutMs !== undefined ? { timeoutMs: process.timeoutMs } : {}),
    ...(process.cache === "never" ? { doNotCache: true } : {}),
    ...(platform !== undefined ? { platform } : {}),
    salt: Buffer.from(
      JSON.stringify([
        CACHE_VERSION,
        named,
        ...(process.cacheNamespace !== undefined && process.cacheNamespace !== "" ? [process.cacheNamespace] : []),
        // Only when allowed, so that every other key stays as it was: an entry whose links may point anywhere is
        // never one a `contained` process looks up.
        ...(process.outputSymlinks === "any" ? [{ outputSymlinks: "any" }] : [])
      ])
    )
  })
  return { command, action }
}
