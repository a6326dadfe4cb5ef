/**
 * The restore a standby does once on a throwaway store before it listens (`workspace/RestoreWarmUp.ts`), on real LMDB
 * and files in temp dirs: it snapshots and writes back a made-up output, leaves nothing under its parent, keeps its
 * store out of those a standby is told to open ahead, and removes what a warm-up killed midway left, never a live
 * one's.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { spawn } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"
import * as OpenedEnvs from "../../src/layers/store/OpenedEnvs.js"
import * as RestoreWarmUp from "../../src/layers/workspace/RestoreWarmUp.js"
import * as Proc from "../../src/os/Proc.js"
import { exitOf } from "../utils/child.js"
import { tempDir } from "../utils/temp.js"

/** A pid that has ended: a child's, waited for. */
const endedPid = Effect.gen(function*() {
  const child = spawn("/bin/true")
  yield* exitOf(child)
  return child.pid!
})

describe("the restore warm-up", () => {
  it.scoped("writes a restore back on a store of its own and leaves nothing, nor any environment to open ahead", () =>
    Effect.gen(function*() {
      const parent = yield* tempDir("kiln-warm-up-")
      // Each write-back observed every path of the output (the declared directory's listings among them).
      const written = yield* RestoreWarmUp.run(parent)
      assert.strictEqual(written.length, 3)
      for (const n of written) assert.isAtLeast(n, 100)
      assert.deepStrictEqual(fs.readdirSync(parent), [], "the warm-up left files under its parent")
      assert.deepStrictEqual(OpenedEnvs.openedHere().filter((e) => e.dir.startsWith(`${parent}/`)), [])
    }))

  it.scoped("removes what a warm-up killed midway left (its pid ended, or given again), and leaves a live one's and the rest alone", () =>
    Effect.gen(function*() {
      const parent = yield* tempDir("kiln-warm-up-")
      const parentProcess = Proc.startTimeOf(process.ppid)!
      const dead = path.join(parent, `warm-up-${yield* endedPid}-1234-abc123`)
      // A live pid that started at another time: the process that made it has ended, and its pid was given again.
      const reused = path.join(parent, `warm-up-${process.ppid}-${Number(parentProcess) + 1}-ghi789`)
      const live = path.join(parent, `warm-up-${process.ppid}-${parentProcess}-def456`)
      const other = path.join(parent, "standby-0123.sock.d")
      for (const dir of [dead, reused, live, other]) fs.mkdirSync(path.join(dir, "store"), { recursive: true })
      yield* RestoreWarmUp.run(parent)
      assert.deepStrictEqual(fs.readdirSync(parent).sort(), [path.basename(other), path.basename(live)].sort())
    }))

  it.scoped("fails, naming its parent, where it cannot make its directory; nothing is made", () =>
    Effect.gen(function*() {
      const parent = path.join(yield* tempDir("kiln-warm-up-"), "missing")
      const error = yield* Effect.flip(RestoreWarmUp.run(parent))
      assert.include(error.message, parent)
      assert.isFalse(fs.existsSync(parent))
    }))
})
