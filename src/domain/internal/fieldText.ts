/**
 * How kiln.json's error lines quote what they name: plain code without Effect, shared by `Config.ts` and by
 * `ResolvedConfig.ts`, which the no-op check loads before anything else.
 *
 * @internal
 */

/**
 * C0 controls, DEL and C1 controls (U+0080–U+009F; U+009B is a CSI to some terminals): printed raw, they redraw the
 * screen or forge a line (a newline) of kiln's own. And the bidirectional overrides and isolates, which show what
 * follows them in another order.
 */
const CONTROLS = /[\u0000-\u001f\u007f-\u009f\u202a-\u202e\u2066-\u2069]/g

/** `s` with every control character written as a `\uXXXX` escape. @internal */
export const escapeControls = (s: string) =>
  s.replace(CONTROLS, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`)

/** What JSON.stringify leaves raw that a terminal acts on: DEL, the C1 controls, the bidirectional controls. */
const JSON_RAW = /[\u007f-\u009f\u202a-\u202e\u2066-\u2069]/g

/**
 * `value` as JSON text (`indent` as JSON.stringify's), with DEL, the C1 controls and the bidirectional controls
 * written as `\uXXXX` escapes: the same JSON to a parser, nothing a terminal acts on. @internal
 */
export const jsonText = (value: unknown, indent?: number): string =>
  JSON.stringify(value, null, indent).replace(JSON_RAW, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`)

/**
 * `s` as a JSON string that is safe on a terminal (JSON leaves DEL and the C1 controls raw). Every name, path or value
 * an error line quotes from kiln.json goes through this.
 *
 * @internal
 */
export const quoted = (s: string) => escapeControls(JSON.stringify(s))

/** A field's path as kiln.json's errors write it (`processes.a.inputs[0]`). @internal */
export const pathText = (path: ReadonlyArray<PropertyKey>) =>
  path.map((p, i) =>
    typeof p === "number"
      ? `[${p}]`
      : /^[A-Za-z_$][\w$]*$/.test(String(p))
      ? `${i === 0 ? "" : "."}${String(p)}`
      : `[${quoted(String(p))}]`
  ).join("")

/** Where a problem is in its file: the line, the column, and the line's text. */
interface Located {
  readonly line: number
  readonly column: number
  readonly text: string
}

/** How wide a quoted line may be: a config written on one line (a generated one) is shown around the error. */
const QUOTE_WIDTH = 100

/** The line of the file an error is at, and a caret under its column: two lines, escaped. */
const quotedLine = (location: Located): string => {
  // A tab would put the caret under another character; a control character is escaped, as every quoted value is.
  let text = location.text.replace(/\t/g, " ")
  let column = location.column - 1
  if (text.length > QUOTE_WIDTH) {
    const from = Math.max(0, column - QUOTE_WIDTH / 2)
    const cut = text.slice(from, from + QUOTE_WIDTH)
    text = `${from > 0 ? "…" : ""}${cut}${from + QUOTE_WIDTH < location.text.length ? "…" : ""}`
    column = column - from + (from > 0 ? 1 : 0)
  }
  const caretAt = escapeControls(text.slice(0, column)).length
  return `  ${escapeControls(text)}\n  ${" ".repeat(caretAt)}^`
}

/**
 * A problem as its lines say it: `file:LINE:COL: path: detail`, then the line and a caret when it is located.
 *
 * @internal
 */
export const problemText = (
  file: string,
  problem: { readonly path: string; readonly detail: string; readonly location?: Located | undefined }
): string => {
  const where = problem.location === undefined ? file : `${file}:${problem.location.line}:${problem.location.column}`
  const head = escapeControls(
    file === ""
      ? problem.detail
      : problem.path === ""
      ? `${where}: ${problem.detail}`
      : `${where}: ${problem.path}: ${problem.detail}`
  )
  return problem.location === undefined ? head : `${head}\n${quotedLine(problem.location)}`
}
