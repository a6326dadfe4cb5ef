/**
 * The fault harness's quick preset (`scripts/chaos/`), end to end on the built CLI: concurrent runs, then runs
 * killed with SIGINT and SIGKILL beside bystanders, and nothing left behind.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { spawn, spawnSync } from "node:child_process"
import * as path from "node:path"
import { remoteServers } from "../utils/remote.js"

const FIGURES = [
  "bystander failures",
  "hung",
  "stale readers",
  "orphaned sandboxers",
  "leaked sandboxes",
  "leftover sockets",
  "stray processes",
  "store check"
]

/** Runs the harness; on interruption (the test's timeout) SIGTERMs it, which stops its runs and removes its root. */
const chaos = (args: ReadonlyArray<string>) =>
  Effect.async<{ readonly code: number | null; readonly stdout: string; readonly stderr: string }>((resume) => {
    const child = spawn(process.execPath, [path.resolve("dist/chaos/chaos.mjs"), ...args], {
      stdio: ["ignore", "pipe", "pipe"]
    })
    let stdout = ""
    let stderr = ""
    child.stdout.on("data", (d) => (stdout += d))
    child.stderr.on("data", (d) => (stderr += d))
    child.once("close", (code) => resume(Effect.succeed({ code, stdout, stderr })))
    return Effect.sync(() => void child.kill("SIGTERM"))
  })

/** The table's rows as `header → cell` records. */
const parseTable = (stdout: string) => {
  const lines = stdout.split("\n").filter((l) => l.startsWith("|"))
  const cells = (line: string) => line.slice(1, -1).split("|").map((c) => c.trim())
  const [header, _separator, ...rows] = lines
  assert.isDefined(header, stdout)
  const names = cells(header!)
  return { names, rows: rows.map((row) => Object.fromEntries(cells(row).map((c, i) => [names[i]!, c]))) }
}

/** The harness with `args` leaves every figure of every round at zero. */
const allZero = (args: ReadonlyArray<string>) =>
  Effect.gen(function*() {
    // `npm test` builds dist/cli.js; the harness's bundle is built here.
    const build = spawnSync(process.execPath, ["scripts/build.mjs"], { encoding: "utf8" })
    assert.strictEqual(build.status, 0, build.stderr)
    const { code, stderr, stdout } = yield* chaos(args)
    assert.strictEqual(code, 0, `${stdout}\n${stderr}`)
    const { names, rows } = parseTable(stdout)
    assert.deepStrictEqual(names.slice(-FIGURES.length), FIGURES)
    assert.deepStrictEqual(rows.map((r) => r.kind), ["concurrency", "kill", ""])
    assert.strictEqual(rows.at(-1)!.round, "total")
    for (const row of rows) {
      for (const figure of FIGURES) assert.strictEqual(row[figure], "0", `${figure} in round ${row.round}\n${stdout}`)
    }
    assert.include(stdout, "chaos: every figure is zero")
  })

describe("chaos --quick", () => {
  it.live("a concurrency round and a kill round leave every figure at zero", () => allZero(["--quick"]), {
    timeout: 180_000
  })

  // Fewer and shorter long runs: their processes queue for the worker's 4 jobs.
  it.live("with --remote-executor (Bazel's worker on 127.0.0.1), every figure is zero too", () =>
    allZero([
      "--quick",
      "--remote-executor",
      remoteServers().reapiUrl,
      "--long-runs",
      "2",
      "--bystanders",
      "2",
      "--long-secs",
      "1"
    ]), { timeout: 180_000 })
})
