/**
 * The sandbox options `run` and `exec` share, as @effect/cli options.
 */
import { cliOptions } from "../common/cliOptions.js"
import { SANDBOX_OPTIONS } from "./optionTable.js"

/** `--keep-sandboxes`, `--sandbox-root`, `--named-caches-dir`. */
export const sandboxOptions = cliOptions(SANDBOX_OPTIONS)
