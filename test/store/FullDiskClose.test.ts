/**
 * A full disk under a page write of LMDB's: lmdb-js formats a message for the failed write, and its unfixed code
 * wrote that message past the 100 bytes it allocated, corrupting the heap; glibc then aborted the process (SIGABRT,
 * exit 134: `corrupted size vs. prev_size`, `free(): invalid pointer`) in the failed commit or in the environment's
 * close. kiln's install fixes that in LMDB's source (`write-error-message` in scripts/patch-lmdb.mjs). The disk is a
 * real 64 MiB tmpfs (root only, as CI runs); elsewhere the test is skipped, visibly.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { spawn } from "node:child_process"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { tempDir } from "../utils/temp.js"
import { isRoot, tmpfs } from "../utils/tmpfs.js"

const worker = path.resolve(
  path.dirname(fileURLToPath(import.meta.url)),
  "..",
  "..",
  ".kiln-test",
  "fixtures",
  "fullDiskCloseWorker.mjs"
)

const runToEnd = (args: ReadonlyArray<string>) =>
  Effect.scoped(Effect.gen(function*() {
    const child = yield* Effect.acquireRelease(
      Effect.sync(() => spawn(process.execPath, [worker, ...args], { stdio: ["ignore", "pipe", "pipe"] })),
      (child) => Effect.sync(() => child.exitCode === null && child.signalCode === null && child.kill("SIGKILL"))
    )
    let stdout = ""
    let stderr = ""
    child.stdout.on("data", (d) => (stdout += d))
    child.stderr.on("data", (d) => (stderr += d))
    return yield* Effect.async<{ code: number | null; signal: string | null; stdout: string; stderr: string }>(
      (resume) => {
        child.once("close", (code, signal) => resume(Effect.succeed({ code, signal, stdout, stderr })))
      }
    )
  }))

const ROUNDS = 5
/**
 * What unfixed lmdb-js's `malloc(100)` for the message gives on glibc (x86-64): 104 usable bytes, then the size of
 * the next heap chunk, which an unbounded `sprintf` of a longer message overwrote.
 */
const UNFIXED_USABLE_BYTES = 104
const WRITE_ERROR = /^No space left on device: (Attempting to write page at position \d+, size \d+, blocks \d+, .*)$/

describe("Store on a full disk, closing", () => {
  it.scopedLive.skipIf(!isRoot)(
    "an LMDB page write failed by a full disk leaves the heap intact: the environment closes, the process lives on",
    () =>
      Effect.gen(function*() {
        const disk = yield* tmpfs(path.join(yield* tempDir("kiln-fullclose-"), "disk"), "64m")
        const r = yield* runToEnd([disk, String(ROUNDS)])
        const output = `${r.stdout}\n${r.stderr}`
        // Unfixed: SIGABRT from glibc's heap checks, in the first round.
        assert.isNull(r.signal, output)
        assert.strictEqual(r.code, 0, output)
        assert.notMatch(r.stderr, /corrupted|invalid pointer|double free|malloc\(\)/, output)
        const done = r.stdout.split("\n").find((l) => l.startsWith("DONE "))
        assert.isDefined(done, output)
        const messages = JSON.parse(done!.slice(5)) as Array<string>
        assert.lengthOf(messages, ROUNDS)
        for (const message of messages) {
          // The premise: LMDB's page write failed, and the message it formats for it (with its terminating NUL) runs
          // past the buffer the unfixed code gave it.
          const written = WRITE_ERROR.exec(message)
          assert.isNotNull(written, message)
          assert.isAbove(written![1]!.length + 1, UNFIXED_USABLE_BYTES, message)
        }
      }),
    { timeout: 120_000 }
  )
})
