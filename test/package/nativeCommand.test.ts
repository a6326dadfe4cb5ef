/**
 * The postinstall's check of the package's bin (`scripts/nativeCommand.mjs`): a `dist/kiln` that cannot start on the
 * installing machine (built for another) is replaced by the shell script that runs Node; one that runs is kept.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { spawnSync } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"
import { shellFallback } from "../../scripts/nativeCommand.mjs"
import { tempDir } from "../utils/temp.js"

/** A package laid out as installed: the script, and `dist/kiln` holding `bin`; the script run as npm runs it. */
const installWith = (bin: string | Buffer) =>
  Effect.gen(function*() {
    const root = yield* tempDir("kiln-native-command-")
    fs.mkdirSync(path.join(root, "scripts"))
    fs.mkdirSync(path.join(root, "dist"))
    fs.copyFileSync(path.resolve("scripts/nativeCommand.mjs"), path.join(root, "scripts/nativeCommand.mjs"))
    const kiln = path.join(root, "dist/kiln")
    fs.writeFileSync(kiln, bin, { mode: 0o755 })
    const r = spawnSync(process.execPath, ["scripts/nativeCommand.mjs"], { cwd: root, encoding: "utf8" })
    assert.strictEqual(r.status, 0, r.stderr)
    return { kiln, stderr: r.stderr }
  })

describe("the postinstall's check of dist/kiln", () => {
  it.scoped("a binary of another machine (the kernel refuses it) is replaced by the script that runs Node", () =>
    Effect.gen(function*() {
      // An ELF header of no machine this runs on: exec fails with ENOEXEC, and the spawn falls back to a shell.
      const foreign = Buffer.concat([Buffer.from([0x7f, 0x45, 0x4c, 0x46, 2, 1, 1]), Buffer.alloc(57, 0xff)])
      const { kiln, stderr } = yield* installWith(foreign)
      assert.strictEqual(fs.readFileSync(kiln, "utf8"), shellFallback)
      assert.match(stderr, /^kiln: dist\/kiln cannot run here \(it exited with 127\): it runs Node every time\n$/)
    }))

  it.scoped("one that runs is kept as it is", () =>
    Effect.gen(function*() {
      const runs = "#!/bin/sh\nexit 0\n"
      const { kiln, stderr } = yield* installWith(runs)
      assert.strictEqual(fs.readFileSync(kiln, "utf8"), runs)
      assert.strictEqual(stderr, "")
    }))
})
