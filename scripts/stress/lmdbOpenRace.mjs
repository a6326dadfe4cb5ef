/**
 * The stress test behind scripts/patch-lmdb.mjs: short-lived processes that open one LMDB environment (with the
 * options kiln's store uses), write small values with async puts (some keys shared between processes), check that
 * what they wrote or saw is still there a turn later, and close, while others come and go, so that the environment is
 * opened all the time with commits in flight. At the end every write whose promise resolved must still be present.
 *
 *   node scripts/stress/lmdbOpenRace.mjs [seconds=60] [processes=6]
 *   PREBUILDS_ONLY=1 node scripts/stress/lmdbOpenRace.mjs   # lmdb's prebuilt addon, without the fix
 *
 * Prints a JSON summary; exits 1 if any resolved write was lost or any process failed. With the prebuilt addon of
 * lmdb 3.5.6 it lost whole committed transactions within minutes on a 2-core box (9 to 27 keys per 90-180 s run);
 * with the fixed build, none in 4,400 processes.
 */
import { spawn } from "node:child_process"
import { createHash, randomBytes } from "node:crypto"
import * as fs from "node:fs"
import { createRequire } from "node:module"
import * as os from "node:os"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { envOptions } from "./envOptions.mjs"

const require = createRequire(import.meta.url)
const options = (dir) => envOptions(dir, 1 << 30)
const valueOf = (key) => Buffer.concat([createHash("sha512").update(key).digest(), Buffer.alloc(91, key)])
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))
const below = (n) => Math.floor(Math.random() * n)

const worker = async (envDir, logDir) => {
  const env = require("lmdb").open(options(envDir))
  const [content, leases] = ["content", "leases"].map((name) =>
    env.openDB({ name, encoding: "binary", keyEncoding: "binary" })
  )
  const held = new Set()
  for (let round = 0; round < 3; round++) {
    const keys = new Set()
    for (let i = 5 + below(20); i > 0; i--) keys.add(`s${below(3000)}`)
    for (let i = 2 + below(10); i > 0; i--) keys.add(`u${process.pid}-${round}-${i}-${randomBytes(3).toString("hex")}`)
    // One read pass, then writes of what it did not find: kiln's putBatch does the same.
    const absent = [...keys].filter((k) => {
      if (content.get(Buffer.from(k)) === undefined) return true
      held.add(k)
      return false
    })
    await Promise.all([
      ...absent.map((k) => content.put(Buffer.from(k), valueOf(k))),
      leases.put(Buffer.from(`lease-${below(50)}`), randomBytes(16))
    ])
    absent.forEach((k) => held.add(k))
    fs.appendFileSync(path.join(logDir, "resolved"), absent.map((k) => `${k}\n`).join(""))
    await sleep(below(30))
    const lost = [...held].filter((k) => content.get(Buffer.from(k)) === undefined)
    if (lost.length > 0) {
      lost.forEach((k) => held.delete(k))
      fs.appendFileSync(path.join(logDir, "lost"), lost.map((k) => `${process.pid} ${k}\n`).join(""))
    }
    await sleep(below(100))
  }
  await env.flushed
  await env.close()
}

const driver = async (seconds, processes) => {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), "lmdb-open-race-"))
  const envDir = path.join(root, "env")
  fs.mkdirSync(envDir)
  for (const f of ["resolved", "lost"]) fs.writeFileSync(path.join(root, f), "")
  const deadline = Date.now() + seconds * 1000
  const live = new Set()
  let started = 0
  let failed = 0
  const self = fileURLToPath(import.meta.url)
  process.on("SIGINT", () => {
    for (const c of live) c.kill("SIGKILL")
    fs.rmSync(root, { recursive: true, force: true })
    process.exit(130)
  })
  const loop = async () => {
    while (Date.now() < deadline) {
      started++
      const child = spawn(process.execPath, [self, "--worker", envDir, root], {
        stdio: ["ignore", "ignore", "inherit"]
      })
      live.add(child)
      const code = await new Promise((resolve) => child.on("exit", (c) => resolve(c)))
      live.delete(child)
      if (code !== 0) failed++
      // Now and then a gap, so that the environment is sometimes opened by a first (exclusive) opener too.
      if (Math.random() < 0.3) await sleep(below(300))
    }
  }
  await Promise.all(Array.from({ length: processes }, (_, i) => sleep(i * 40).then(loop)))
  const env = require("lmdb").open(options(envDir))
  const content = env.openDB({ name: "content", encoding: "binary", keyEncoding: "binary" })
  const resolved = [...new Set(fs.readFileSync(path.join(root, "resolved"), "utf8").split("\n").filter(Boolean))]
  const missing = resolved.filter((k) => content.get(Buffer.from(k)) === undefined)
  await env.close()
  const seenLost = fs.readFileSync(path.join(root, "lost"), "utf8").split("\n").filter(Boolean).length
  fs.rmSync(root, { recursive: true, force: true })
  const summary = {
    seconds,
    processes,
    started,
    failed,
    resolvedWrites: resolved.length,
    missingAtEnd: missing.length,
    seenLost
  }
  process.stdout.write(`${JSON.stringify(summary)}\n`)
  process.exit(missing.length > 0 || seenLost > 0 || failed > 0 ? 1 : 0)
}

if (process.argv[2] === "--worker") await worker(process.argv[3], process.argv[4])
else await driver(Number(process.argv[2] ?? 60), Number(process.argv[3] ?? 6))
