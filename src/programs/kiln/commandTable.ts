/**
 * Every command's options and arguments, declared once, as plain data: each command's @effect/cli options are made
 * from its table (`cliOptions`), its `--help` is written from it (`help.ts`), and its arguments are checked against it
 * before @effect/cli reads them (`usage.ts`), so that the three cannot drift apart (`test/cli/helpText.test.ts` holds
 * each parser to its table). Nothing here may import @effect/cli or Effect's runtime: `kiln --help` loads it.
 */
import { type OptionSpec } from "../common/optionSpec.js"
import { STORE_OPTIONS } from "../common/storeFlags.js"
import { REMOTE_OPTIONS, RUN_OPTIONS, SANDBOX_MODE_OPTION, SANDBOX_OPTIONS, SELECTION_OPTIONS } from "./optionTable.js"

const CONFIG = { config: RUN_OPTIONS.config } as const

const json = (description: string) => ({ kind: "boolean", flag: "json", description, fast: false }) as const

/** `kiln ls`'s options besides the store's. */
export const LS_OPTIONS = {
  ...CONFIG,
  ...SELECTION_OPTIONS,
  json: json(
    "print the dry run as JSON: plan (each process's name, deps, status hit or run, reason, actionDigest), " +
      "and the processes as kiln.json would hold them written out, with their origins"
  )
} as const satisfies Record<string, OptionSpec>

/** `kiln graph`'s options. */
export const GRAPH_OPTIONS = {
  ...CONFIG,
  ...SELECTION_OPTIONS,
  format: {
    kind: "choice",
    flag: "format",
    choices: ["dot", "mermaid", "json"],
    default: "dot",
    description: "dot (Graphviz, the default), mermaid, or json ({ nodes: [{ name, deps }], edges })",
    fast: []
  }
} as const satisfies Record<string, OptionSpec>

/** `kiln explain`'s options besides the remote and store ones. */
export const EXPLAIN_OPTIONS = {
  ...CONFIG,
  json: json(
    "print a JSON array: per process name, status (hit or run), reason, actionDigest, lastActionDigest, " +
      "changes, notes, remote"
  )
} as const satisfies Record<string, OptionSpec>

/** `kiln logs`'s options besides the store's. */
export const LOGS_OPTIONS = CONFIG

/** `kiln verify`'s own options; it takes the sandbox, remote and store ones too. */
export const VERIFY_OPTIONS = {
  ...CONFIG,
  concurrency: RUN_OPTIONS.concurrency,
  sample: {
    kind: "integer",
    flag: "sample",
    description: "re-run only N of the cached processes, chosen at random",
    fast: false
  },
  json: json("print the verification as JSON on stdout"),
  evict: {
    kind: "boolean",
    flag: "evict",
    description: "remove the cache entries that did not reproduce (nothing changes without it)",
    fast: false
  }
} as const satisfies Record<string, OptionSpec>

/** `kiln exec`'s own options; it takes the sandbox, remote and store ones too. */
export const EXEC_OPTIONS = {
  input: { kind: "text", flag: "input", metavar: "DIGEST", description: "the input tree, as a digest", fast: false },
  inputDir: {
    kind: "directory",
    flag: "input-dir",
    description: "the input tree, snapshotted from a directory (not with --input)",
    fast: false
  },
  output: {
    kind: "list",
    flag: "output",
    metavar: "PATH",
    description: "a declared output path; a trailing `/` makes it a directory (repeatable)",
    fast: false
  },
  env: {
    kind: "list",
    flag: "env",
    metavar: "NAME=VALUE",
    description: "an environment variable (repeatable; the process sees only these, PATH too)",
    fast: false
  },
  timeout: {
    kind: "duration",
    flag: "timeout",
    description: "kill the process group after this long, e.g. 90s, 5m",
    fast: false
  },
  workingDirectory: {
    kind: "text",
    flag: "working-directory",
    metavar: "PATH",
    default: "",
    description: "where the process starts, relative to the sandbox root",
    fast: false
  },
  cache: {
    kind: "choice",
    flag: "cache",
    choices: ["successful", "always", "never"],
    default: "successful",
    description: "which results go into the action cache: a successful one (the default), any, or none",
    fast: []
  },
  json: json("print the result as one JSON object instead of the process's output")
} as const satisfies Record<string, OptionSpec>

