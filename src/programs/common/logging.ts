import * as Cause from "effect/Cause"
import * as Logger from "effect/Logger"

const textOf = (message: unknown): string =>
  Array.isArray(message) ? message.map((m) => textOf(m)).join(" ") : typeof message === "string"
    ? message
    : String(message)

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
