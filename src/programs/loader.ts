/**
 * `dist/cli.js`: loads the bundled CLI (`kiln.cjs`) through `vm.Script` with the V8 code cache written beside it at
 * build time, so start-up skips parsing and compiling the bundle. A cache that V8 rejects (another Node version)
 * only costs the compile it would have saved.
 *
 * Before that, a `kiln run` is checked against the run memo (`noop.ts`): a run where nothing changed is answered
 * without loading the bundle at all; one that will run processes starts its spawner first (`warmSpawner.ts`). Both
 * are plain code, kept out of the bundle: loading Effect is what they save.
 *
 * It does not start the sandboxer early (it once did): a process no longer waits for the sandboxer unless it needs
 * a large tree written, and on a 2-core machine a whole second kiln starting up beside the engine slowed the
 * engine's own start by more than it saved (an edit run of a 500-process workspace: 376 -> 324 ms).
 */
import * as fs from "node:fs"
import { createRequire } from "node:module"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import * as vm from "node:vm"
import { startWarm } from "../layers/internal/warmSpawner.js"
import * as Noop from "./noop.js"

const here = path.dirname(fileURLToPath(import.meta.url))
const bundle = path.join(here, "kiln.cjs")
// How kiln runs itself (the sandboxer is `kiln sandboxer`), whatever name or symlink it was started through.
process.env.KILN_CLI = path.join(here, "cli.js")
// lmdb loads msgpackr, which looks for and loads a native msgpack decoder at start-up (10-15 ms); kiln stores only
// binary values and never decodes msgpack.
process.env.MSGPACKR_NATIVE_ACCELERATION_DISABLED ??= "true"

/**
 * The libc this executable runs on, from its ELF interpreter (`/lib64/ld-linux-x86-64.so.2`, or a musl one), or
 * undefined when unsure. lmdb picks its native addon by it and asks detect-libc, which costs 2-4 ms of a run's
 * start-up (three more modules) to read the same thing; with LIBC set it does not ask.
 */
const libcOfSelf = (): string | undefined => {
  try {
    const head = Buffer.alloc(4096)
    const fd = fs.openSync("/proc/self/exe", "r")
    try {
      fs.readSync(fd, head, 0, head.length, 0)
    } finally {
      fs.closeSync(fd)
    }
    // A little-endian 64-bit ELF (x64, arm64); anything else is left to detect-libc.
    if (head.readUInt32BE(0) !== 0x7f454c46 || head[4] !== 2 || head[5] !== 1) return undefined
    const phoff = Number(head.readBigUInt64LE(32))
    const phentsize = head.readUInt16LE(54)
    for (let i = 0, n = head.readUInt16LE(56); i < n; i++) {
      const p = phoff + i * phentsize
      if (p + 40 > head.length) return undefined
      if (head.readUInt32LE(p) !== 3) continue // PT_INTERP
      const offset = Number(head.readBigUInt64LE(p + 8))
      const size = Number(head.readBigUInt64LE(p + 32))
      if (offset + size > head.length) return undefined
      const interpreter = head.toString("latin1", offset, offset + size)
      return interpreter.includes("musl") ? "musl" : interpreter.includes("/ld-linux") ? "glibc" : undefined
    }
  } catch {
    // Not Linux, or no /proc: detect-libc decides.
  }
  return undefined
}
if (process.platform === "linux" && process.env.LIBC === undefined) {
  const libc = libcOfSelf()
  if (libc !== undefined) process.env.LIBC = libc
}

// Read once and not passed on: the sandboxer this process starts must not write the cache too.
const writeCodeCache = process.env.KILN_WRITE_CODE_CACHE === "1"
delete process.env.KILN_WRITE_CODE_CACHE

const load = () => {
  const cacheFile = `${bundle}.cache`
  const source = fs.readFileSync(bundle, "utf8")
  let cachedData: Buffer | undefined
  try {
    cachedData = fs.readFileSync(cacheFile)
  } catch {
    // No cache (a fresh build, or a copy without it): compile from source.
  }
  const wrapper = `(function (exports, require, module, __filename, __dirname) {${source}\n})`
  const script = new vm.Script(wrapper, {
    filename: bundle,
    ...(cachedData !== undefined ? { cachedData } : {})
  })
  const module = { exports: {} }
  const fn = script.runInThisContext() as (...args: Array<unknown>) => void
  if (writeCodeCache) process.once("beforeExit", () => fs.writeFileSync(cacheFile, script.createCachedData()))
  fn(module.exports, createRequire(bundle), module, bundle, here)
}

// A run where nothing changed is answered from the run memo without loading the engine at all. One that will run
// processes starts its spawner now, so that its start-up overlaps the engine's.
const verdict = process.argv[2] === "run" ? Noop.answer(process.argv.slice(2)) : "other"
if (verdict === "runs") startWarm((await import("node:child_process")).spawn)
if (verdict !== "answered") load()
