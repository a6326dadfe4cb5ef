/**
 * The action cache key of a process: the REAPI `Action` digest over its `Command` (argv, sorted env, sorted output
 * paths, working directory), its input root, its timeout and a salt (kiln's cache version, the named caches' layout,
 * the cache namespace, an `outputSymlinks: "any"` allowance, the exec root, and the host paths and network the
 * process declared). Argv and env keep the `{chroot}`
 * placeholder, so the key does not depend on where the sandbox is, only on the path the process sees it at: the
 * exec root where it is pinned, else none (a random path).
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
export const actionDigest = (proc: Process): Digest.Digest => {
  let digest = known.get(proc)
  if (digest === undefined) {
    digest = compute(proc)
    known.set(proc, digest)
  }
  return digest
}

const compute = (proc: Process): Digest.Digest => Digest.ofBytes(actionMessages(proc).action)

/**
 * The serialized `Command` and `Action` whose digest is the process's key: a remote cache stores them beside the
 * result, as Bazel does.
 *
 * @internal
 */
export const actionMessages = (proc: Process): { readonly command: Uint8Array; readonly action: Uint8Array } => {
  // In the Command (REAPI 2.0 servers read it there) and the Action (2.2 and later); absent when there is none.
  const properties = Object.entries(proc.platform).map(([name, value]) => ({ name, value }))
  const platform = properties.length > 0 ? { properties } : undefined
  const command = Action.encodeCommand({
    arguments: proc.argv,
    environmentVariables: proc.env,
    outputFiles: proc.outputFiles,
    outputDirectories: proc.outputDirectories,
    workingDirectory: proc.workingDirectory,
    ...(platform !== undefined ? { platform } : {})
  })
  const named = Object.keys(proc.namedCaches).sort().map((k) => `${k}=${proc.namedCaches[k]}`)
  const action = Action.encodeAction({
    commandDigest: Digest.ofBytes(command),
    inputRootDigest: proc.inputDigest,
    ...(proc.timeoutMs !== undefined ? { timeoutMs: proc.timeoutMs } : {}),
    ...(proc.cache === "never" ? { doNotCache: true } : {}),
    ...(platform !== undefined ? { platform } : {}),
    salt: Buffer.from(
      JSON.stringify([
        CACHE_VERSION,
        named,
        ...(proc.cacheNamespace !== undefined && proc.cacheNamespace !== "" ? [proc.cacheNamespace] : []),
        // Only when allowed, so that every other key stays as it was: an entry whose links may point anywhere is
        // never one a `contained` process looks up.
        ...(proc.outputSymlinks === "any" ? [{ outputSymlinks: "any" }] : []),
        // Only when pinned: a process with no exec root keeps the key it had before there was one.
        ...(proc.execRoot !== undefined ? [{ execRoot: proc.execRoot }] : []),
        // Only when declared, for the same reason: the default sandbox (no host path, no network) keeps every key.
        ...(proc.hostPaths.length > 0 ? [{ hostPaths: proc.hostPaths }] : []),
        ...(proc.network ? [{ network: true }] : [])
      ])
    )
  })
  return { command, action }
}
