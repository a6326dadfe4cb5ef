/**
 * `kiln --help` (and a bare `kiln`): what kiln is, its commands one a line, and the options every store command takes,
 * said once; and `kiln run --help`, `kiln ls --help`, `kiln explain --help` and `kiln remote … --help` written the
 * same way, grouped, one line per option, from the option tables (@effect/cli's generated help of `run` was 350
 * lines). The other commands' help is @effect/cli's. The commands' one-line summaries live here and are also their
 * @effect/cli descriptions, so that the two say the same. Plain data: printing it loads no parser.
 */
import { type OptionSpec } from "../common/optionSpec.js"
import { STORE_OPTIONS } from "../common/storeFlags.js"
import { REMOTE_OPTIONS, RUN_OPTIONS, SANDBOX_OPTIONS } from "./optionTable.js"

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

const flagOf = (spec: OptionSpec) =>
  spec.kind === "choice" ? `--${spec.flag} ${spec.choices.join("|")}` : `--${spec.flag} ${METAVAR[spec.kind]}`.trim()

/** Headings bold on a terminal (as @effect/cli's help is), plain anywhere else or under NO_COLOR. */
const heading = (text: string, styled: boolean) => styled ? `\u001b[1m${text}\u001b[0m` : text

/** The short help: `kiln --help`, `kiln -h`, and a bare `kiln`. */
export const mainHelp = (styled = false): string =>
  [
    TAGLINE,
    "",
    `${heading("Usage:", styled)} kiln [--version] [--log-level LEVEL] COMMAND [ARGS…]`,
    "",
    heading("Commands:", styled),
    ...table(Object.entries(COMMANDS)),
    "",
    heading("Store options", styled) + " (run, explain, exec and every store command):",
    ...table(Object.values(STORE_OPTIONS).map((spec: OptionSpec) => [flagOf(spec), spec.description])),
    "",
    "`kiln COMMAND --help` describes a command and every option it takes.",
    ""
  ].join("\n")

/** `kiln store --help` and a bare `kiln store`: its subcommands; their options are in `kiln store NAME --help`. */
export const storeHelp = (styled = false): string =>
  [
    `kiln store: ${COMMANDS.store}`,
    "",
    `${heading("Usage:", styled)} kiln store COMMAND [ARGS…] [STORE OPTIONS…]`,
    "",
    heading("Commands:", styled),
    ...table(Object.entries(STORE_COMMANDS)),
    "",
    "The store options are in `kiln --help`; `kiln store COMMAND --help` describes a command in full.",
    ""
  ].join("\n")

const specs = (table: Record<string, OptionSpec>): ReadonlyArray<OptionSpec> => Object.values(table)

/** `kiln run`'s own options: its table without the sandbox, remote and store options, which have their groups. */
const RUN_OWN = specs(RUN_OPTIONS).filter((spec) =>
  ![...specs(SANDBOX_OPTIONS), ...specs(REMOTE_OPTIONS), ...specs(STORE_OPTIONS)].some((s) => s.flag === spec.flag) &&
  spec.flag !== "reuse-sandboxes"
)

interface CommandHelp {
  readonly usage: string
  readonly summary: string
  readonly groups: ReadonlyArray<readonly [string, ReadonlyArray<OptionSpec>]>
  readonly store: boolean
}

const CONFIG = [RUN_OPTIONS.config]
const SANDBOXES = [...specs(SANDBOX_OPTIONS), RUN_OPTIONS.reuseSandboxes]

/** The commands whose help is kiln's own, by their words (`remote status`). */
const COMMAND_HELP: Record<string, CommandHelp> = {
  run: {
    usage: "kiln run [NAME…] [OPTIONS…]",
    summary: COMMANDS.run,
    groups: [["Options:", RUN_OWN], ["Sandboxes:", SANDBOXES], ["Remote cache and execution:", specs(REMOTE_OPTIONS)]],
    store: true
  },
  ls: {
    usage: "kiln ls [--config FILE] [--json]",
    summary: COMMANDS.ls,
    groups: [[
      "Options:",
      [...CONFIG, {
        kind: "boolean",
        flag: "json",
        description: "print the processes as kiln.json would hold them written out, with their origins",
        fast: false
      }]
    ]],
    store: false
  },
  explain: {
    usage: "kiln explain NAME [OPTIONS…]",
    summary: COMMANDS.explain,
    groups: [["Options:", CONFIG], ["Remote cache:", specs(REMOTE_OPTIONS)]],
    store: true
  },
  "remote status": {
    usage: "kiln remote status [OPTIONS…]",
    summary: REMOTE_COMMANDS.status,
    groups: [["Options:", [...CONFIG, ...specs(REMOTE_OPTIONS)]]],
    store: true
  },
  "remote flush": {
    usage: "kiln remote flush [OPTIONS…]",
    summary: REMOTE_COMMANDS.flush,
    groups: [["Options:", [...CONFIG, ...specs(REMOTE_OPTIONS)]]],
    store: true
  }
}

/** A command's help, as `kiln --help` is written: grouped, one line per option. */
export const commandHelp = (words: string, styled = false): string | undefined => {
  const help = COMMAND_HELP[words]
  if (help === undefined) return undefined
  return [
    `kiln ${words}: ${help.summary}`,
    "",
    `${heading("Usage:", styled)} ${help.usage}`,
    ...help.groups.flatMap(([title, group]) => [
      "",
      heading(title, styled),
      ...table(group.map((spec) => [flagOf(spec), spec.description]))
    ]),
    ...(help.store ? ["", "It takes the store options too (`kiln --help`)."] : []),
    ""
  ].join("\n")
}

/**
 * The short help these arguments ask for, and the exit code it ends with, or undefined for anything else. A bare
 * `kiln` (or `kiln store`) prints it as git does, and fails as git does: nothing was done, so a script that ran
 * `kiln $COMMAND` with an empty one must not go on as if it had (exit 2, kiln's usage error).
 */
export const shortHelp = (
  args: ReadonlyArray<string>,
  styled: boolean
): { readonly text: string; readonly code: number } | undefined => {
  const asked = args.length > 0 && (args.at(-1) === "--help" || args.at(-1) === "-h")
  const command = asked ? args.slice(0, -1) : args
  if (command.length === 0) return { text: mainHelp(styled), code: asked ? 0 : 2 }
  if (command.length === 1 && command[0] === "store") return { text: storeHelp(styled), code: asked ? 0 : 2 }
  const own = asked ? commandHelp(command.join(" "), styled) : undefined
  return own !== undefined ? { text: own, code: 0 } : undefined
}
