/**
 * Usage errors in kiln's words, for what @effect/cli would otherwise say its own way (`Expected one of the following
 * cases: …`, `'abc' is not a integer`, `Invalid subcommand for kiln - use one of …`, the internal `sandboxer` listed):
 * a command that is not one, with the nearest one; and `kiln run`'s options read against its table
 * (`optionTable.ts`), each error naming the option, what it takes and, for an unknown one, the nearest. The direct
 * reader of a plain `kiln run` (`runDirect.ts`) and @effect/cli then only ever see arguments that parse.
 *
 * Plain code without Effect or @effect/cli: checking costs nothing a run would not load anyway.
 */
import { nearest } from "../../domain/DidYouMean.js"
import { type OptionSpec } from "../common/optionSpec.js"
import { COMMANDS, METAVAR } from "./help.js"
import { RUN_OPTIONS } from "./optionTable.js"

/** The options @effect/cli gives every command, read only before the command's name. */
export const GLOBAL_OPTIONS: ReadonlyArray<string> = ["--log-level", "--completions", "--wizard", "--version"]

/** `"a"`, `"a" or "b"`, `"a", "b" or "c"`. */
const either = (words: ReadonlyArray<string>) =>
  words.length <= 1 ? words.join("") : `${words.slice(0, -1).join(", ")} or ${words.at(-1)}`

/** `--cache read-write|read|write|off`, `--trace FILE`: how an option is written, as `kiln run --help` shows it. */
export const usageOf = (spec: OptionSpec) =>
  spec.kind === "choice"
    ? `--${spec.flag} ${spec.choices.join("|")}`
    : `--${spec.flag} ${METAVAR[spec.kind]}`.trim()

const BY_FLAG = new Map<string, OptionSpec>(
  (Object.values(RUN_OPTIONS) as ReadonlyArray<OptionSpec>).map((spec) => [`--${spec.flag}`, spec])
)

/** What @effect/cli's boolean options take as a value (`--keep-going=false`). */
const BOOLEAN_WORDS = /^(true|false|yes|no|on|off|y|n|1|0)$/i

/** What is wrong with `value` for `spec`, if anything. */
const valueProblem = (spec: OptionSpec, value: string): string | undefined => {
  switch (spec.kind) {
    case "choice":
      return spec.choices.includes(value)
        ? undefined
        : `${JSON.stringify(value)} is not one of ${either(spec.choices)}`
    case "integer":
      return /^[0-9]+$/.test(value) ? undefined : `${JSON.stringify(value)} is not an integer`
    default:
      return undefined
  }
}

/**
 * What is wrong with `kiln run`'s arguments (`args` without `run`), in one line, or undefined when nothing is (the
 * parser then reads them; a size or a duration is its to judge, naming the option too).
 */
export const runArgsProblem = (args: ReadonlyArray<string>): string | undefined => {
  for (let i = 0; i < args.length; i++) {
    const arg = args[i]!
    if (arg === "--") return undefined
    if (!arg.startsWith("-") || arg === "-") continue
    if (arg === "--help" || arg === "-h") return undefined
    const eq = arg.indexOf("=")
    const flag = eq === -1 ? arg : arg.slice(0, eq)
    const spec = BY_FLAG.get(flag)
    if (spec === undefined) {
      if (GLOBAL_OPTIONS.includes(flag)) return `${flag} goes before the command: \`kiln ${flag} … run\``
      const near = nearest(flag, [...BY_FLAG.keys()]).map((f) => `\`${f}\``)
      return `unknown option ${flag} of \`kiln run\`${near.length > 0 ? `: did you mean ${either(near)}?` : ""}` +
        " (`kiln run --help` lists them)"
    }
    if (spec.kind === "boolean") {
      if (eq !== -1 && !BOOLEAN_WORDS.test(arg.slice(eq + 1))) {
        return `${flag} takes no value: \`${flag}\` alone (or ${flag}=true|false), not \`${arg}\``
      }
      continue
    }
    const value = eq !== -1 ? arg.slice(eq + 1) : args[i + 1]
    if (value === undefined || value === "" || (eq === -1 && value.startsWith("--"))) {
      return `${flag} needs a value: \`kiln run ${usageOf(spec)}\``
    }
    if (eq === -1) i++
    const problem = valueProblem(spec, value)
    if (problem !== undefined) return `${flag}: ${problem} (\`kiln run ${usageOf(spec)}\`)`
  }
  return undefined
}

/**
 * What is wrong with the command `kiln ARGS` names, if it names one that is not: the nearest commands (never the
 * internal `sandboxer`), or all of them; `processes` are kiln.json's, when the word is more like one of those
 * (`kiln build` meant `kiln run build`).
 */
export const commandProblem = (
  args: ReadonlyArray<string>,
  processes: () => ReadonlyArray<string> = () => []
): string | undefined => {
  const word = args.find((a) => !a.startsWith("-"))
  // Global options take values (`--log-level debug`): only a first argument that is a word is a command.
  if (word === undefined || args[0] !== word || word === "sandboxer" || Object.hasOwn(COMMANDS, word)) {
    return undefined
  }
  const commands = Object.keys(COMMANDS)
  const names = processes()
  if (names.includes(word)) return `unknown command "${word}": did you mean \`kiln run ${word}\`?`
  const near = nearest(word, commands).map((c) => `\`kiln ${c}\``)
  const nearProcess = nearest(word, names).map((n) => `\`kiln run ${n}\``)
  const guesses = [...near, ...nearProcess]
  return guesses.length > 0
    ? `unknown command "${word}": did you mean ${either(guesses)}?`
    : `unknown command "${word}": the commands are ${either(commands)} (\`kiln --help\`)`
}
