/**
 * A FIFO where a walk expects a file: the snapshot lists (or `lstat`s) before it opens, but a FIFO swapped in between
 * (a tool, a user) reaches the open. A blocking `O_RDONLY` open of a FIFO waits for a writer, forever: the run hangs.
 * The read is driven in a child process (the built module, as the CLI runs it) with a deadline, so that a hang fails
 * this test instead of stalling the suite's worker.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import * as childProcess from "node:child_process"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { tempDir } from "../utils/temp.js"

const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..")

/** Reads `file` as a snapshot reads a file it listed, without a stat index (straight to the open). */
const script = `
import { Effect } from "effect"
import { readFileNode } from "./dist/layers/store/internal/walks/walkFile.js"
const step = readFileNode({ core: undefined, filter: undefined, batch: undefined }, process.argv[1], false)
const exit = Effect.isEffect(step) ? Effect.runSyncExit(step) : { _tag: "Success" }
process.stdout.write(exit._tag === "Failure" ? String(exit.cause) : "read")
`

describe("a walk's read of a FIFO", () => {
  it.scoped("is refused at once (not a regular file), not waited on", () =>
    Effect.gen(function*() {
      const dir = yield* tempDir("kiln-fifo-")
      const fifo = path.join(dir, "looks-like-a-file.txt")
      childProcess.execFileSync("mkfifo", [fifo])
      const child = childProcess.spawnSync(
        process.execPath,
        ["--input-type=module", "-e", script, fifo],
        { cwd: repo, encoding: "utf8", timeout: 20_000 }
      )
      assert.isNull(child.error ?? null, "the read waited on the FIFO until the deadline")
      assert.strictEqual(child.status, 0, child.stderr)
      assert.match(child.stdout, /not a regular file/)
    }))
})
