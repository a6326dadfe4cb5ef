/**
 * Runs a process in a fresh sandbox: materialize its inputs through the sandboxer, link its named caches, spawn it
 * in its own process group with exactly its declared environment, capture stdout, stderr and its declared outputs,
 * and remove the sandbox once the whole group is gone. The group and the sandbox are adopted by the sandboxer, so
 * that they die with a SIGKILLed engine too.
 *
 * @internal
 */
import { Deferred, Duration, Effect, Option } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"
import * as Digest from "../../domain/Digest.js"
import { CHROOT, type Process, ProcessResult } from "../../domain/Process.js"
import { SandboxError } from "../../domain/Sandbox.js"
import type { StoreError } from "../../domain/StoreErrors.js"
import type * as Sandboxer from "../Sandboxer.js"
import type * as Sandboxes from "../Sandboxes.js"
import type * as Store from "../Store.js"
import { segmentsOf } from "./capture.js"
import { describeErrno } from "./errno.js"
import * as OutputSink from "./outputSink.js"
import * as ProcessGroup from "./processGroup.js"
import type { Runner } from "./runner.js"

/** @internal */
export interface LocalOptions {
  readonly namedCachesDir: string
  readonly grace: Duration.DurationInput
}

const substitute = (s: string, sandbox: string) => s.split(CHROOT).join(sandbox)

const prepare = (sandbox: string, process: Process, namedCachesDir: string) =>
  Effect.try({
    try: () => {
      const wd = path.join(sandbox, process.workingDirectory)
      fs.mkdirSync(wd, { recursive: true })
      for (const [name, rel] of Object.entries(process.namedCaches)) {
        const segments = segmentsOf(rel)
        if (segments === undefined || segments.length === 0) {
          throw new Error(`named cache path \`${rel}\` escapes the sandbox`)
        }
        const target = path.join(namedCachesDir, name)
        fs.mkdirSync(target, { recursive: true })
        const link = path.join(sandbox, ...segments)
        fs.mkdirSync(path.dirname(link), { recursive: true })
        fs.symlinkSync(target, link)
      }
      for (const out of [...process.outputFiles, ...process.outputDirectories]) {
        const segments = segmentsOf(out)
        if (segments === undefined) throw new Error(`output path \`${out}\` escapes the sandbox`)
        if (segments.length > 1) fs.mkdirSync(path.join(wd, ...segments.slice(0, -1)), { recursive: true })
      }
      return wd
    },
    catch: (e) =>
      new SandboxError({ reason: "Create", path: sandbox, detail: `cannot prepare the sandbox: ${describeErrno(e)}` })
  })

const storeOutput = (store: Store.Service, sink: OutputSink.Sink) =>
  sink.file !== undefined ? store.putFilePath(sink.file) : store.putFile(Buffer.concat(sink.chunks))

/** @internal */
export const make = (
  store: Store.Service,
  sandboxer: Sandboxer.Service,
  sandboxes: Sandboxes.Service,
  options: LocalOptions
): Runner =>
(process, _policy) =>
  Effect.scoped(Effect.gen(function*() {
    const started = Date.now()
    const timings: Record<string, number> = {}
    const phase = <A, E, R>(name: string, effect: Effect.Effect<A, E, R>) =>
      Effect.suspend(() => {
        const t = Date.now()
        return Effect.ensuring(effect, Effect.sync(() => void (timings[name] = Date.now() - t)))
      })

    // The release is registered before the sandbox, so it runs after the sandbox's removal: until then the
    // watchdog must still be able to remove it. One message releases both the sandbox and the group.
    const adopted: { pgid?: number } = {}
    yield* Effect.addFinalizer(() => sandboxer.notify("release", { sandbox: sandboxPath, ...adopted }))
    const sandbox = yield* sandboxes.make(process.description)
    const sandboxPath = sandbox.path
    yield* phase("materialize", sandboxer.materialize(process.inputDigest, sandbox.path, { adopt: true }))
    const cwd = yield* prepare(sandbox.path, process, options.namedCachesDir)
    const argv = process.argv.map((a) => substitute(a, sandbox.path))
    const env = Object.fromEntries(Object.entries(process.env).map(([k, v]) => [k, substitute(v, sandbox.path)]))
    yield* sandbox.setCommand({ argv, env, workingDirectory: process.workingDirectory })

    const runStarted = Date.now()
    const group = yield* ProcessGroup.spawnGroup({ argv, cwd, env }, options.grace)
    // Listen before anything else can yield: a pipe whose data nobody reads never reports its end.
    const stdout = OutputSink.collect(group.child.stdout!, "stdout")
    const stderr = OutputSink.collect(group.child.stderr!, "stderr")
    yield* Effect.addFinalizer(() => Effect.sync(() => (OutputSink.dispose(stdout), OutputSink.dispose(stderr))))
    adopted.pgid = group.pgid
    yield* sandboxer.notify("adopt", { pgid: group.pgid })

    const waited: Option.Option<ProcessGroup.Exit> = process.timeoutMs === undefined
      ? Option.some(yield* Deferred.await(group.exited))
      : yield* Effect.timeoutOption(Deferred.await(group.exited), Duration.millis(process.timeoutMs))
    const timedOut = Option.isNone(waited)
    // The leader exited (or timed out): end whatever is left of its group before reading outputs, so no straggler
    // writes into the sandbox while it is captured or removed.
    yield* ProcessGroup.terminate(group, timedOut ? options.grace : Duration.zero)
    const exit = Option.isSome(waited) ? waited.value : yield* Deferred.await(group.exited)
    yield* Deferred.await(stdout.done).pipe(Effect.timeout("5 seconds"), Effect.ignore)
    yield* Deferred.await(stderr.done).pipe(Effect.timeout("5 seconds"), Effect.ignore)
    timings.run = Date.now() - runStarted
    if (timedOut) {
      stderr.chunks.push(
        Buffer.from(
          `\nkiln: ${process.description} timed out after ${Duration.format(Duration.millis(process.timeoutMs!))}\n`
        )
      )
    }

    const captureStarted = Date.now()
    // Small stdout and stderr go in one putFiles call: one commit instead of two.
    const [stdoutDigest, stderrDigest] = stdout.file === undefined && stderr.file === undefined
      ? yield* store.putFiles([Buffer.concat(stdout.chunks), Buffer.concat(stderr.chunks)]) as Effect.Effect<
        [Digest.Digest, Digest.Digest],
        StoreError
      >
      : yield* Effect.all([storeOutput(store, stdout), storeOutput(store, stderr)])
    const outputDigest = yield* store.capture(cwd, {
      outputFiles: process.outputFiles,
      outputDirectories: process.outputDirectories
    })
    timings.capture = Date.now() - captureStarted
    const result = new ProcessResult({
      exitCode: timedOut ? null : exit.code,
      signal: timedOut ? "SIGTERM" : exit.signal,
      timedOut,
      stdoutDigest,
      stderrDigest,
      outputDigest,
      actionDigest: Digest.empty,
      durationMs: Date.now() - started,
      source: "ran",
      timings
    })
    if (!result.succeeded) yield* sandbox.markFailed
    return result
  }))
