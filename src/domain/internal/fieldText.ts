/**
 * How kiln.json's error lines quote what they name: plain code without Effect, shared by `Config.ts` and by
 * `ResolvedConfig.ts`, which the no-op check loads before anything else.
 *
 * @internal
 */

/**
 * C0 controls, DEL and C1 controls (U+0080–U+009F; U+009B is a CSI to some terminals): printed raw, they redraw the
 * screen or forge a line (a newline) of kiln's own.
 */
const CONTROLS = /[\u0000-\u001f\u007f-\u009f]/g

/** `s` with every control character written as a `\uXXXX` escape. @internal */
export const escapeControls = (s: string) =>
  s.replace(CONTROLS, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`)

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
