/**
 * Many `lstat`s at once: kiln's addon (threads, stat by name in the parent directory) must give, path by path, what
 * `fs.lstatSync` gives, and so must its fallback through Node; anything that cannot be stat'ed is absent, never thrown.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"
import type * as RawStat from "../../src/os/RawStat.js"
import * as StatMany from "../../src/os/StatMany.js"
import { tempDir } from "../utils/temp.js"

const viaFs = (p: string): RawStat.RawStat | undefined => {
  try {
    const st = fs.lstatSync(p)
    return { dev: st.dev, ino: st.ino, mode: st.mode, size: st.size, mtimeMs: st.mtimeMs, ctimeMs: st.ctimeMs }
  } catch {
    return undefined
  }
}

/** Where the table and fs disagree, as one line ("" when they agree on every path). */
const disagreements = (prefix: string, names: ReadonlyArray<string>, table: StatMany.StatTable): string => {
  const bad: Array<string> = []
  names.forEach((name, i) => {
    const out: RawStat.RawStat = { dev: 0, ino: 0, mode: 0, size: 0, mtimeMs: 0, ctimeMs: 0 }
    const got = StatMany.statAt(table, i, out) ? out : undefined
    if (JSON.stringify(got) !== JSON.stringify(viaFs(prefix + name))) bad.push(name)
  })
  return bad.length === 0 ? "" : `${bad.length} disagree, first ${JSON.stringify(bad.slice(0, 3))}`
}

const THROUGH = ["addon", "node"] as const

describe("lstatMany", () => {
  it.scoped("answers as fs.lstatSync for files, directories, symlinks, absent and unreachable paths", () =>
    Effect.gen(function*() {
      const dir = yield* tempDir("kiln-statmany-")
      assert.isTrue(StatMany.usesAddon(dir), `the tests run with the addon built (${StatMany.ADDON_ENV})`)
      fs.writeFileSync(path.join(dir, "f.txt"), "some bytes\n")
      fs.chmodSync(path.join(dir, "f.txt"), 0o640)
      fs.utimesSync(path.join(dir, "f.txt"), 1_700_000_000.123456, 1_700_000_000.987654)
      fs.symlinkSync("f.txt", path.join(dir, "link"))
      fs.symlinkSync("nowhere", path.join(dir, "dangling"))
      fs.mkdirSync(path.join(dir, "sub", "deeper"), { recursive: true })
      fs.writeFileSync(path.join(dir, "sub", "deeper", "g"), "")
      // Through a symlinked directory, as pnpm's node_modules are reached.
      fs.symlinkSync("sub", path.join(dir, "via"))
      const names = [
        "f.txt",
        "link",
        "dangling",
        "sub",
        "sub/deeper",
        "sub/deeper/g",
        "via/deeper/g",
        "via",
        "",
        "absent",
        "absent/below",
        "f.txt/below",
        "sub/",
        `${"x".repeat(300)}/y`,
        "x".repeat(9000)
      ]
      for (const through of THROUGH) {
        const table = StatMany.lstatMany(`${dir}/`, names, dir, through)
        assert.strictEqual(table.count, names.length)
        assert.strictEqual(disagreements(`${dir}/`, names, table), "", through)
      }
      // Absolute names under an empty prefix, as a mounted tree's check asks.
      const abs = names.slice(0, 9).map((n) => path.join(dir, n))
      assert.strictEqual(disagreements("", abs, StatMany.lstatMany("", abs, dir)), "")
      assert.strictEqual(StatMany.lstatMany(`${dir}/`, [], dir).count, 0)
    }))

  it.scoped("shares a large tree between threads and answers for every path in order", () =>
    Effect.gen(function*() {
      const dir = yield* tempDir("kiln-statmany-")
      const names: Array<string> = []
      for (let d = 0; d < 60; d++) {
        fs.mkdirSync(path.join(dir, `d${d}`))
        names.push(`d${d}`)
        for (let f = 0; f < 100; f++) {
          fs.writeFileSync(path.join(dir, `d${d}`, `f${f}`), "x".repeat(f))
          names.push(`d${d}/f${f}`)
        }
      }
      // Some gone after the listing: the table says so for exactly those.
      for (let d = 0; d < 60; d += 7) fs.rmSync(path.join(dir, `d${d}`, "f3"))
      fs.rmSync(path.join(dir, "d59"), { recursive: true })
      for (const through of THROUGH) {
        assert.strictEqual(disagreements(`${dir}/`, names, StatMany.lstatMany(`${dir}/`, names, dir, through)), "")
      }
    }))

  it("answers through Node for a name no path can hold", () => {
    const table = StatMany.lstatMany("/", ["tmp", "a\0b"], "/")
    const out: RawStat.RawStat = { dev: 0, ino: 0, mode: 0, size: 0, mtimeMs: 0, ctimeMs: 0 }
    assert.isTrue(StatMany.statAt(table, 0, out))
    assert.isFalse(StatMany.statAt(table, 1, out))
  })
})
