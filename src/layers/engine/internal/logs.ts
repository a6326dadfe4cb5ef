/**
 * `Engine.logs`: a process's stdout and stderr as its last recorded run left them in the store (a hit's are those of
 * the cached result it took), found through the workspace's run records, as `kiln explain` finds its last run.
 *
 * @internal
 */
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as path from "node:path"
import * as Digest from "../../../domain/Digest.js"
import type { Store } from "../../store/Store.js"
import type { ProcessLogs } from "../Engine.js"
import * as RunRecords from "./runRecords.js"

/**
 * What the last run of `name` printed: `"unrecorded"` when the workspace has no run of it on this store (or one
 * recorded before kiln kept logs), a `MissingDigest` when the store no longer holds them.
 *
 * @internal
 */
export const logs = (store: Store["Type"], options: { readonly workspace: string; readonly name: string }) =>
  Effect.gen(function*() {
    const record = RunRecords.read(store.options.root, path.resolve(options.workspace))[options.name]
    if (record?.stdout === undefined || record.stderr === undefined) return "unrecorded" as const
    const stdoutDigest = Either.getOrUndefined(Digest.parse(record.stdout))
    const stderrDigest = Either.getOrUndefined(Digest.parse(record.stderr))
    if (stdoutDigest === undefined || stderrDigest === undefined) return "unrecorded" as const
    const [stdout, stderr] = yield* Effect.zip(store.getFile(stdoutDigest), store.getFile(stderrDigest))
    return {
      actionDigest: record.actionDigest,
      ...(record.failed !== undefined ? { failed: record.failed } : {}),
      stdoutDigest,
      stderrDigest,
      stdout,
      stderr
    } satisfies ProcessLogs
  })
