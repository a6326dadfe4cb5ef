/**
 * `kiln graph`'s formats (`programs/kiln/commands/graphText.ts`): any name prints as one quoted token that reads back as the
 * name, and edges join only selected processes.
 */
import { assert, describe, it } from "@effect/vitest"
import { FastCheck as fc } from "effect"
import * as GraphText from "../../src/programs/kiln/commands/graphText.js"

/** A DOT quoted string read back: `\"` and `\\` unescaped, `\n` a line break. */
const readDot = (quoted: string): string => {
  assert.match(quoted, /^"([^"\\\n]|\\.)*"$/s)
  return quoted.slice(1, -1).replace(/\\(.)/g, (_, c: string) => c === "n" ? "\n" : c)
}

/** A mermaid label read back: entity codes (`#34;`) as their characters. */
const readMermaid = (label: string): string => {
  assert.match(label, /^"[^"\r\n]*"$/)
  return label.slice(1, -1).replace(/#(\d+);/g, (_, code: string) => String.fromCharCode(Number(code)))
}

describe("kiln graph's formats", () => {
  it.prop("a name is one quoted token in dot and mermaid that reads back as the name", [fc.string()], ([name]) => {
    if (!name.includes("\r")) assert.strictEqual(readDot(GraphText.dotQuoted(name)), name)
    assert.strictEqual(readMermaid(GraphText.mermaidLabel(name)), name)
  })

  it("edges join selected processes only, from a process to its dep, in order", () => {
    const nodes = [{ name: "b", deps: ["a", "gone"] }, { name: "a", deps: [] }]
    assert.strictEqual(GraphText.dot(nodes), "digraph kiln {\n  \"b\"\n  \"a\"\n  \"b\" -> \"a\"\n}")
    assert.strictEqual(GraphText.mermaid(nodes), "flowchart LR\n  p0[\"b\"]\n  p1[\"a\"]\n  p0 --> p1")
    assert.deepStrictEqual(JSON.parse(GraphText.json(nodes)), {
      nodes: [{ name: "b", deps: ["a", "gone"] }, { name: "a", deps: [] }],
      edges: [{ from: "b", to: "a" }]
    })
  })
})
