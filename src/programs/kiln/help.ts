/**
 * `kiln --help` (and a bare `kiln`): what kiln is, its commands one a line, and the options every store command takes,
 * said once; `kiln store --help` and `kiln remote --help`, their commands; and every command's `--help` written the
 * same way, grouped, one line per option, from its table (`commandTable.ts`; @effect/cli's generated help of a
 * command was 60 to 350 lines, each store and remote option repeated under every command). The commands' one-line
 * summaries live here and are also their @effect/cli descriptions, so that the two say the same. Plain data: printing
 * it loads no parser.
 */
import { type OptionSpec } from "../common/optionSpec.js"
import { STORE_OPTIONS } from "../common/storeFlags.js"
import { COMMAND_SPECS, type OptionGroup } from "./commandTable.js"

/** What kiln is, in one line: the first line of its help. */
export const TAGLINE =
  "kiln: a hermetic process-execution engine for build tools: sandboxed processes, cached by content"

/** Each command's one line, in the order `kiln --help` lists them. */
export const COMMANDS = {
  run: "run processes of kiln.json (default: all) and their deps",
  ls: "list the processes of kiln.json, those its tasks give included, with their deps and whether each would run",
  graph: "print the processes and their deps as a graph (dot, mermaid or json)",
  explain: "say why processes would run or hit the cache, and what changed since their last run",
  logs: "print the stdout and stderr of a process's last run (a cache hit's: the cached result's)",
  verify: "re-run cached processes with the cache off; say which do not reproduce their cached outputs",
  exec: "run one process hermetically through the cache and a sandbox; exit with its code",
  store: "inspect and maintain the content-addressed store",
  schema: "print the JSON Schema of kiln.json (reference it with \"$schema\" for editor completion)",
  clean: "remove sandboxes left by engines that died",
  remote: "probe the remote cache, or upload what earlier runs left pending"
} as const

/** `kiln remote`'s subcommands, one line each. */
export const REMOTE_COMMANDS = {
  status: "probe the remote cache and print what it supports",
  flush: "upload the results earlier runs left pending; exit 1 while any are left"
} as const

/** `kiln store`'s subcommands, one line each. */
export const STORE_COMMANDS = {
  snapshot: "store a directory tree and print its digest",
  materialize: "write the tree DIGEST into DIR",
  cat: "print a file's bytes, or a directory's entries as JSON",
  ls: "list every entry of the tree DIGEST",
  rm: "remove a blob (file or directory entry) from the store",
  check: "re-hash every entry; exit 1 when any is corrupt",
  gc: "remove the least recently used unleased entries until the store fits a size",
  stats: "print entry counts, sizes, the cap and reader-table use",
  cap: "print the store's cap, or set it (SIZE, e.g. 50G) or go back to the default (`default`)"
} as const

/** The placeholder of an option's value in its usage, by kind (none for a choice, whose values are listed). */
export const METAVAR: Record<OptionSpec["kind"], string> = {
  file: "FILE",
  directory: "DIR",
  text: "TEXT",
  integer: "N",
  choice: "",
  boolean: "",
  size: "SIZE",
  duration: "DURATION",
  list: "TEXT"
}

const table = (rows: ReadonlyArray<readonly [string, string]>): Array<string> => {
  const width = Math.max(...rows.map(([left]) => left.length)) + 2
  return rows.map(([left, right]) => `  ${left.padEnd(width)}${right}`)
}

/** `--cache read-write|read|write|off`, `--trace FILE`, `--env NAME=VALUE`: how an option is written. */
export const usageOf = (spec: OptionSpec) =>
  spec.kind === "choice"
    ? `--${spec.flag} ${spec.choices.join("|")}`
    : `--${spec.flag} ${spec.metavar ?? METAVAR[spec.kind]}`.trim()

/** Headings bold on a terminal (as @effect/cli's help is), plain anywhere else or under NO_COLOR. */
const heading = (text: string, styled: boolean) => styled ? `\u001b[1m${text}\u001b[0m` : text

/** The short help: `kiln --help`, `kiln -h`, and a bare `kiln`. */
export const mainHelp = (styled = false): string =>
  [
    TAGLINE,
    "",
    `${heading("Usage:", styled)} kiln [--version] [--log-level LEVEL] [--completions SHELL] COMMAND [ARGS…]`,
    "",
    heading("Commands:", styled),
    ...table(Object.entries(COMMANDS)),
    "",
    heading("Store options", styled) + " (every command that opens the store):",
    ...table(Object.values(STORE_OPTIONS).map((spec: OptionSpec) => [usageOf(spec), spec.description])),
    "",
    "`kiln COMMAND --help` describes a command and every option it takes. `kiln --completions bash` (or zsh, fish,",
    "sh) prints a script that completes kiln's commands and options in that shell (README.md#a-tour).",
    ""
  ].join("\n")

const GROUPS = {
  store: { commands: STORE_COMMANDS, usage: "kiln store COMMAND [ARGS…] [OPTIONS…]" },
  remote: { commands: REMOTE_COMMANDS, usage: "kiln remote COMMAND [OPTIONS…]" }
} as const

/** `kiln store --help` (and a bare `kiln store`), `kiln remote --help`: the group's commands, one a line. */
export const groupHelp = (group: keyof typeof GROUPS, styled = false): string =>
  [
    `kiln ${group}: ${COMMANDS[group]}`,
    "",
    `${heading("Usage:", styled)} ${GROUPS[group].usage}`,
    "",
    heading("Commands:", styled),
    ...table(Object.entries(GROUPS[group].commands)),
    "",
    `The store options are in \`kiln --help\`; \`kiln ${group} COMMAND --help\` describes a command in full.`,
    ""
  ].join("\n")

/** A command's one line, by its words (`store gc`). */
export const summaryOf = (words: string): string => {
  const [first, second] = words.split(" ") as [string, string | undefined]
  const summaries: Record<string, string> = second === undefined
    ? COMMANDS
    : first === "store"
    ? STORE_COMMANDS
    : REMOTE_COMMANDS
  return summaries[second ?? first] ?? ""
}

/** The names of a group's options, a line at a time, for a group another help describes. */
const named = (options: ReadonlyArray<OptionSpec>): Array<string> => {
  const lines: Array<string> = []
  let line = ""
  for (const spec of options) {
    const word = `--${spec.flag}`
    if (line !== "" && line.length + word.length + 2 > 100) {
      lines.push(`  ${line},`)
      line = ""
    }
    line = line === "" ? word : `${line}, ${word}`
  }
  return line === "" ? lines : [...lines, `  ${line}`]
}

const groupLines = (group: OptionGroup, styled: boolean): Array<string> =>
  group.see !== undefined
    ? [`${heading(group.title, styled)} (\`${group.see}\` describes them):`, ...named(group.options)]
    : [heading(`${group.title}:`, styled), ...table(group.options.map((spec) => [usageOf(spec), spec.description]))]

/** A command's help, as `kiln --help` is written: grouped, one line per option. */
export const commandHelp = (words: string, styled = false): string | undefined => {
  const spec = COMMAND_SPECS[words]
  if (spec === undefined) return undefined
  return [
    `kiln ${words}: ${summaryOf(words)}`,
    "",
    `${heading("Usage:", styled)} ${spec.usage}`,
    ...spec.groups.flatMap((group) => ["", ...groupLines(group, styled)]),
    ...(spec.store ? ["", "It takes the store options too (`kiln --help`)."] : []),
    ""
  ].join("\n")
}
