import * as Cause from "effect/Cause"
import * as Logger from "effect/Logger"

/**
 * Control and bidirectional characters but the line break and the tab, which kiln's own multi-line messages hold: a
 * warning names paths a tool chose and values a server sent, which must not redraw the terminal.
 */
const CONTROLS = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u202a-\u202e\u2066-\u2069]/g

const textOf = (message: unknown): string =>
  (Array.isArray(message) ? message.map((m) => textOf(m)).join(" ") : typeof message === "string"
    ? message
    : String(message)).replace(CONTROLS, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`)

/**
 * kiln's logger: a line on stderr (stdout is data: `kiln store cat` writes a blob's bytes there), worded as the rest
 * of kiln's lines are, `kiln: ` and the level when it is more than information (`kiln: warning: …`), and a cause's
 * details on the lines after. A timestamp and a fiber id (Effect's pretty logger) said nothing to a user at a prompt;
 * the sandboxer, whose log is a file, keeps them (`sandboxer/main.ts`).
 */
export const cliLogger = Logger.make(({ cause, logLevel, message }) => {
  const level = logLevel._tag === "Info" ? "" : `${logLevel._tag.toLowerCase()}: `
  const details = Cause.isEmpty(cause) ? "" : `${Cause.pretty(cause)}\n`
  process.stderr.write(`kiln: ${level}${textOf(message)}\n${details}`)
})
