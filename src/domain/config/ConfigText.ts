/**
 * kiln.json's text: read as JSON with comments and trailing commas (JSONC, as VS Code's settings and tsconfig.json
 * are), and where in it a field is, so that an error can say `kiln.json:LINE:COL` and show the line.
 *
 * Plain code without Effect: the no-op check (`programs/kiln/noop.ts`) reads kiln.json with it before anything else
 * is loaded. Plain JSON goes through `JSON.parse`, which is faster than any parser written in JavaScript; only a file
 * that is not plain JSON goes through jsonc-parser.
 */
import { findNodeAtLocation, type Node, type ParseError, parseTree, printParseErrorCode } from "jsonc-parser"

/**
 * A syntax error of the text: where it is (an offset into the text) and what is wrong.
 */
export interface SyntaxProblem {
  readonly offset: number
  readonly detail: string
}

/**
 * Where in the text something is: its line and column (from 1), and that line.
 */
export interface Location {
  readonly line: number
  readonly column: number
  readonly text: string
}

const OPTIONS = { allowTrailingComma: true, disallowComments: false } as const

/** jsonc-parser's error codes, in a user's words. */
const SYNTAX_WORDS: Record<string, string> = {
  InvalidSymbol: "unexpected character",
  InvalidNumberFormat: "not a number",
  PropertyNameExpected: "expected a field name in double quotes",
  ValueExpected: "expected a value",
  ColonExpected: "expected `:`",
  CommaExpected: "expected `,`",
  CloseBraceExpected: "expected `}`",
  CloseBracketExpected: "expected `]`",
  EndOfFileExpected: "expected the end of the file",
  InvalidCommentToken: "not a comment",
  UnexpectedEndOfComment: "a comment that does not end",
  UnexpectedEndOfString: "a string that does not end",
  UnexpectedEndOfNumber: "a number that does not end",
  InvalidUnicode: "an invalid \\u escape",
  InvalidEscapeCharacter: "an invalid escape",
  InvalidCharacter: "a character a string cannot hold raw (a control character)"
}

/**
 * A JSON value from jsonc-parser's tree, every key an own property: assigning a `__proto__` key, as its own `parse`
 * does, would set the object's prototype instead (and the key would be gone without a word).
 */
const valueOf = (node: Node): unknown => {
  switch (node.type) {
    case "object": {
      const o: Record<string, unknown> = {}
      for (const property of node.children ?? []) {
        const [key, value] = property.children ?? []
        if (key === undefined) continue
        Object.defineProperty(o, key.value as string, {
          value: value === undefined ? undefined : valueOf(value),
          enumerable: true,
          writable: true,
          configurable: true
        })
      }
      return o
    }
    case "array":
      return (node.children ?? []).map(valueOf)
    default:
      return node.value
  }
}

/** How deep kiln.json's objects and arrays may nest: its own schema needs five levels. */
const DEPTH_MAX = 64

/**
 * The offset of the first `[` or `{` that opens a level past `max`, outside strings and comments; undefined when
 * none does. One pass over the text, no recursion.
 */
const nestedPast = (text: string, max: number): number | undefined => {
  let depth = 0
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i)
    if (c === 0x22) {
      // A string: to its closing quote, escapes skipped.
      for (i++; i < text.length && text.charCodeAt(i) !== 0x22; i++) if (text.charCodeAt(i) === 0x5c) i++
    } else if (c === 0x2f && text.charCodeAt(i + 1) === 0x2f) {
      const end = text.indexOf("\n", i)
      i = end < 0 ? text.length : end
    } else if (c === 0x2f && text.charCodeAt(i + 1) === 0x2a) {
      const end = text.indexOf("*/", i + 2)
      i = end < 0 ? text.length : end + 1
    } else if (c === 0x5b || c === 0x7b) {
      if (++depth > max) return i
    } else if (c === 0x5d || c === 0x7d) {
      depth--
    }
  }
  return undefined
}

/**
 * The text's value, or every syntax error in it. Comments (`//`, `/* *\/`) and trailing commas are allowed.
 */
export const parse = (
  text: string
): { readonly json: unknown } | { readonly errors: ReadonlyArray<SyntaxProblem> } => {
  // jsonc-parser, and every check after it, walks the value recursively: a committed file nested thousands deep
  // would overflow the stack. kiln.json is a few levels deep.
  const tooDeep = nestedPast(text, DEPTH_MAX)
  if (tooDeep !== undefined) {
    return { errors: [{ offset: tooDeep, detail: `nested more than ${DEPTH_MAX} levels deep: kiln.json is a few` }] }
  }
  try {
    return { json: JSON.parse(text) }
  } catch {
    // Not plain JSON: JSONC, or an error jsonc-parser says where it is.
  }
  const errors: Array<ParseError> = []
  const root = parseTree(text, errors, OPTIONS)
  if (errors.length > 0 || root === undefined) {
    return {
      errors: errors.length === 0
        ? [{ offset: 0, detail: "empty: expected an object" }]
        : errors
          // The parser's recovery can report one place twice (`expected a value`, then `expected }`): the first says it.
          .filter((e, i) => i === 0 || e.offset !== errors[i - 1]!.offset)
          .map((e) => ({ offset: e.offset, detail: SYNTAX_WORDS[printParseErrorCode(e.error)] ?? "invalid" }))
    }
  }
  return { json: valueOf(root) }
}

/**
 * The line and column of `offset` in `text`.
 */
export const locationAt = (text: string, offset: number): Location => {
  const at = Math.max(0, Math.min(offset, text.length))
  const start = text.lastIndexOf("\n", at - 1) + 1
  const end = text.indexOf("\n", at)
  const line = text.slice(0, start).split("\n").length
  return { line, column: at - start + 1, text: text.slice(start, end === -1 ? undefined : end).replace(/\r$/, "") }
}

/**
 * Where the field at `path` is in `text`: its value, or (`key`) its name; the nearest enclosing field that is there
 * when it is not (a field that is missing: its object).
 */
export const locate = (
  text: string,
  path: ReadonlyArray<PropertyKey>,
  key = false
): Location | undefined => {
  const root = parseTree(text, [], OPTIONS)
  if (root === undefined) return undefined
  const segments = path.map((p) => (typeof p === "number" ? p : String(p)))
  for (let n = segments.length; n >= 0; n--) {
    const node = findNodeAtLocation(root, segments.slice(0, n))
    if (node === undefined) continue
    const name = key && n === segments.length ? node.parent?.children?.[0] : undefined
    return locationAt(text, (name ?? node).offset)
  }
  return undefined
}