/** `kiln clean`'s options. */
export const CLEAN_OPTIONS = {
  sandboxRoot: SANDBOX_OPTIONS.sandboxRoot,
  kept: { kind: "boolean", flag: "kept", description: "also remove sandboxes kept by --keep-sandboxes", fast: false }
} as const satisfies Record<string, OptionSpec>

/** `kiln remote status` and `kiln remote flush`'s options besides the store's. */
export const REMOTE_COMMAND_OPTIONS = { ...CONFIG, ...REMOTE_OPTIONS } as const satisfies Record<string, OptionSpec>

/** The options of `kiln store`'s commands besides the store's. */
export const STORE_COMMAND_OPTIONS = {
  snapshot: {
    globs: {
      kind: "list",
      flag: "glob",
      metavar: "GLOB",
      description: "include only paths matching this glob (relative to DIR; a leading `!` excludes; repeatable)",
      fast: false
    }
  },
  materialize: {
    mutable: {
      kind: "list",
      flag: "mutable",
      metavar: "PATH",
      description: "a path that must be a writable copy, never a hard link (`.` for all; repeatable)",
      fast: false
    }
  },
  check: {
    repair: {
      kind: "boolean",
      flag: "repair",
      description: "remove every entry found corrupt, and set aside a shard whose file is truncated",
      fast: false
    },
    json: json("print the report as JSON")
  },
  gc: {
    targetSize: {
      kind: "size",
      flag: "target-size",
      description: "shrink the store to this size (e.g. 10G); default: the store's cap",
      fast: false
    },
    auto: {
      kind: "boolean",
      flag: "auto",
      description: "what kiln runs after a run that took the store over its cap: nothing if another collection is " +
        "running, else shrink the store to 90% of its cap when it is over it (and measure it in any case)",
      fast: false
    },
    json: json("print the report as JSON")
  },
  stats: { json: json("print the counts as JSON") }
} as const satisfies Record<string, Record<string, OptionSpec>>

/** A group of options in a command's help: described one a line, or (`see`) named only, where `see` describes them. */
export interface OptionGroup {
  readonly title: string
  readonly options: ReadonlyArray<OptionSpec>
  readonly see?: string
}

/** A command's words after `kiln`, its usage, what it takes, and how its help groups its options. */
export interface CommandSpec {
  readonly usage: string
  /** How many words (not options) it takes, and what they are called in errors. */
  readonly args: { readonly min: number; readonly max: number; readonly name: string }
  readonly groups: ReadonlyArray<OptionGroup>
  /** It takes the store options (`kiln --help` describes them). */
  readonly store: boolean
  /** Its first word is a program: an option after it that is not the command's is the program's (`kiln exec`). */
  readonly argv?: true
}

const specs = (table: Record<string, OptionSpec>): ReadonlyArray<OptionSpec> => Object.values(table)

const group = (title: string, table: Record<string, OptionSpec>): OptionGroup => ({ title, options: specs(table) })

/** The remote options, named only: `kiln run --help` describes them. */
const REMOTE_NAMED: OptionGroup = {
  title: "Remote cache",
  options: specs(REMOTE_OPTIONS),
  see: "kiln run --help"
}

const SANDBOXES = { ...SANDBOX_OPTIONS, reuseSandboxes: RUN_OPTIONS.reuseSandboxes }

/** `kiln run`'s own options: its table without the sandbox, remote and store options, which have their groups. */
const RUN_OWN = Object.fromEntries(
  Object.entries(RUN_OPTIONS).filter(([, spec]) =>
    ![...specs(SANDBOXES), ...specs(REMOTE_OPTIONS), ...specs(STORE_OPTIONS)].some((s) => s.flag === spec.flag)
  )
)

