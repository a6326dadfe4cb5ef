/**
 * The standby's key (`src/programs/kiln/standby/protocol.ts`, `keyOf`): a run asks only a standby of the same build and
 * the same process context. A build is told by its id (`dist/build-id`, a hash of the bundle and the loader the build
 * writes), since npm gives every file of every version the same time: a new bundle of the same size would otherwise
 * be the old one. The native client makes the same key (test/cli/standby.test.ts runs both clients against one
 * standby).
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"
import * as Protocol from "../../src/programs/kiln/standby/protocol.js"
import { tempDir } from "../utils/temp.js"

/** A bundle and its build id in a fresh directory, with the times npm gives every installed file. */
const build = (dir: string, id: string) => {
  const bundle = path.join(dir, "kiln.cjs")
  const idFile = path.join(dir, Protocol.BUILD_ID_FILE)
  fs.writeFileSync(bundle, "// a bundle\n")
  fs.writeFileSync(idFile, `${id}\n`)
  const npmTime = new Date("1985-10-26T08:15:00Z")
  for (const file of [bundle, idFile]) fs.utimesSync(file, npmTime, npmTime)
  return bundle
}

describe("the standby's key", () => {
  it.scoped("names the build by its id, not only by its bundle's size and times", () =>
    Effect.gen(function*() {
      const dir = yield* tempDir("kiln-standby-key-")
      const context = Protocol.contextOf()
      assert.isDefined(context)
      const old = Protocol.keyOf(build(dir, "a".repeat(64)), process.execPath, [], "", context)
      assert.isDefined(old)
      assert.strictEqual(Protocol.keyOf(build(dir, "a".repeat(64)), process.execPath, [], "", context), old)
      // The next version, installed over it: the same size and times, another id.
      const next = Protocol.keyOf(build(dir, "b".repeat(64)), process.execPath, [], "", context)
      assert.isDefined(next)
      assert.notStrictEqual(next, old)
    }))

  it.scoped("is none without a build id that reads as one: no standby is asked or started", () =>
    Effect.gen(function*() {
      const dir = yield* tempDir("kiln-standby-key-")
      const bundle = build(dir, "not an id")
      assert.isUndefined(Protocol.keyOf(bundle, process.execPath, [], "", Protocol.contextOf()))
      fs.rmSync(path.join(dir, Protocol.BUILD_ID_FILE))
      assert.isUndefined(Protocol.keyOf(bundle, process.execPath, [], "", Protocol.contextOf()))
    }))

  it.effect("changes with the process context: what a run inherits besides its request", () =>
    Effect.sync(() => {
      const context = Protocol.contextOf()!
      for (const part of ["mnt:[", "Max file size", "Groups:", "CapEff:", "Cpus_allowed_list:"]) {
        assert.include(context, part)
      }
      // Node raises the soft limit of open files as it starts (the loader and the standby alike): not a difference.
      const nofile = context.split("\n").find((line) => line.startsWith("Max open files "))!
      assert.match(nofile.slice(26, 46), /^ {20}$/)
    }))
})
