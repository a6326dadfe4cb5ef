/**
 * The stress test behind scripts/patch-lmdb.mjs's second fix: processes that each keep opening one LMDB environment
 * (with the options kiln's store uses), committing one synchronous write transaction and closing it again, so that
 * one of them is often closing the environment alone while another is opening it. lmdb-js 3.5.6's LMDB destroys the
 * robust mutexes in `lock.mdb` when a process closes the environment as its last user; an opener that waited for its
 * shared file lock meanwhile then uses the destroyed mutexes, and its write transactions fail with EINVAL.
 *
 *   node scripts/stress/lmdbCloseRace.mjs [seconds=20] [processes=4]
 *   PREBUILDS_ONLY=1 node scripts/stress/lmdbCloseRace.mjs   # lmdb's prebuilt addon, without the fix
 *
 * Prints a JSON summary; exits 1 if any cycle failed. The window is a few microseconds (the closer's exclusive lock
 * until it closes `lock.mdb`), so it takes a busy machine to hit it: on a 2-core box under load, 4 processes for 20 s
 * with the unfixed build failed 139 of 7,230 cycles ("Invalid argument"); on an idle one, none in 20,000. With a
 * 2 ms sleep injected into LMDB's close while it holds that lock, 3 processes for 3 s failed 1,354 of 2,861 cycles
 * with the unfixed build and none of 1,686 with the fix.
 */
import { spawn } from "node:child_process"
import * as fs from "node:fs"
import { createRequire } from "node:module"
import * as os from "node:os"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { envOptions } from "./envOptions.mjs"

const require = createRequire(import.meta.url)
const options = (dir) => envOptions(dir, 1 << 26)

const worker = async (envDir, seconds) => {
  const lmdb = require("lmdb")
  const deadline = Date.now() + seconds * 1000
  const key = Buffer.from(`k${process.pid}`)
  let cycles = 0
  let failures = 0
  let first
  while (Date.now() < deadline) {
    cycles++
    let env
    try {
      env = lmdb.open(options(envDir))
      env.transactionSync(() => env.putSync(key, Buffer.from(String(cycles))))
    } catch (e) {
      failures++
      first ??= e instanceof Error ? e.message : String(e)
    }
    if (env !== undefined) await env.close()
  }
  process.stdout.write(`${JSON.stringify({ cycles, failures, ...(first !== undefined ? { first } : {}) })}\n`)
}

const driver = async (seconds, processes) => {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), "lmdb-close-race-"))
  const envDir = path.join(root, "env")
  fs.mkdirSync(envDir)
  const self = fileURLToPath(import.meta.url)
  const children = Array.from(
    { length: processes },
    () => spawn(process.execPath, [self, "--worker", envDir, String(seconds)], { stdio: ["ignore", "pipe", "inherit"] })
  )
  process.on("SIGINT", () => {
    for (const c of children) c.kill("SIGKILL")
    fs.rmSync(root, { recursive: true, force: true })
    process.exit(130)
  })
  const results = await Promise.all(children.map((child) =>
    new Promise((resolve) => {
      let out = ""
      child.stdout.on("data", (d) => (out += d))
      child.on("close", (code) => {
        try {
          resolve({ code, ...JSON.parse(out) })
        } catch {
          resolve({ code, cycles: 0, failures: 1, first: `no summary (exit ${code})` })
        }
      })
    })
  ))
  fs.rmSync(root, { recursive: true, force: true })
  const summary = {
    seconds,
    processes,
    cycles: results.reduce((n, r) => n + r.cycles, 0),
    failures: results.reduce((n, r) => n + r.failures, 0),
    exitedNonZero: results.filter((r) => r.code !== 0).length,
    first: results.find((r) => r.first !== undefined)?.first
  }
  process.stdout.write(`${JSON.stringify(summary)}\n`)
  process.exit(summary.failures > 0 || summary.exitedNonZero > 0 ? 1 : 0)
}

if (process.argv[2] === "--worker") await worker(process.argv[3], Number(process.argv[4]))
else await driver(Number(process.argv[2] ?? 20), Number(process.argv[3] ?? 4))
