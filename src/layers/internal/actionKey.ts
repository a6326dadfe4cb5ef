/**
 * The action cache key of a process: the REAPI `Action` digest over its `Command` (argv, sorted env, sorted output
 * paths, working directory), its input root, its timeout and a salt (kiln's cache version and the named caches'
 * layout). Argv and env keep the `{chroot}` placeholder, so the key does not depend on where the sandbox is.
 *
 * @internal
 */
import * as Action from "../../domain/Action.js"
import * as Digest from "../../domain/Digest.js"
import type { Process } from "../../domain/Process.js"

/** Bump to invalidate every cached result (a change in what a result means). @internal */
export const CACHE_VERSION = "kiln-action-cache-v1"

/** @internal */
export const actionDigest = (process: Process): Digest.Digest => {
  const command = Action.encodeCommand({
    arguments: process.argv,
    environmentVariables: process.env,
    outputFiles: process.outputFiles,
    outputDirectories: process.outputDirectories,
    workingDirectory: process.workingDirectory
  })
  const named = Object.keys(process.namedCaches).sort().map((k) => `${k}=${process.namedCaches[k]}`)
  return Digest.ofBytes(Action.encodeAction({
    commandDigest: Digest.ofBytes(command),
    inputRootDigest: process.inputDigest,
    ...(process.timeoutMs !== undefined ? { timeoutMs: process.timeoutMs } : {}),
    salt: Buffer.from(JSON.stringify([CACHE_VERSION, named]))
  }))
}
