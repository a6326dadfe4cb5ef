/**
 * The command line read before @effect/cli reads it: `--help` answered with kiln's own help (`help.ts`), and usage
 * errors in kiln's words, for what @effect/cli would otherwise say its own way (`Received unknown argument: '--bogus'`,
 * `Expected one of the following cases: …`, `'abc' is not a integer`, `Invalid subcommand for kiln - use one of …`, the
 * internal `sandboxer` listed): a command that is not one, with the nearest one; and every command's options read
 * against its table (`commandTable.ts`), each error naming the command, the option, what it takes and, for an unknown
 * one, the nearest. The direct reader of a plain `kiln run` (`runDirect.ts`) and @effect/cli then only ever see
 * arguments that parse, but for what only they can judge (a path that must exist, a size, a digest: `main.ts` says
 * those in one line too).
 *
 * Plain code without Effect or @effect/cli: checking costs nothing a run would not load anyway.
 */
import { nearest } from "../../domain/config/DidYouMean.js"
import { type OptionSpec } from "../common/optionSpec.js"
import { STORE_OPTIONS } from "../common/storeFlags.js"
import { COMMAND_SPECS, type CommandSpec } from "./commandTable.js"
import { commandHelp, COMMANDS, groupHelp, mainHelp, REMOTE_COMMANDS, STORE_COMMANDS, usageOf } from "./help.js"

/** The options @effect/cli gives every command. */
export const GLOBAL_OPTIONS: ReadonlyArray<string> = ["--log-level", "--completions", "--wizard", "--version"]

/** Those of them that take a value. */
const GLOBAL_VALUED: ReadonlyArray<string> = ["--log-level", "--completions"]

/** `"a"`, `"a" or "b"`, `"a", "b" or "c"`. */
const either = (words: ReadonlyArray<string>) =>
  words.length <= 1 ? words.join("") : `${words.slice(0, -1).join(", ")} or ${words.at(-1)}`

/** What @effect/cli's boolean options take as a value (`--keep-going=false`, `--json true`). */
const BOOLEAN_WORDS = /^(true|false|yes|no|on|off|y|n|1|0)$/i

