/**
 * The benchmark report's writer keeps one section of notes, about the latest run, whatever the report held.
 */
import { assert, describe, it } from "@effect/vitest"
import * as fs from "node:fs"
import * as path from "node:path"
import { HAND_WRITTEN, NOTES_HEADING, notesOf } from "../../scripts/bench/report.js"

const generated = "# kiln benchmarks\n\n## Machine\n\n- a box\n"

describe("the bench report's notes", () => {
  it("a rewrite keeps the notes section as it is, and rewriting again changes nothing", () => {
    const notes = `${NOTES_HEADING}\n\nWhat the latest run showed.\n\n### A finding\n\nDetail.\n`
    const once = [generated, HAND_WRITTEN, "", notes].join("\n")
    assert.strictEqual(notesOf(once), notes)
    const twice = [generated, HAND_WRITTEN, "", notesOf(once)].join("\n")
    assert.strictEqual(twice, once)
  })

  it("a report without notes gets an empty notes section; notes without the heading get it", () => {
    assert.strictEqual(notesOf(generated), `${NOTES_HEADING}\n\nNone yet about this run.\n`)
    assert.strictEqual(notesOf(""), `${NOTES_HEADING}\n\nNone yet about this run.\n`)
    assert.strictEqual(notesOf(`${generated}${HAND_WRITTEN}\n\nLoose text.\n`), `${NOTES_HEADING}\n\nLoose text.\n`)
  })

  it("the notes of a report written by an earlier writer are kept under the one heading", () => {
    const old =
      `${generated}<!-- Hand-written notes below this line are kept when the benchmark rewrites this file. -->\n\n` +
      "## Session 13 notes\n\nText.\n"
    assert.strictEqual(notesOf(old), `${NOTES_HEADING}\n\n## Session 13 notes\n\nText.\n`)
  })

  it("the committed report is the latest run and one notes section, which a rewrite keeps as it is", () => {
    const report = fs.readFileSync(path.resolve("scripts/bench/report.md"), "utf8")
    const at = report.indexOf(HAND_WRITTEN)
    assert.isAbove(at, 0)
    assert.strictEqual(report, `${report.slice(0, at)}${HAND_WRITTEN}\n\n${notesOf(report)}`)
    assert.strictEqual(notesOf(report).split("\n").filter((l) => l.startsWith("## ")).length, 1)
  })
})
