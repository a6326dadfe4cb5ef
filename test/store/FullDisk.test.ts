/**
 * A full disk, for a program that uses `Store.layer` as a library: no `unhandledRejection` handler of its own (the
 * CLI has none either), and every failure a typed `StoreError` where a write is awaited. The disk is a real 2 MiB
 * tmpfs (root only, as CI runs); elsewhere the test is skipped, visibly.
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
  "fullDiskWorker.mjs"
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
    return yield* Effect.async<{ code: number | null; stdout: string; stderr: string }>((resume) => {
      child.once("close", (code) => resume(Effect.succeed({ code, stdout, stderr })))
    })
  }))

describe("Store on a full disk", () => {
  it.scopedLive.skipIf(!isRoot)(
    "failed commits are typed StoreErrors, and no lmdb-js promise is left to reject unhandled",
    () =>
      Effect.gen(function*() {
        const disk = yield* tmpfs(path.join(yield* tempDir("kiln-full-"), "disk"), "2m")
        const r = yield* runToEnd([path.join(disk, "store"), path.join(disk, "filler")])
        assert.notInclude(r.stderr, "Commit failed", r.stderr)
        assert.strictEqual(r.code, 0, `${r.stdout}\n${r.stderr}`)
        const done = r.stdout.split("\n").find((l) => l.startsWith("DONE "))
        assert.isDefined(done, r.stdout)
        const failures = JSON.parse(done!.slice(5)) as Array<{ tag: string; reason: string; message: string }>
        // The premise: commits that LMDB itself failed (not only writes the store refused before trying).
        const commits = failures.filter((f) => f.message.endsWith("write failed: no space left on device (ENOSPC)"))
        assert.isAbove(commits.length, 0, JSON.stringify(failures))
        for (const f of failures) {
          assert.strictEqual(f.tag, "StoreError")
          assert.strictEqual(f.reason, "NoSpace", f.message)
          assert.include(f.message, disk)
        }
      }),
    { timeout: 120_000 }
  )
})
