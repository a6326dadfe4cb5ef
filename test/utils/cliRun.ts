/**
 * The built `kiln` CLI run to its end, and what the hostile tests assert of a refusal: shared by the tests that
 * attack kiln through its command line.
 */
import { assert } from "@effect/vitest"
import { Effect } from "effect"
import { spawn } from "node:child_process"
import { cli } from "./stack.js"

/** How a CLI run ended, and all it printed. */
export interface CliResult {
  readonly code: number | null
  readonly signal: NodeJS.Signals | null
  readonly stdout: string
  readonly stderr: string
}

/**
 * Runs `kiln ARGS` in `cwd` with exactly `env` (and as `uid`, when given) to its end. It is SIGKILLed if the test is
 * interrupted first: a hung kiln fails its test, never the suite.
 */
export const runCli = (
  args: ReadonlyArray<string>,
  options: { readonly cwd: string; readonly env: NodeJS.ProcessEnv; readonly uid?: number }
): Effect.Effect<CliResult> =>
  Effect.scoped(Effect.gen(function*() {
    const child = yield* Effect.acquireRelease(
      Effect.sync(() =>
        spawn(process.execPath, [cli, ...args], {
          cwd: options.cwd,
          stdio: ["ignore", "pipe", "pipe"],
          env: options.env,
          ...(options.uid !== undefined ? { uid: options.uid, gid: options.uid } : {})
        })
      ),
      (child) => Effect.sync(() => child.exitCode === null && child.signalCode === null && child.kill("SIGKILL"))
    )
    let stdout = ""
    let stderr = ""
    child.stdout!.on("data", (d) => (stdout += d))
    child.stderr!.on("data", (d) => (stderr += d))
    return yield* Effect.async<CliResult>((resume) => {
      child.once("close", (code, signal) => resume(Effect.succeed({ code, signal, stdout, stderr })))
    })
  }))

/**
 * Asserts that kiln failed by itself (no signal) with `code`, and that what it said on stderr is exactly one line
 * matching `line`, apart from `kiln run`'s tally and the processes that succeeded.
 */
export const failsWith = (r: CliResult, code: number, line: RegExp) => {
  assert.isNull(r.signal, `killed by ${r.signal}: ${r.stderr}`)
  assert.strictEqual(r.code, code, r.stderr)
  // A config error quotes the file's line, and a caret under the place, indented: not lines of kiln's own.
  const said = r.stderr.split("\n").filter((l) =>
    l !== "" && !/^kiln: \d+ process(es)?: /.test(l) && !l.startsWith("✓ ") && !l.startsWith("  ")
  )
  assert.strictEqual(said.length, 1, `one line expected, got:\n${r.stderr}`)
  assert.match(said[0]!, line)
}
