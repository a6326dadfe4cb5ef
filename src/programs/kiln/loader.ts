/**
 * `dist/cli.js`: loads the bundled CLI (`kiln.cjs`) through `vm.Script` with the V8 code cache written beside it at
 * build time, so start-up skips parsing and compiling the bundle. A cache that V8 rejects (another Node version)
 * only costs the compile it would have saved.
 *
 * Before that, a `kiln run` is handed to a standby engine if one waits (`standby/`: a kiln with the bundle loaded),
 * else checked against the run memo (`noop.ts`): a run where nothing changed is answered without loading the bundle
 * at all; one that will run processes starts its spawner first (`spawner/Warm.ts`). Both start a standby for the next
 * run at their end. All are plain code, kept out of the bundle: loading Effect is what they save. `kiln standby`
 * (started so, never by hand) is this same file, serving.
 *
 * It does not start the sandboxer early: a process waits for the sandboxer only when it needs a large tree written,
 * and a whole second kiln starting beside the engine takes CPU the engine's own start needs on a small machine.
 */
import type * as ChildProcess from "node:child_process"
import * as fs from "node:fs"
import Module, { createRequire } from "node:module"
import type * as Net from "node:net"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import type * as V8 from "node:v8"
import * as vm from "node:vm"
import { startWarm } from "../../layers/spawner/Warm.js"
import { libcOfSelf } from "../../os/Libc.js"
import * as Malloc from "../../os/native/Malloc.js"
import * as Noop from "./noop.js"
import * as StandbyClient from "./standby/client.js"
import * as StandbyProtocol from "./standby/protocol.js"
import * as StandbyServe from "./standby/serve.js"

// `dist/cli.js` is a symlink to `cli.cjs`, this file built as CommonJS: Node picks a main module's format from its real
// path, and starting through Node's ES module loader is a visible cost of every run.
// (The library's build of this file is an ES module, where only `import.meta.url` says where it is.)
const here = typeof __dirname === "string" ? __dirname : path.dirname(fileURLToPath(import.meta.url))
const bundle = path.join(here, "kiln.cjs")
// How kiln runs itself (the sandboxer is `kiln sandboxer`), whatever name or symlink it was started through: the
// loader's real file, since a package installed from npm has no `cli.js` (npm packs no symlinks).
const cli = path.join(here, "cli.cjs")
process.env.KILN_CLI = cli
// lmdb loads msgpackr, which looks for and loads a native msgpack decoder at start-up; kiln stores only binary
// values and never decodes msgpack, so that is start-up time for nothing.
process.env.MSGPACKR_NATIVE_ACCELERATION_DISABLED ??= "true"

if (process.platform === "linux" && process.env.LIBC === undefined) {
  const libc = libcOfSelf()
  if (libc !== undefined) process.env.LIBC = libc
}

// Read once and not passed on: the sandboxer this process starts must not write the cache too.
const writeCodeCache = process.env.KILN_WRITE_CODE_CACHE === "1"
delete process.env.KILN_WRITE_CODE_CACHE
// Tells the bundle (main.ts) that this run trains the cache.
if (writeCodeCache) (globalThis as Record<symbol, unknown>)[Symbol.for("kiln.writeCodeCache")] = true

/**
 * lmdb's JavaScript and what it loads (msgpackr, ordered-binary, …) are required from node_modules, outside the
 * bundle and its cache: Node 20 compiled them from source on every run that opens the store (most of what loading
 * lmdb cost). Their compiled code is cached at build time too, beside the bundle's, and used for exactly
 * those files, through the `_compile` hook v8-compile-cache uses on Node versions without a compile cache of their
 * own. A cache V8 rejects (another version of a file) only costs the compile it would have saved.
 */
const depsCacheFile = path.join(here, "deps.cache")

const depsKey = (filename: string): string | undefined => {
  const i = filename.lastIndexOf("/node_modules/")
  return i === -1 ? undefined : filename.slice(i + "/node_modules/".length)
}

const cacheDeps = () => {
  type Compile = (this: NodeJS.Module, content: string, filename: string) => unknown
  const proto = (Module as unknown as { prototype: { _compile?: Compile } }).prototype
  const wrap = (Module as unknown as { wrap?: (source: string) => string }).wrap
  const original = proto._compile
  if (typeof original !== "function" || typeof wrap !== "function") return
  let cached = new Map<string, Buffer>()
  try {
    const json = JSON.parse(fs.readFileSync(depsCacheFile, "utf8")) as Record<string, string>
    cached = new Map(Object.entries(json).map(([k, v]) => [k, Buffer.from(v, "base64")]))
  } catch {
    if (!writeCodeCache) return // No cache: nothing to use.
  }
  const compiled = new Map<string, vm.Script>()
  proto._compile = function(content, filename) {
    const key = depsKey(filename)
    const cachedData = key === undefined ? undefined : cached.get(key)
    if (key === undefined || (cachedData === undefined && !writeCodeCache)) {
      return original.call(this, content, filename)
    }
    let script: vm.Script
    try {
      script = new vm.Script(wrap(content), { filename, ...(cachedData !== undefined ? { cachedData } : {}) })
    } catch {
      // What Node's own compile accepts and a wrapped script does not (a `#!` line): left to Node.
      return original.call(this, content, filename)
    }
    if (writeCodeCache) compiled.set(key, script)
    const fn = script.runInThisContext() as (...args: Array<unknown>) => unknown
    return fn.call(this.exports, this.exports, createRequire(filename), this, filename, path.dirname(filename))
  }
  if (writeCodeCache) {
    process.once("exit", () => {
      const out: Record<string, string> = {}
      for (const [key, script] of compiled) out[key] = script.createCachedData().toString("base64")
      fs.writeFileSync(depsCacheFile, JSON.stringify(out))
    })
  }
}

