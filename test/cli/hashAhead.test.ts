/**
 * A fresh checkout's large `node_modules`, hashed ahead on every CPU (`os/native/HashFiles.ts`) by the first walk
 * that takes it whole, through the built CLI: the run's keys are exactly those of a kiln without the addon (every
 * file read and hashed on Node's thread), with `.bin` shims, tools' caches, package managers' bookkeeping, links,
 * executables and a large file in the tree; a checkout again at the same path, and a file changed in it, are seen;
 * and a file that grows without end while the tree is read is read up to the size its stat gave, with or without it.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { spawn } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"
import { ADDON_ENV } from "../../src/os/native/Addon.js"
import { runCli } from "../utils/cliRun.js"
import { tempDir, writeTree } from "../utils/temp.js"

const PATH = "/usr/bin:/bin"

/** A workspace whose one process reads a `node_modules` of 1,200 files and more, written afresh into `ws`. */
const checkout = (ws: string) => {
  const files: Record<string, string> = {
    "kiln.json": JSON.stringify({
      processes: {
        list: {
          argv: ["/bin/sh", "-c", "mkdir -p out && cat node_modules/pkg0/index.js > out/list.txt"],
          inputs: ["node_modules/**"],
          outputs: ["out/list.txt"],
          env: { PATH }
        }
      }
    }),
    "node_modules/.package-lock.json": `{"written":"${Date.now()}"}`,
    "node_modules/.cache/tool/state": "a tool's cache\n",
    "node_modules/.bin/tool": `#!/bin/sh\nNODE_PATH="${ws}/node_modules" exec node "$0"\n`
  }
  for (let p = 0; p < 60; p++) {
    files[`node_modules/pkg${p}/package.json`] = `{"name":"pkg${p}"}`
    for (let f = 0; f < 20; f++) files[`node_modules/pkg${p}/lib/f${f}.js`] = `export const f${f} = ${p * f}\n`
    files[`node_modules/pkg${p}/index.js`] = `pkg${p}\n`
  }
  writeTree(ws, files)
  fs.chmodSync(path.join(ws, "node_modules/.bin/tool"), 0o755)
  fs.writeFileSync(path.join(ws, "node_modules/pkg1/large.wasm"), Buffer.alloc(900 * 1024, 3))
  fs.writeFileSync(path.join(ws, "node_modules/pkg2/empty.js"), "")
  fs.symlinkSync("../pkg0", path.join(ws, "node_modules/pkg3/linked"))
}

const actionOf = (stdout: string) =>
  (JSON.parse(stdout) as { processes: ReadonlyArray<{ actionDigest: string; source: string }> }).processes[0]!

describe("a fresh node_modules hashed ahead", () => {
  it.scoped("gives the run the keys a kiln without the addon gives, and sees a checkout again and a change", () =>
    Effect.gen(function*() {
      const root = yield* tempDir("kiln-hash-ahead-")
      const env = (store: string, extra: NodeJS.ProcessEnv = {}) => ({
        ...process.env,
        HOME: root,
        KILN_STORE_DIR: path.join(root, store),
        KILN_SANDBOX_ROOT: path.join(root, "sandboxes"),
        KILN_STANDBY: "off",
        ...extra
      })
      const run = (ws: string, e: NodeJS.ProcessEnv) =>
        Effect.map(runCli(["run", "--summary", "-"], { cwd: ws, env: e }), (r) => {
          assert.strictEqual(r.code, 0, r.stderr)
          return actionOf(r.stdout)
        })
      // The same tree (the shim names its own checkout: the same text in both), at one path in turn.
      const ws = path.join(root, "ws")
      checkout(ws)
      const withAddon = yield* run(ws, env("store-a"))
      fs.rmSync(ws, { recursive: true })
      checkout(ws)
      const without = yield* run(ws, env("store-b", { [ADDON_ENV]: path.join(root, "no-addon.node") }))
      assert.strictEqual(withAddon.actionDigest, without.actionDigest)
      assert.strictEqual(without.source, "ran")
      // Checked out again at the same path: nothing vouches for the new inodes, and it is hashed ahead again.
      fs.rmSync(ws, { recursive: true })
      checkout(ws)
      const again = yield* run(ws, env("store-a"))
      assert.deepStrictEqual([again.actionDigest, again.source], [withAddon.actionDigest, "cache-hit"])
      // A file of the tree changed: another key.
      fs.rmSync(ws, { recursive: true })
      checkout(ws)
      fs.appendFileSync(path.join(ws, "node_modules/pkg59/lib/f19.js"), "// changed\n")
      const changed = yield* run(ws, env("store-a"))
      assert.notStrictEqual(changed.actionDigest, withAddon.actionDigest)
      assert.strictEqual(changed.source, "ran")
    }))

  // A log a tool keeps writing, or a hostile file: read for ever, it held the run (and its signals) until SIGKILL.
  for (const addon of [true, false]) {
    it.scoped(`a file growing without end is read up to its stat's size (${addon ? "the addon" : "Node"} reading)`, () =>
      Effect.gen(function*() {
        const root = yield* tempDir("kiln-hash-ahead-")
        const ws = path.join(root, "ws")
        checkout(ws)
        const growing = path.join(ws, "node_modules/pkg0/growing.log")
        fs.writeFileSync(growing, "")
        // Sparse growth, 100 MB every 50 ms: faster than either reads (a read that followed it never ended), and
        // small enough when the run reads its stat for the bounded read to take a second or two.
        const grower = yield* Effect.acquireRelease(
          Effect.sync(() =>
            spawn("/bin/sh", [
              "-c",
              "i=0; while :; do i=$((i+1)); truncate -s \"${i}00M\" \"$0\"; sleep 0.05; done",
              growing
            ], {
              stdio: "ignore"
            })
          ),
          (child) => Effect.sync(() => child.kill("SIGKILL"))
        )
        const r = yield* runCli(["run", "--summary", "-"], {
          cwd: ws,
          env: {
            ...process.env,
            HOME: root,
            KILN_STORE_DIR: path.join(root, "store"),
            KILN_SANDBOX_ROOT: path.join(root, "sandboxes"),
            KILN_STANDBY: "off",
            ...(addon ? {} : { [ADDON_ENV]: path.join(root, "no-addon.node") })
          }
        })
        grower.kill("SIGKILL")
        // It ends, by itself; what it hashed is not taken as the tree (which changed after it was read): the process
        // runs and its result is not cached, or the run stops and says to run again once the file stops changing.
        assert.isNull(r.signal, r.stderr)
        assert.match(
          r.stderr,
          r.code === 0
            ? /changed since the run hashed it \(checked after it ended\): its result is not cached/
            : /growing\.log, an input of `list`, changed after/
        )
      }))
  }
})
