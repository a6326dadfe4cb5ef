import * as Logger from "effect/Logger"

/** kiln's logger: human-readable, on stderr (stdout is data: `kiln store cat` writes a blob's bytes there). */
export const cliLogger = Logger.prettyLogger({ stderr: true })