/**
 * V8's flags for a run, set before any cached code is loaded: V8 checks a code cache against a hash of its flags, and
 * the build's training run goes through here too. Not on the no-op path: it has no use for `node:v8`, whose loading
 * is a visible part of its start.
 * - V8 doubles its young generation whenever much of it survives a scavenge, up to 16 MiB a semi-space, and keeps it:
 *   a run's fibers each survive a few scavenges, so a cold run grew it to the top, and that stayed resident. Kept at
 *   its first size, it costs more scavenges and far less memory.
 * - After a full collection V8 lets the old generation grow to up to four times what survived before the next one, so
 *   a large graph's heap went to three times what its run kept alive. Growing by half at most costs a few more
 *   (concurrent) collections and a third of the peak memory.
 * - TurboFan compiles each function that has run long enough, on background threads: in a cold run that took CPU the
 *   tools and the engine needed, on cores they already fill. Twice the running before it does leaves the
 *   warm-but-not-hot functions to the baseline tiers. Only on the V8 this was measured on (Node 20's): other versions
 *   tier up differently, and keep their own budget.
 * Figures: report.md, "Issue #25, session 19" and "session 20".
 */
const setV8Flags = () => {
  const v8 = createRequire(bundle)("node:v8") as typeof V8
  v8.setFlagsFromString("--semi-space-growth-factor=1")
  v8.setFlagsFromString("--heap-growing-percent=50")
  if (process.versions.v8.startsWith("11.3.")) v8.setFlagsFromString("--interrupt-budget=135168")
}

const load = () => {
  setV8Flags()
  cacheDeps()
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
  if (writeCodeCache) process.once("exit", () => fs.writeFileSync(cacheFile, script.createCachedData()))
  fn(module.exports, createRequire(bundle), module, bundle, here)
}

const cwdOrUndefined = (): string | undefined => {
  try {
    return process.cwd()
  } catch {
    return undefined
  }
}

const nodeRequire = createRequire(bundle)
const spawnOf = () => (nodeRequire("node:child_process") as typeof ChildProcess).spawn
const netOf = () => nodeRequire("node:net") as typeof Net

// This is kiln's own process (the library never runs this file): freed large blocks are given back to the system, as
// early as can be (see os/native/Malloc.ts).
Malloc.fixThresholds()

// Started as a standby (`standby/`): the engine is loaded now, and started when a run is handed over.
const standbyKey = process.argv[2] === "standby" ? process.env[StandbyProtocol.SERVE_ENV] : undefined
delete process.env[StandbyProtocol.SERVE_ENV]

if (standbyKey !== undefined && standbyKey !== "") {
  StandbyServe.serve(standbyKey, {
    require: nodeRequire,
    net: netOf(),
    spawn: spawnOf(),
    cli,
    load,
    preload: () => {
      try {
        nodeRequire("lmdb")
      } catch {
        // The run loads it, and says why it cannot.
      }
    },
    answer: (args) => Noop.answer(args),
    rehearse: (args) => Noop.rehearse(args),
    watchLost: Noop.watchLost,
    forget: Noop.forgetHandovers,
    startSpawner: (options) => startWarm(spawnOf(), options)
  })
} else {
  const args = process.argv.slice(2)
  const standby = args[0] === "run" && !writeCodeCache ? StandbyClient.usableKey(bundle) : undefined
  // A run where nothing changed is answered from the run memo without loading the engine at all. One that will run
  // processes starts its spawner now, so that its start-up overlaps the engine's. Any `kiln run` that found no standby
  // to take it starts one for the next run at its end, a no-op too: through the native `kiln` a no-op a standby
  // answers starts no Node at all, and one the check cannot judge (an option only the full CLI reads, such as
  // `--trace`) loads the engine every time.
  const runHere = () => {
    const verdict = args[0] === "run" ? Noop.answer(args) : "other"
    // The directory as the run started in it (what the next run in this workspace starts in too), unless it is gone.
    const cwd = standby === undefined ? undefined : cwdOrUndefined()
    if (standby !== undefined && cwd !== undefined) {
      process.once("exit", () => StandbyClient.startStandby(spawnOf(), cli, standby, { argv: args, cwd }))
    }
    if (verdict === "answered") return
    if (verdict === "runs") {
      if (process.env.KILN_NOOP_DEBUG === "1") {
        process.stderr.write("kiln: no-op check: a process will run: spawner started\n")
      }
      startWarm(spawnOf())
    }
    load()
  }
  // A standby that waits with the engine loaded answers the run instead, no-op check included.
  if (standby === undefined) runHere()
  else StandbyClient.delegate(netOf(), standby, args, runHere)
}