/** What is wrong with `value` for `spec`, if anything. */
const valueProblem = (spec: OptionSpec, value: string): string | undefined => {
  if (spec.metavar?.includes("=") === true && !/^[^=]+=[^=]/.test(value)) {
    return `${JSON.stringify(value)} is not ${spec.metavar}`
  }
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

/** Every option a command takes, by its flag (`--json`). */
const optionsOf = (spec: CommandSpec): ReadonlyMap<string, OptionSpec> =>
  new Map(
    [...spec.groups.flatMap((group) => group.options), ...(spec.store ? Object.values(STORE_OPTIONS) : [])].map((
      option: OptionSpec
    ) => [`--${option.flag}`, option])
  )

const OPTIONS = new Map(Object.entries(COMMAND_SPECS).map(([words, spec]) => [words, optionsOf(spec)]))

/** The flags `kiln WORDS` takes (`--json`, …), as its parser must. */
export const flagsOf = (words: string): ReadonlyArray<string> => [...(OPTIONS.get(words)?.keys() ?? [])]

const isHelp = (arg: string) => arg === "--help" || arg === "-h"

/**
 * What is wrong with the arguments of `kiln WORDS` (`args`: those after its words), in one line, or undefined when
 * nothing is (the parser then reads them; a size, a duration or a digest is its to judge, naming the option too).
 */
export const argsProblem = (words: string, args: ReadonlyArray<string>): string | undefined => {
  const spec = COMMAND_SPECS[words]!
  const options = OPTIONS.get(words)!
  const command = `\`kiln ${words}\``
  const given: Array<string> = []
  for (let i = 0; i < args.length; i++) {
    const arg = args[i]!
    if (arg === "--") {
      given.push(...args.slice(i + 1))
      break
    }
    if (!arg.startsWith("-") || arg === "-") {
      given.push(arg)
      continue
    }
    if (isHelp(arg)) continue
    const eq = arg.indexOf("=")
    const flag = eq === -1 ? arg : arg.slice(0, eq)
    const option = options.get(flag)
    if (option === undefined) {
      // After its program, `kiln exec`'s arguments are the program's, but for its own options.
      if (spec.argv === true && given.length > 0) continue
      if (GLOBAL_OPTIONS.includes(flag)) {
        // `kiln run` is read without @effect/cli, which reads these only before the command's name.
        if (words === "run") return `${flag} goes before the command: \`kiln ${flag} … run\``
        if (eq === -1 && GLOBAL_VALUED.includes(flag)) i++
        continue
      }
      const near = nearest(flag, [...options.keys()]).map((f) => `\`${f}\``)
      return `unknown option ${flag} of ${command}${near.length > 0 ? `: did you mean ${either(near)}?` : ""}` +
        ` (\`kiln ${words} --help\` lists them)`
    }
    if (option.kind === "boolean") {
      if (eq !== -1 && !BOOLEAN_WORDS.test(arg.slice(eq + 1))) {
        return `${flag} takes no value: \`${flag}\` alone (or ${flag}=true|false), not \`${arg}\``
      }
      // @effect/cli reads a word after a flag as its value when it is one (`--json true`).
      if (eq === -1 && BOOLEAN_WORDS.test(args[i + 1] ?? "")) i++
      continue
    }
    const value = eq !== -1 ? arg.slice(eq + 1) : args[i + 1]
    if (value === undefined || value === "" || (eq === -1 && value.startsWith("--"))) {
      return `${flag} needs a value: \`kiln ${words} ${usageOf(option)}\``
    }
    if (eq === -1) i++
    const problem = valueProblem(option, value)
    if (problem !== undefined) return `${flag}: ${problem} (\`kiln ${words} ${usageOf(option)}\`)`
  }
  if (given.length < spec.args.min) return `${command} needs ${spec.args.name}: \`${spec.usage}\``
  if (given.length > spec.args.max) {
    return `${command} takes ${spec.args.max === 0 ? "no arguments" : `only ${spec.args.name}`}, not ` +
      `${JSON.stringify(given[spec.args.max])}: \`${spec.usage}\``
  }
  return undefined
}

/** What is wrong with `kiln run`'s arguments (`args` without `run`), in one line, if anything. */
export const runArgsProblem = (args: ReadonlyArray<string>): string | undefined => argsProblem("run", args)

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

const SUBCOMMANDS: Record<string, Record<string, string>> = { store: STORE_COMMANDS, remote: REMOTE_COMMANDS }

/** What is wrong with the word after `kiln store` or `kiln remote`, if it is not one of its commands. */
const subcommandProblem = (group: string, word: string | undefined): string | undefined => {
  const commands = Object.keys(SUBCOMMANDS[group]!)
  if (word !== undefined && commands.includes(word)) return undefined
  const all = `the ${group} commands are ${either(commands)} (\`kiln ${group} --help\`)`
  if (word === undefined || word.startsWith("-")) return `\`kiln ${group}\` needs a command: ${all}`
  const near = nearest(word, commands).map((c) => `\`kiln ${group} ${c}\``)
  return `unknown command "${word}" of \`kiln ${group}\`: ${near.length > 0 ? `did you mean ${either(near)}?` : all}`
}

/** How kiln answers its arguments before @effect/cli reads them, if it does. */
export type Reading =
  | { readonly _tag: "Help"; readonly text: string; readonly code: number }
  | { readonly _tag: "Problem"; readonly message: string }

const help = (text: string, code: number): Reading => ({ _tag: "Help", text, code })
const problem = (message: string | undefined): Reading | undefined =>
  message === undefined ? undefined : { _tag: "Problem", message }

/**
 * The command's words (none: `kiln --log-level debug`) and the arguments after them, past a `--log-level LEVEL` before
 * or between them; undefined when
 * another option of @effect/cli's comes first (`--completions bash`, `--version`), which is its to read.
 */
export const commandOf = (
  args: ReadonlyArray<string>
): { readonly words: string; readonly rest: ReadonlyArray<string> } | undefined => {
  const words: Array<string> = []
  let i = 0
  // How many arguments a `--log-level` at `j` takes up.
  const logLevelAt = (j: number) => args[j] === "--log-level" ? 2 : args[j]?.startsWith("--log-level=") ? 1 : 0
  const skipLogLevel = () => {
    for (let n = logLevelAt(i); n > 0; n = logLevelAt(i)) i += n
  }
  skipLogLevel()
  const first = args[i]
  if (first === undefined) return { words: "", rest: [] }
  if (first.startsWith("-")) return undefined
  words.push(first)
  i++
  if (Object.hasOwn(SUBCOMMANDS, first)) {
    skipLogLevel()
    const second = args[i]
    if (second !== undefined && !second.startsWith("-")) {
      words.push(second)
      i++
    }
  }
  return { words: words.join(" "), rest: args.slice(i) }
}

/**
 * kiln's answer to `kiln ARGS` when it has one before @effect/cli's parser: its help (`--help`, a bare `kiln`, a bare
 * `kiln store`), or a usage error in one line. A bare `kiln` (or `kiln store`) prints its help as git does, and fails
 * as git does: nothing was done, so a script that ran `kiln $COMMAND` with an empty one must not go on as if it had
 * (exit 2, kiln's usage error). `--wizard` (@effect/cli's prompts for every option, in its own words, the internal
 * `sandboxer` offered) is refused: `--help` says it all.
 */
export const readArgs = (
  args: ReadonlyArray<string>,
  styled: boolean,
  processes: () => ReadonlyArray<string> = () => []
): Reading | undefined => {
  const end = args.indexOf("--")
  const before = end === -1 ? args : args.slice(0, end)
  const asked = before.some(isHelp)
  if (before.includes("--wizard")) {
    return problem(
      "--wizard is not one of kiln's options: `kiln --help` lists the commands, `kiln COMMAND --help` " +
        "every option a command takes"
    )
  }
  if (args.length === 0 || (asked && isHelp(args[0]!))) return help(mainHelp(styled), asked ? 0 : 2)
  const command = commandOf(args)
  if (command === undefined || command.words === "sandboxer") return undefined
  if (command.words === "") return help(mainHelp(styled), 2)
  const unknown = commandProblem([command.words.split(" ")[0]!], processes)
  if (unknown !== undefined) return problem(unknown)
  if (Object.hasOwn(SUBCOMMANDS, command.words)) {
    const group = command.words as "store" | "remote"
    if (asked || command.rest.length === 0) return help(groupHelp(group, styled), asked ? 0 : 2)
    return problem(subcommandProblem(group, command.rest[0]))
  }
  if (command.words.includes(" ")) {
    const [group, word] = command.words.split(" ") as [string, string]
    const wrong = subcommandProblem(group, word)
    if (wrong !== undefined) return problem(wrong)
  }
  if (asked) return help(commandHelp(command.words, styled)!, 0)
  return problem(argsProblem(command.words, command.rest))
}

/** @effect/cli's phrasings, in kiln's. */
const PHRASES: ReadonlyArray<readonly [RegExp, string]> = [
  [/^Path '(.*)' must exist$/, "$1 does not exist"],
  [/^Path '(.*)' must not exist$/, "$1 exists already"],
  [/^Received unknown argument: '(.*)'$/, "unexpected argument \"$1\""],
  [/^Missing argument <(.*)>$/, "missing $1"],
  [/ is not a integer/g, " is not an integer"]
]

/**
 * A usage error only @effect/cli's parser found (`text`, as it printed it), in one line as kiln's others are, with
 * where the command's options are described (`words`: the command, when the arguments name one).
 */
export const cliProblem = (text: string, words: string | undefined): string => {
  const line = text.split("\n").map((l) => l.trim()).filter((l) => l !== "").join(" ")
  const said = PHRASES.reduce((s, [pattern, phrase]) => s.replace(pattern, phrase), line)
  return words !== undefined && Object.hasOwn(COMMAND_SPECS, words) ? `${said} (\`kiln ${words} --help\`)` : said
}
