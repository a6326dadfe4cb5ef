/**
 * The `packages:` list of a `pnpm-workspace.yaml`, read by a reader of the YAML that file holds: a mapping at the top
 * level whose `packages` value is a sequence of strings, block (`- packages/*`) or flow (`[a, "b"]`), plain, single- or
 * double-quoted, with comments. Every other key (`catalog:`, `onlyBuiltDependencies:`, …) is skipped whole: its
 * lines are indented below it. Anything else in `packages` (a mapping, an alias, a block scalar) is refused, naming
 * the line, rather than read as something pnpm would not.
 *
 * A YAML library would read more, and cost every run that checks its memo (the no-op check, which runs before the
 * bundle and loads no package) the time to load it; this file holds a list of globs.
 *
 * @internal
 */

/** A problem with the file: its 1-based line and what is wrong there. */
export interface YamlProblem {
  readonly line: number
  readonly detail: string
}

/** The `packages` globs; `undefined` when the file has no `packages` key. */
export type Packages = ReadonlyArray<string> | undefined

/** Text without its comment: a `#` at the start or after whitespace, outside quotes. */
const uncommented = (text: string): string => {
  let quote: string | undefined
  for (let i = 0; i < text.length; i++) {
    const c = text[i]!
    if (quote !== undefined) {
      if (c === "\\" && quote === "\"") i++
      else if (c === quote) quote = undefined
    } else if (c === "'" || c === "\"") {
      quote = c
    } else if (c === "#" && (i === 0 || /\s/.test(text[i - 1]!))) {
      return text.slice(0, i)
    }
  }
  return text
}

const DOUBLE_ESCAPES: Record<string, string> = { "\"": "\"", "\\": "\\", "/": "/", n: "\n", t: "\t", "0": "\0" }