const NONE = { min: 0, max: 0, name: "" } as const
const NAMES = { min: 0, max: Infinity, name: "NAME" } as const
const DIGEST = { min: 1, max: 1, name: "DIGEST" } as const

const storeCommand = (usage: string, args: CommandSpec["args"], own: Record<string, OptionSpec> = {}) => ({
  usage: `kiln store ${usage} [OPTIONS…]`,
  args,
  groups: Object.keys(own).length > 0 ? [group("Options", own)] : [],
  store: true
})

/** Every command, by its words (`store gc`), but the internal `sandboxer` and the groups `store` and `remote`. */
export const COMMAND_SPECS: Record<string, CommandSpec> = {
  run: {
    usage: "kiln run [NAME…] [OPTIONS…]",
    args: NAMES,
    groups: [
      group("Options", RUN_OWN),
      group("Sandboxes", SANDBOXES),
      group("Remote cache and execution", REMOTE_OPTIONS)
    ],
    store: true
  },
  ls: { usage: "kiln ls [NAME…] [OPTIONS…]", args: NAMES, groups: [group("Options", LS_OPTIONS)], store: true },
  graph: {
    usage: "kiln graph [NAME…] [OPTIONS…]",
    args: NAMES,
    groups: [group("Options", GRAPH_OPTIONS)],
    store: false
  },
  explain: {
    usage: "kiln explain NAME… [OPTIONS…]",
    args: { min: 1, max: Infinity, name: "NAME" },
    groups: [group("Options", EXPLAIN_OPTIONS), REMOTE_NAMED],
    store: true
  },
  logs: {
    usage: "kiln logs NAME [OPTIONS…]",
    args: { min: 1, max: 1, name: "NAME" },
    groups: [group("Options", LOGS_OPTIONS)],
    store: true
  },
  verify: {
    usage: "kiln verify [NAME…] [OPTIONS…]",
    args: NAMES,
    groups: [group("Options", VERIFY_OPTIONS), group("Sandboxes", SANDBOX_OPTIONS), REMOTE_NAMED],
    store: true
  },
  exec: {
    usage: "kiln exec [OPTIONS…] [--] PROGRAM [ARG…]",
    args: { min: 1, max: Infinity, name: "PROGRAM" },
    groups: [
      group("Options", EXEC_OPTIONS),
      group("Sandboxes", { ...SANDBOX_MODE_OPTION, ...SANDBOX_OPTIONS }),
      { ...REMOTE_NAMED, title: "Remote cache and execution" }
    ],
    store: true,
    argv: true
  },
  schema: { usage: "kiln schema", args: NONE, groups: [], store: false },
  clean: { usage: "kiln clean [OPTIONS…]", args: NONE, groups: [group("Options", CLEAN_OPTIONS)], store: false },
  "store snapshot": storeCommand("snapshot DIR", { min: 1, max: 1, name: "DIR" }, STORE_COMMAND_OPTIONS.snapshot),
  "store materialize": storeCommand(
    "materialize DIGEST DIR",
    { min: 2, max: 2, name: "DIGEST DIR" },
    STORE_COMMAND_OPTIONS.materialize
  ),
  "store cat": storeCommand("cat DIGEST", DIGEST),
  "store ls": storeCommand("ls DIGEST", DIGEST),
  "store rm": storeCommand("rm DIGEST", DIGEST),
  "store check": storeCommand("check", NONE, STORE_COMMAND_OPTIONS.check),
  "store gc": storeCommand("gc", NONE, STORE_COMMAND_OPTIONS.gc),
  "store stats": storeCommand("stats", NONE, STORE_COMMAND_OPTIONS.stats),
  "store cap": storeCommand("cap [SIZE|default]", { min: 0, max: 1, name: "SIZE" }),
  "remote status": {
    usage: "kiln remote status [OPTIONS…]",
    args: NONE,
    groups: [group("Options", REMOTE_COMMAND_OPTIONS)],
    store: true
  },
  "remote flush": {
    usage: "kiln remote flush [OPTIONS…]",
    args: NONE,
    groups: [group("Options", REMOTE_COMMAND_OPTIONS)],
    store: true
  }
}
