/**
 * The stress test behind scripts/patch-lmdb.mjs's fourth fix: processes that each keep several LMDB environments
 * (kiln's store has one per shard) on a file system that is full, and commit to all of them at once, over and over:
 * every commit's page write fails with ENOSPC on its own thread, each formats its message into LMDB's one
 * process-wide `last_error`, and the JS thread takes it from there to report each failure. Formatting into
 * `last_error` itself while another thread took it crashed the process (SIGSEGV in `mdb_page_flush`).
 *
 *   node scripts/stress/lmdbErrorRace.mjs [seconds=20] [processes=4] [environments=8]
 *
 * Root only: each process gets a tmpfs of its own (2 MiB, under the system's temp dir), unmounted at the end. Prints
 * a JSON summary; exits 1 if any process died. With kiln's first version of the `write-error-message` fix, on a
 * 2-core box, five runs of the defaults but 5 s lost 18 of their 20 processes (SIGSEGV); with the fix, five runs lost
 * none, through about 530,000 failed commits. Under heavy load from other work, fewer commits fail and fewer
 * processes die (4 of 12).
 */
import { execFileSync, spawn } from "node:child_process"
import * as crypto from "node:crypto"
import * as fs from "node:fs"
import { createRequire } from "node:module"
import * as os from "node:os"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { envOptions } from "./envOptions.mjs"

const require = createRequire(import.meta.url)

/** Fills the file system holding `file` until not one more page fits. */
const fillDisk = (file) => {
  const fd = fs.openSync(file, "w")
  try {
    for (;;) fs.writeSync(fd, Buffer.alloc(4096))
  } catch (e) {
    if (e.code !== "ENOSPC") throw e
  } finally {
    fs.closeSync(fd)
  }
}

const worker = async (disk, seconds, environments) => {
  const lmdb = require("lmdb")
  // lmdb-js also rejects, for each failed commit, promises nobody holds (see kiln's lmdb/commit.ts); they are the
  // failures counted below.
  process.on("unhandledRejection", () => undefined)
  const envs = Array.from({ length: environments }, (_, i) => {
    const env = lmdb.open({ ...envOptions(path.join(disk, `env-${i}`), 1 << 26), noSync: true })
    env.putSync(Buffer.from("created"), Buffer.alloc(8))
    // As kiln's store does (lmdb/commit.ts `watch`): with a `beforecommit` listener, each commit calls back into the
    // JS thread, which then reports failures while other environments' commits are writing. Without one, 12
    // processes of the unfixed build ran 5 s each without a crash.
    env.on("beforecommit", () => queueMicrotask(() => env.committed.then(undefined, () => undefined)))
    return env
  })
  fillDisk(path.join(disk, "filler"))
  const deadline = Date.now() + seconds * 1000
  let rounds = 0
  let failed = 0
  let committed = 0
  while (Date.now() < deadline) {
    rounds++
    // One write per environment in one turn: their commits run at once, each on a thread of its own.
    const settled = await Promise.allSettled(
      envs.map((env) => env.put(crypto.randomBytes(32), crypto.randomBytes(3000)))
    )
    for (const s of settled) {
      if (s.status === "rejected") failed++
      else committed++
    }
  }
  process.stdout.write(`${JSON.stringify({ rounds, failed, committed })}\n`)
  // Not closed: an environment whose commit failed never settles the flush that close() waits for.
  process.exit(0)
}

const driver = async (seconds, processes, environments) => {
  if (process.getuid?.() !== 0) throw new Error("lmdbErrorRace mounts a tmpfs per process: run it as root")
  const root = fs.mkdtempSync(path.join(os.tmpdir(), "lmdb-error-race-"))
  const self = fileURLToPath(import.meta.url)
  const disks = Array.from({ length: processes }, (_, i) => path.join(root, `disk-${i}`))
  const results = []
  try {
    for (const disk of disks) {
      fs.mkdirSync(disk)
      execFileSync("mount", ["-t", "tmpfs", "-o", "size=2m", "tmpfs", disk])
    }
    await Promise.all(disks.map((disk) =>
      new Promise((resolve) => {
        // LMDB prints every failed page write on stderr: thousands of lines.
        const child = spawn(process.execPath, [self, "--worker", disk, String(seconds), String(environments)], {
          stdio: ["ignore", "pipe", "ignore"]
        })
        let out = ""
        child.stdout.on("data", (d) => (out += d))
        child.on("close", (code, signal) => {
          results.push(code === 0 ? JSON.parse(out) : { died: signal ?? `exit ${code}` })
          resolve()
        })
      })
    ))
  } finally {
    for (const disk of disks) {
      try {
        execFileSync("umount", [disk])
      } catch {
        // Never mounted: the mount above failed.
      }
    }
    fs.rmSync(root, { recursive: true, force: true })
  }
  const died = results.filter((r) => r.died !== undefined)
  const failed = results.reduce((n, r) => n + (r.failed ?? 0), 0)
  process.stdout.write(`${JSON.stringify({ processes, environments, failedCommits: failed, died })}\n`)
  process.exitCode = died.length > 0 ? 1 : 0
}

if (process.argv[2] === "--worker") {
  await worker(process.argv[3], Number(process.argv[4]), Number(process.argv[5]))
} else {
  await driver(Number(process.argv[2] ?? 20), Number(process.argv[3] ?? 4), Number(process.argv[4] ?? 8))
}