/** One scalar as YAML reads it, or a problem. */
const scalar = (raw: string, line: number): string | YamlProblem => {
  const text = raw.trim()
  if (text.startsWith("'")) {
    if (!/^'(?:[^']|'')*'$/.test(text)) {
      return { line, detail: `unterminated or malformed single-quoted string ${text}` }
    }
    return text.slice(1, -1).replace(/''/g, "'")
  }
  if (text.startsWith("\"")) {
    if (!/^"(?:[^"\\]|\\.)*"$/.test(text)) {
      return { line, detail: `unterminated or malformed double-quoted string ${text}` }
    }
    let bad: string | undefined
    const value = text.slice(1, -1).replace(/\\(.)/g, (_, c: string) => {
      const e = DOUBLE_ESCAPES[c]
      if (e === undefined) bad = c
      return e ?? ""
    })
    return bad === undefined ? value : { line, detail: `unsupported escape \\${bad} in ${text}` }
  }
  // `!` alone starts a tag, but `!packages/x` (pnpm's exclusion) is how everyone writes it; `&`, `*`, `|`, `>`, `{`,
  // `[` and `@` start what is no glob here (an anchor, an alias, a block scalar, a collection, a reserved indicator).
  if (text === "" || /^[&*|>{[@`%]/.test(text) || /^! /.test(text) || /:(\s|$)/.test(text)) {
    return { line, detail: `${text === "" ? "an empty item" : JSON.stringify(text)} is not a package glob` }
  }
  return text
}

/** The items of a flow sequence's text (without its brackets). */
const flowItems = (inner: string, line: number): Array<string> | YamlProblem => {
  const items: Array<string> = []
  let start = 0
  let quote: string | undefined
  const parts: Array<string> = []
  for (let i = 0; i < inner.length; i++) {
    const c = inner[i]!
    if (quote !== undefined) {
      if (c === "\\" && quote === "\"") i++
      else if (c === quote) quote = undefined
    } else if (c === "'" || c === "\"") {
      quote = c
    } else if (c === ",") {
      parts.push(inner.slice(start, i))
      start = i + 1
    }
  }
  parts.push(inner.slice(start))
  for (const [i, part] of parts.entries()) {
    // A trailing comma is allowed: `[a, b,]`.
    if (part.trim() === "" && i === parts.length - 1 && i > 0) continue
    const value = scalar(part, line)
    if (typeof value !== "string") return value
    items.push(value)
  }
  return items
}

const indentOf = (line: string) => line.length - line.trimStart().length

/** A line longer than this is refused: a real one is a glob or a version. */
const MAX_LINE = 4096

/**
 * A top-level `key: value` line's key and value (`""` when none), or undefined: a quoted key, or one up to the first
 * `:`, which a blank or the line's end must follow. Found by `indexOf`, not by a regular expression that backtracked
 * quadratically on a long line without a colon.
 */
const entryOf = (line: string): { readonly key: string; readonly value: string } | undefined => {
  const quoted = /^(?:"([^"]*)"|'([^']*)')[ \t]*:(?:\s+(.*))?$/.exec(line)
  if (quoted !== null) return { key: quoted[1] ?? quoted[2]!, value: quoted[3] ?? "" }
  const colon = line.indexOf(":")
  if (colon < 1 || " \t:#'\"".includes(line[0]!)) return undefined
  const after = line.slice(colon + 1)
  if (after !== "" && !/^\s/.test(after)) return undefined
  return { key: line.slice(0, colon).trimEnd(), value: after.trimStart() }
}

/** The `packages` globs of a `pnpm-workspace.yaml`'s text, or the first problem. */
export const readPackages = (text: string): Packages | YamlProblem => {
  const lines = text.replace(/^\uFEFF/, "").split(/\r?\n/)
  let packages: Array<string> | undefined
  for (let i = 0; i < lines.length; i++) {
    const line = uncommented(lines[i]!).trimEnd()
    if (line.trim() === "") continue
    if (/^\t/.test(lines[i]!)) return { line: i + 1, detail: "a tab indents it: YAML indents with spaces" }
    if (indentOf(line) > 0) continue // under another key
    if (line === "---" || line === "...") continue
    if (line.length > MAX_LINE) return { line: i + 1, detail: `is longer than ${MAX_LINE} characters` }
    const entry = entryOf(line)
    if (entry === undefined) {
      return { line: i + 1, detail: "expected a top-level `key:` (pnpm-workspace.yaml is a mapping)" }
    }
    if (entry.key !== "packages") continue
    if (packages !== undefined) return { line: i + 1, detail: "`packages` appears twice" }
    const value = entry.value.trim()
    if (value.startsWith("[")) {
      // A flow sequence, perhaps over several lines: each line looked at once (a text grown and searched again on
      // every line took quadratic time on a sequence never closed).
      const flow = [value]
      const opened = i + 1
      for (let last = value; !last.endsWith("]");) {
        i++
        if (i >= lines.length) return { line: opened, detail: "`packages: [` is never closed with `]`" }
        if (lines[i]!.length > MAX_LINE) return { line: i + 1, detail: `is longer than ${MAX_LINE} characters` }
        last = uncommented(lines[i]!).trim()
        if (last !== "") flow.push(last)
      }
      const items = flowItems(flow.join(" ").slice(1, -1), i + 1)
      if (!Array.isArray(items)) return items
      packages = items
      continue
    }
    if (value !== "") return { line: i + 1, detail: "`packages` must be a list of globs" }
    packages = []
    let itemIndent: number | undefined
    while (i + 1 < lines.length) {
      const next = uncommented(lines[i + 1]!).trimEnd()
      if (next.trim() === "") {
        i++
        continue
      }
      if (/^\t/.test(lines[i + 1]!)) return { line: i + 2, detail: "a tab indents it: YAML indents with spaces" }
      // YAML lets a block sequence under a key start at the key's own column.
      if (indentOf(next) === 0 && !next.startsWith("-")) break
      i++
      const indent = indentOf(next)
      const item = /^-(?:\s+(.*))?$/.exec(next.trim())
      if (item === null || (itemIndent !== undefined && indent !== itemIndent)) {
        return { line: i + 1, detail: "expected an item `- glob` of `packages`" }
      }
      itemIndent = indent
      const value = scalar(item[1] ?? "", i + 1)
      if (typeof value !== "string") return value
      packages.push(value)
    }
  }
  return packages
}
