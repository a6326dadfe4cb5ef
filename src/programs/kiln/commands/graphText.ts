/**
 * `kiln graph`'s formats: the selected processes as nodes, each with an edge to each of its deps that is selected
 * too, in kiln.json's order (nodes) and each process's deps' order (edges), so that the same config prints the same
 * text. Edges point from a process to its dep, as turbo's graph does.
 */
import * as ProcessName from "../../../domain/config/ProcessName.js"

/** A node and its deps, in the order to print. */
export interface Node {
  readonly name: string
  readonly deps: ReadonlyArray<string>
}

/** The formats `--format` takes. */
export const FORMATS = ["dot", "mermaid", "json"] as const

export type Format = (typeof FORMATS)[number]

/** A DOT quoted string: `"` and `\` escaped, line breaks as `\n` (names are not HTML-like labels). */
export const dotQuoted = (name: string): string =>
  `"${name.replace(/\\/g, "\\\\").replace(/"/g, "\\\"").replace(/\r?\n|\r/g, "\\n")}"`

/**
 * A mermaid label in quotes: every character that could end it or be read as markup is an entity code (`#quot;`,
 * `#35;`…), so that any name prints as written.
 */
export const mermaidLabel = (name: string): string =>
  `"${name.replace(/[#"<>&`\\|{}[\]()\r\n]/g, (c) => `#${c.charCodeAt(0)};`)}"`

const edgesOf = (nodes: ReadonlyArray<Node>) => {
  const selected = new Set(nodes.map((n) => n.name))
  return nodes.flatMap((n) => n.deps.filter((d) => selected.has(d)).map((d) => ({ from: n.name, to: d })))
}

/** Graphviz's DOT: `dot -Tsvg`. */
export const dot = (nodes: ReadonlyArray<Node>): string =>
  [
    "digraph kiln {",
    ...nodes.map((n) => `  ${dotQuoted(n.name)}`),
    ...edgesOf(nodes).map((e) => `  ${dotQuoted(e.from)} -> ${dotQuoted(e.to)}`),
    "}"
  ].join("\n")

/** A mermaid flowchart: nodes get ids (`p0`, `p1`…), names are their labels. */
export const mermaid = (nodes: ReadonlyArray<Node>): string => {
  const ids = new Map(nodes.map((n, i) => [n.name, `p${i}`]))
  return [
    "flowchart LR",
    ...nodes.map((n) => `  ${ids.get(n.name)}[${mermaidLabel(n.name)}]`),
    ...edgesOf(nodes).map((e) => `  ${ids.get(e.from)} --> ${ids.get(e.to)}`)
  ].join("\n")
}

/** `{ nodes: [{ name, deps }], edges: [{ from, to }] }`: `deps` are all the process's deps, edges only selected ones. */
export const json = (nodes: ReadonlyArray<Node>): string =>
  ProcessName.printableJson({ nodes: nodes.map((n) => ({ name: n.name, deps: n.deps })), edges: edgesOf(nodes) }, 2)

/** The graph in `format`. */
export const render = (format: Format, nodes: ReadonlyArray<Node>): string =>
  format === "dot" ? dot(nodes) : format === "mermaid" ? mermaid(nodes) : json(nodes)
