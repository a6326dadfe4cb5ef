/**
 * A run that hashes its inputs for a while says so: off a TTY, a line when it starts and one when it ends, naming
 * the directory and counting the files. The next run, whose stat index vouches for them, says neither.
 * `KILN_HASHING_NOTICE_MS=0` makes any hashing count as a while.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"
import { runCli } from "../utils/cliRun.js"
import { tempDir } from "../utils/temp.js"

const FILES = 3000

const workspace = Effect.gen(function*() {
  const root = yield* tempDir("kiln-hashing-")
  const ws = path.join(root, "ws")
  // Modified a minute ago, on a whole second as `tar` and package managers leave every file they unpack: not racily
  // clean against the index the first run saves, though their ctimes are moments before it.
  const old = new Date(Math.floor(Date.now() / 1000) * 1000 - 60_000)
  for (let d = 0; d < FILES / 100; d++) {
    const dir = path.join(ws, "vendor", `pkg${d}`)
    fs.mkdirSync(dir, { recursive: true })
    for (let f = 0; f < 100; f++) {
      fs.writeFileSync(path.join(dir, `f${f}.js`), `module.exports = ${d * 100 + f}\n`)
      fs.utimesSync(path.join(dir, `f${f}.js`), old, old)
    }
  }
  fs.writeFileSync(
    path.join(ws, "kiln.json"),
    JSON.stringify({
      processes: {
        count: {
          argv: ["/bin/sh", "-c", "ls vendor > pkgs.txt"],
          inputs: ["vendor/**"],
          outputs: ["pkgs.txt"],
          env: { PATH: "/usr/bin:/bin" }
        }
      }
    })
  )
  fs.mkdirSync(path.join(root, "sandboxes"))
  const env = {
    ...process.env,
    KILN_STORE_DIR: path.join(root, "store"),
    KILN_SANDBOX_ROOT: path.join(root, "sandboxes"),
    KILN_NAMED_CACHES_DIR: path.join(root, "named"),
    KILN_HASHING_NOTICE_MS: "0"
  }
  const kiln = (args: ReadonlyArray<string> = []) => runCli(["run", "--progress", "plain", ...args], { cwd: ws, env })
  return { kiln }
})

const hashingLines = (stderr: string) => stderr.split("\n").filter((l) => /^kiln: hash/.test(l))

describe("hashing progress", () => {
  it.scoped("the first run says when hashing starts and ends; runs over a warm stat index say nothing of it", () =>
    Effect.gen(function*() {
      const { kiln } = yield* workspace
      const cold = yield* kiln()
      assert.strictEqual(cold.code, 0, cold.stderr)
      const lines = hashingLines(cold.stderr)
      assert.strictEqual(lines.length, 2, cold.stderr)
      assert.strictEqual(lines[0], "kiln: hashing inputs: vendor/ (once: later runs read the stat index)")
      assert.match(
        lines[1]!,
        /^kiln: hashed 3,000 input files, [\d.]+ MB in [\d.]+s: vendor\/ 3,000 \(once: later runs read the stat index\)$/
      )
      // Both before the process ran: its inputs are hashed first.
      assert.isBelow(cold.stderr.indexOf(lines[1]!), cold.stderr.indexOf("✓ count"))

      // Answered from the run memo, and a run that looks again (its cache off) reads the stat index instead.
      for (const args of [[], ["--cache", "off"]]) {
        const warm = yield* kiln(args)
        assert.strictEqual(warm.code, 0, warm.stderr)
        assert.match(warm.stderr, /✓ count/)
        assert.deepStrictEqual(hashingLines(warm.stderr), [], warm.stderr)
      }
    }))
})
