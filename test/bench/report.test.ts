/**
 * The benchmark report's writer keeps one section of notes, about the latest run, whatever the report held.
 */
import { assert, describe, it } from "@effect/vitest"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import {
  HAND_WRITTEN,
  NOTES_HEADING,
  notesOf,
  ownSectionBegin,
  ownSectionOf,
  writeOwnSection
} from "../../scripts/bench/report.js"

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

  it("a benchmark's own section goes above the notes, replaces itself, and leaves the rest as it was", () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "kiln-report-test-"))
    try {
      const file = path.join(dir, "report.md")
      const notes = `${NOTES_HEADING}\n\nWhat the latest run showed.\n`
      const original = [generated, HAND_WRITTEN, "", notes].join("\n")
      fs.writeFileSync(file, original)
      writeOwnSection(file, "trees", "## Tool trees\n\nfirst run\n")
      const first = fs.readFileSync(file, "utf8")
      assert.isTrue(first.startsWith(generated))
      assert.isBelow(first.indexOf(ownSectionBegin("trees")), first.indexOf(HAND_WRITTEN))
      assert.strictEqual(notesOf(first), notes)
      writeOwnSection(file, "trees", "## Tool trees\n\nsecond run, $& and $1 kept as written\n")
      const second = fs.readFileSync(file, "utf8")
      assert.include(ownSectionOf(second, "trees"), "second run, $& and $1 kept as written")
      assert.notInclude(second, "first run")
      assert.strictEqual(
        second.replace(ownSectionOf(second, "trees")!, ""),
        first.replace(ownSectionOf(first, "trees")!, "")
      )
      assert.isUndefined(ownSectionOf(original, "trees"))
    } finally {
      fs.rmSync(dir, { recursive: true, force: true })
    }
  })

  it("a benchmark's own section in an empty report comes with an empty notes section", () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "kiln-report-test-"))
    try {
      const file = path.join(dir, "report.md")
      writeOwnSection(file, "trees", "## Tool trees\n")
      const text = fs.readFileSync(file, "utf8")
      assert.include(ownSectionOf(text, "trees"), "## Tool trees")
      assert.strictEqual(notesOf(text), `${NOTES_HEADING}\n\nNone yet about this run.\n`)
    } finally {
      fs.rmSync(dir, { recursive: true, force: true })
    }
  })
})
