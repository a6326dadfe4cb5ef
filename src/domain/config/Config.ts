/**
 * `kiln.json`: the processes of a workspace, validated by one Schema that also emits the JSON Schema editors use.
 *
 * @since 0.1.0
 */
import * as Either from "effect/Either"
import * as Schema from "effect/Schema"
import * as DurationText from "../DurationText.js"
import { Expected, problemsOf, reservedKeyIn } from "../internal/configIssues.js"
import * as Salvage from "../internal/configSalvage.js"
import { pathText, problemText, quoted } from "../internal/fieldText.js"
import { placesUnder, problemsIn } from "../internal/processChecks.js"
import { CachePolicy } from "../Process.js"
import * as ConfigText from "./ConfigText.js"
import { needsResolving } from "./ResolvedConfig.js"

const Duration = Schema.String.pipe(
  Schema.filter((s) =>
    Either.isRight(DurationText.parse(s)) || `invalid duration ${quoted(s)}: expected e.g. "90s" or "5m"`
  ),
  Schema.annotations({
    description: "a duration: a number and a unit (ms, s, m, h), e.g. \"90s\"",
    [Expected]: "a duration such as \"60s\""
  })
)

const PassEnv = Schema.Array(Schema.String).annotations({
  description: "variables taken from kiln's environment, `NAME` or `NAME=default` (the value when it is unset; " +
    "else unset is an error), part of the action key: a new value runs the process again"
})

const HostPaths = Schema.Array(Schema.String).annotations({
  description: "host paths (absolute, outside the workspace) the process sees read-only at their own path beside the " +
    "system's directories, e.g. [\"/opt/toolchain\"]: a toolchain or licence file it needs; part of the action key"
})

const Network = Schema.Boolean.annotations({
  description: "true: the process keeps the network (by default it has only a loopback of its own); part of the " +
    "action key"
})

/**
 * How processes are sandboxed: `strict` (each sees only its inputs and the system's directories, else the run is
 * refused), `auto` (the default: strict where this machine can, else as `off` with one warning line), `off` (no more
 * than a sandbox directory, and the read-only mounts of shared trees).
 *
 * @since 0.1.0
 * @category schemas
 */
export const SandboxSetting = Schema.Literal("strict", "auto", "off")

const PassThroughEnv = Schema.Array(Schema.String).annotations({
  description: "variables passed from kiln's environment (`NAME` or `NAME=default`) for secrets: never part of the " +
    "action key, never stored, uploaded or printed; a process with any never executes remotely"
})

/**
 * @since 0.1.0
 * @category schemas
 */
export const ProcessConfig = Schema.Struct({
  argv: Schema.Array(Schema.String).pipe(
    Schema.minItems(1, { message: () => "must not be empty: its first element is the command to run" })
  ).annotations({ description: "the command and its arguments" }),
  inputs: Schema.optional(Schema.Array(Schema.String)).annotations({
    description: "globs relative to the workspace root; a leading `!` excludes"
  }),
  optionalInputs: Schema.optional(Schema.Array(Schema.String)).annotations({
    description: "more inputs, globs or paths relative to the workspace root, that may match nothing (an input must " +
      "match something, and one that names a path must be there before the run)"
  }),
  deps: Schema.optional(Schema.Array(Schema.String)).annotations({
    description: "processes whose outputs are laid into this one's input tree at their workspace paths"
  }),
  outputs: Schema.optional(Schema.Array(Schema.String)).annotations({
    description: "output files, and directories with a trailing `/`, relative to the working directory; a leading " +
      "`?`: one the process may leave unmade (else leaving it unmade is warned of, and the result is not cached)"
  }),
  env: Schema.optional(Schema.Record({ key: Schema.String, value: Schema.String })).annotations({
    description: "exactly the environment the process sees (PATH only if declared), with passEnv and passThroughEnv"
  }),
  passEnv: Schema.optional(PassEnv),
  passThroughEnv: Schema.optional(PassThroughEnv),
  workingDirectory: Schema.optional(Schema.String),
  timeout: Schema.optional(Duration),
  cache: Schema.optional(CachePolicy),
  namedCaches: Schema.optional(
    Schema.Record({
      key: Schema.String.pipe(Schema.pattern(/^[a-z0-9_]+$/, { message: () => "a named cache's name is [a-z0-9_]+" })),
      value: Schema.String
    })
  ),
  platform: Schema.optional(Schema.Record({ key: Schema.String, value: Schema.String })).annotations({
    description: "REAPI platform properties a remote executor matches workers by (part of the action key)"
  }),
  remote: Schema.optional(Schema.Boolean).annotations({
    description: "false: never execute remotely (a process that reads the developer's machine)"
  }),
  outputSymlinks: Schema.optional(Schema.Literal("contained", "any")).annotations({
    description: "where the process's output symlinks may point: `contained` (the default) only inside its working " +
      "directory (no absolute target, no `..` past it), whether it made them or a cache gave them; `any` anywhere"
  }),
  writableInputs: Schema.optional(Schema.Array(Schema.String)).annotations({
    description:
      "input paths (files or directories, relative to the workspace root) the process writes into: it gets " +
      "a private writable copy of each; the rest of a large input tree is shared read-only between processes"
  }),
  hostPaths: Schema.optional(HostPaths),
  network: Schema.optional(Network)
})

/**
 * @since 0.1.0
 * @category models
 */
export type ProcessConfig = typeof ProcessConfig.Type

const { argv: _argv, workingDirectory: _workingDirectory, ...sharedProcessFields } = ProcessConfig.fields

/**
 * A task: what every workspace package with a script of the task's name runs (see `layers/tasks/Tasks.ts`). Its
 * paths are relative to the package's directory, except `rootInputs`; the rest is a process's.
 *
 * @since 0.1.0
 * @category schemas
 */
export const TaskConfig = Schema.Struct({
  ...sharedProcessFields,
  deps: Schema.optional(Schema.Array(Schema.String)).annotations({
    description: "`build`: the package's own build; `^build`: the builds of its workspace dependencies (transitive); " +
      "`pkg#build`: that package's; any other name: that process"
  }),
  inputs: Schema.optional(Schema.Array(Schema.String)).annotations({
    description: "globs relative to the package, instead of all its files (the workspace's files a package " +
      "resolves from stay inputs); a leading `!` excludes"
  }),
  optionalInputs: Schema.optional(Schema.Array(Schema.String)).annotations({
    description: "more inputs, globs or paths relative to the package, that may match nothing in some packages (an " +
      "input that names a path must be there in every package with the task)"
  }),
  rootInputs: Schema.optional(Schema.Array(Schema.String)).annotations({
    description: "more inputs: globs relative to the workspace root"
  }),
  outputs: Schema.optional(Schema.Array(Schema.String)).annotations({
    description: "output files, and directories with a trailing `/`, relative to the package; a leading `?`: one " +
      "the script may leave unmade"
  }),
  env: Schema.optional(Schema.Record({ key: Schema.String, value: Schema.String })).annotations({
    description: "variables the script gets besides its PATH (every node_modules/.bin from the package up, then the " +
      "system's); a PATH here replaces that one"
  }),
  namedCaches: Schema.optional(
    Schema.Record({
      key: Schema.String.pipe(Schema.pattern(/^[a-z0-9_]+$/, { message: () => "a named cache's name is [a-z0-9_]+" })),
      value: Schema.String
    })
  ).annotations({ description: "directories kept across runs, relative to the package" }),
  writableInputs: Schema.optional(Schema.Array(Schema.String)).annotations({
    description: "input paths, relative to the package, the process writes into (a private writable copy of each)"
  })
})

/**
 * @since 0.1.0
 * @category models
 */
export type TaskConfig = typeof TaskConfig.Type

/**
 * The remote cache, as kiln.json may name it (the command line and `KILN_REMOTE_CACHE` win over it).
 *
 * @since 0.1.0
 * @category schemas
 */
export const RemoteConfig = Schema.Struct({
  cache: Schema.optional(Schema.String).annotations({
    description: "the remote cache: grpc://host:port, grpcs://host:port (TLS) or http(s)://host:port[/prefix]"
  }),
  instanceName: Schema.optional(Schema.String),
  headers: Schema.optional(Schema.Record({ key: Schema.String, value: Schema.String })).annotations({
    description:
      "literal headers sent with every call; a secret is the user's to give (--remote-header NAME=$VAR), never the repository's"
  }),
  executor: Schema.optional(Schema.String).annotations({
    description: "a REAPI executor (grpc:// or grpcs://) to run processes on; its CAS and action cache are the cache"
  }),
  ca: Schema.optional(Schema.String).annotations({ description: "a CA certificate (PEM), relative to the workspace" }),
  clientCert: Schema.optional(Schema.String).annotations({ description: "a client certificate (PEM) for mTLS" }),
  clientKey: Schema.optional(Schema.String).annotations({ description: "the client certificate's key (PEM)" }),
  mode: Schema.optional(Schema.Literal("read-write", "read", "write")),
  required: Schema.optional(Schema.Boolean).annotations({
    description: "an unreachable or failing remote fails the run (for CI)"
  }),
  timeout: Schema.optional(Duration)
})

/**
 * What every process gets unless it says otherwise (`ResolvedConfig.ts`): `env` and the variables passed under its
 * own, `inputs`, `optionalInputs` and `hostPaths` added to its own, `timeout`, `cache` and `network` where it has none.
 *
 * @since 0.1.0
 * @category schemas
 */
export const DefaultsConfig = Schema.Struct({
  env: Schema.optional(Schema.Record({ key: Schema.String, value: Schema.String })).annotations({
    description: "variables every process gets (a process's own env, passEnv or passThroughEnv win, name by name)"
  }),
  passEnv: Schema.optional(PassEnv),
  passThroughEnv: Schema.optional(PassThroughEnv),
  inputs: Schema.optional(Schema.Array(Schema.String)).annotations({
    description: "globs relative to the workspace root added to every process's inputs"
  }),
  optionalInputs: Schema.optional(Schema.Array(Schema.String)).annotations({
    description: "globs or paths relative to the workspace root added to every process's optionalInputs: inputs " +
      "that may match nothing"
  }),
  timeout: Schema.optional(Duration),
  cache: Schema.optional(CachePolicy),
  hostPaths: Schema.optional(HostPaths),
  network: Schema.optional(Network)
})

const configFields = {
  $schema: Schema.optional(Schema.String),
  defaults: Schema.optional(DefaultsConfig).annotations({
    description: "what every process, explicit or a task's, gets unless it says otherwise: env, passEnv, " +
      "passThroughEnv, inputs and optionalInputs (added), timeout, cache, hostPaths (added), network"
  }),
  sandbox: Schema.optional(SandboxSetting).annotations({
    description: "strict: every process sees only its inputs and the system's directories, and a machine that " +
      "cannot do that refuses to run (for CI); auto (the default): strict where the machine can, else a warning; " +
      "off: no more than a sandbox directory (for debugging). --sandbox wins over it"
  }),
  /** Goes into every action's salt: a new namespace disowns every result cached under the old one. */
  cacheNamespace: Schema.optional(Schema.String).annotations({
    description: "a namespace for cached results (REAPI Action.salt): change it to disown a poisoned cache"
  }),
  remote: Schema.optional(RemoteConfig),
  platform: Schema.optional(Schema.Record({ key: Schema.String, value: Schema.String })).annotations({
    description: "the default platform properties of every process (a process's own win, name by name)"
  }),
  tasks: Schema.optional(Schema.Record({ key: Schema.String, value: TaskConfig })).annotations({
    description: "tasks of the workspace's packages, declared once: `build` gives `build:<package>` for every " +
      "package with a `build` script; `pkg#build` declares it for that package alone"
  })
}

const processesField = Schema.Record({ key: Schema.String, value: ProcessConfig }).annotations({
  description: "processes by name"
})

/**
 * kiln.json as decoded: `processes` is there (empty for a config of tasks alone).
 *
 * @since 0.1.0
 * @category schemas
 */
export const Config = Schema.Struct({
  ...configFields,
  processes: Schema.optionalWith(processesField, { default: () => ({}) })
}).annotations({ identifier: "KilnConfig", title: "kiln.json" })

/**
 * kiln.json as written, which `kiln schema` prints: `Config`'s fields, `processes` optional (a default in the schema
 * would make its JSON Schema that of the encoded side, without the fields' descriptions).
 *
 * @since 0.1.0
 * @category schemas
 */
export const ConfigFile = Schema.Struct({ ...configFields, processes: Schema.optional(processesField) })
  .annotations({ identifier: "KilnConfig", title: "kiln.json" })

/**
 * @since 0.1.0
 * @category models
 */
export type Config = typeof Config.Type

const LocationSchema = Schema.Struct({ line: Schema.Number, column: Schema.Number, text: Schema.String })

/**
 * One error of a config file: the field (its JSON path), what is wrong, and where the file has it.
 *
 * @since 0.1.0
 * @category errors
 */
export const ConfigProblem = Schema.Struct({
  path: Schema.String,
  detail: Schema.String,
  location: Schema.optional(LocationSchema)
})

/**
 * @since 0.1.0
 * @category errors
 */
export type ConfigProblem = typeof ConfigProblem.Type

/**
 * A configuration error: a line naming the file (with the line and column when known), the field and what is
 * wrong, the file's line with a caret under the place; and every further error of the file (`more`), each the same
 * way. Exit code 2.
 *
 * @since 0.1.0
 * @category errors
 */
export class InvalidConfig extends Schema.TaggedError<InvalidConfig>("kiln/InvalidConfig")("InvalidConfig", {
  file: Schema.String,
  path: Schema.String,
  detail: Schema.String,
  location: Schema.optional(LocationSchema),
  more: Schema.optional(Schema.Array(ConfigProblem))
}) {
  override get message(): string {
    // What the JSON parser or the schema quotes of the file (a token, a value) is escaped too: no escapes reach the
    // terminal, and no line is the file's but the quoted one.
    return [this, ...(this.more ?? [])].map((problem) => problemText(this.file, problem)).join("\n")
  }
}

/**
 * An error of `file` with every problem found: the first is the error's own fields, the rest its `more`.
 *
 * @since 0.1.0
 * @category errors
 */
export const invalidConfig = (file: string, problems: ReadonlyArray<ConfigProblem>): InvalidConfig => {
  const [first, ...rest] = problems
  return new InvalidConfig({
    file,
    ...(first ?? { path: "", detail: "invalid" }),
    ...(rest.length > 0 ? { more: rest } : {})
  })
}

/**
 * A problem of a config file: where (its keys), what is wrong, whether it is about the field's name rather than its
 * value (`key`), and how its line names the field when not by `at` alone (`path`: a task's process,
 * `tasks.build (package ui)`).
 *
 * @since 0.1.0
 * @category errors
 */
export interface Finding {
  readonly at: ReadonlyArray<PropertyKey>
  readonly detail: string
  readonly key?: boolean | undefined
  readonly path?: string | undefined
}

/**
 * Where kiln.json writes a field of a process (`at`: its path in the file), and whether it writes it as the process
 * has it (`written`; else the field was made from others, as a task's argv, inputs and deps are, and `at` is where
 * the file declares the process). `package`: the workspace package a task gave the process for.
 *
 * @since 0.1.0
 * @category parsing
 */
export interface Place {
  readonly at: ReadonlyArray<PropertyKey>
  readonly written: boolean
  readonly package?: string | undefined
}

/**
 * Where the file has field `field` of process `name`.
 *
 * @since 0.1.0
 * @category parsing
 */
export type PlaceOf = (name: string, field: ReadonlyArray<PropertyKey>) => Place

/**
 * An error of `file` with every problem `found`, each located in `text` when there is one (the file's, as read),
 * in the file's order.
 *
 * @since 0.1.0
 * @category errors
 */
export const invalidAt = (file: string, found: ReadonlyArray<Finding>, text?: string): InvalidConfig => {
  const problems = found.map((f): ConfigProblem => {
    const location = text === undefined || f.at.length === 0 ? undefined : ConfigText.locate(text, f.at, f.key)
    return { path: f.path ?? pathText(f.at), detail: f.detail, ...(location !== undefined ? { location } : {}) }
  })
  // Each once (a task's processes can have the same problem), in the file's order, as an editor's list of problems is
  // (a stable sort: unlocated ones keep theirs).
  const seen = new Set<string>()
  const once = problems.filter((p) => {
    const key = `${p.path}\u0000${p.detail}`
    return !seen.has(key) && seen.add(key) !== undefined
  })
  const order = (p: ConfigProblem) => p.location === undefined ? [Infinity, 0] : [p.location.line, p.location.column]
  return invalidConfig(file, once.sort((a, b) => order(a)[0]! - order(b)[0]! || order(a)[1]! - order(b)[1]!))
}

const isString = (u: unknown): u is string => typeof u === "string"
const isObject = (u: unknown): u is Record<string, unknown> =>
  typeof u === "object" && u !== null && !Array.isArray(u) && !Object.hasOwn(u, "__proto__")
const isStrings = (u: unknown): boolean => Array.isArray(u) && u.every(isString)
const isStringRecord = (u: unknown, key?: RegExp): boolean =>
  isObject(u) && Object.entries(u).every(([k, v]) => isString(v) && (key === undefined || key.test(k)))
const NAMED_CACHE = /^[a-z0-9_]+$/
const PROCESS_FIELDS = new Set(Object.keys(ProcessConfig.fields))
const DEFAULTS_FIELDS = new Set(Object.keys(DefaultsConfig.fields))
const CACHE_POLICIES = new Set<unknown>(CachePolicy.literals)
const SANDBOX_SETTINGS = new Set<unknown>(SandboxSetting.literals)

/** The fields a process shares with `defaults`, valid as they stand. */
const isPlainCommon = (o: Record<string, unknown>): boolean => {
  for (const k of ["inputs", "optionalInputs", "passEnv", "passThroughEnv", "hostPaths"] as const) {
    if (o[k] !== undefined && !isStrings(o[k])) return false
  }
  if (o.network !== undefined && typeof o.network !== "boolean") return false
  if (o.env !== undefined && !isStringRecord(o.env)) return false
  if (o.timeout !== undefined && !(isString(o.timeout) && Either.isRight(DurationText.parse(o.timeout)))) {
    return false
  }
  return o.cache === undefined || CACHE_POLICIES.has(o.cache)
}

/**
 * Whether `json` is a valid config as it stands, checked directly. The schema decoder is dear per process (a big
 * workspace's no-op run spent a sizeable share of its time there), and decoding a valid config gives back the same data;
 * anything this does not accept goes through the schema, which then says what is wrong. Kept equal to the schema by
 * a property test (test/domain/Config.test.ts).
 */
/** @internal */
export const isPlainConfig = (json: unknown): json is Config => {
  if (!isObject(json)) return false
  for (const k of Object.keys(json)) {
    if (k !== "$schema" && k !== "processes" && k !== "defaults" && k !== "sandbox") return false
  }
  if (json.$schema !== undefined && !isString(json.$schema)) return false
  if (json.sandbox !== undefined && !SANDBOX_SETTINGS.has(json.sandbox)) return false
  if (json.defaults !== undefined) {
    if (!isObject(json.defaults)) return false
    for (const k of Object.keys(json.defaults)) if (!DEFAULTS_FIELDS.has(k)) return false
    if (!isPlainCommon(json.defaults)) return false
  }
  if (!isObject(json.processes)) return false
  for (const pc of Object.values(json.processes)) {
    if (!isObject(pc)) return false
    for (const k of Object.keys(pc)) if (!PROCESS_FIELDS.has(k)) return false
    if (!isStrings(pc.argv) || (pc.argv as Array<string>).length === 0) return false
    for (const k of ["deps", "outputs", "writableInputs", "optionalInputs"] as const) {
      if (pc[k] !== undefined && !isStrings(pc[k])) return false
    }
    if (!isPlainCommon(pc)) return false
    if (pc.workingDirectory !== undefined && !isString(pc.workingDirectory)) return false
    if (pc.namedCaches !== undefined && !isStringRecord(pc.namedCaches, NAMED_CACHE)) return false
    if (pc.platform !== undefined && !isStringRecord(pc.platform)) return false
    if (pc.remote !== undefined && typeof pc.remote !== "boolean") return false
    if (pc.outputSymlinks !== undefined && pc.outputSymlinks !== "contained" && pc.outputSymlinks !== "any") {
      return false
    }
  }
  return true
}

/**
 * Parses and validates the text of a config file, including the graph: unknown deps and cycles are errors too. A
 * config that declares `tasks` is only decoded here: its processes' deps may name processes its tasks give, so the
 * graph is checked ({@link check}) once the tasks are expanded (`layers/tasks/Tasks.ts`); so is one with `defaults`
 * or variables to pass, once they are resolved (`ResolvedConfig.ts`, in `layers/tasks/TaskExpansion.ts`).
 *
 * @since 0.1.0
 * @category parsing
 */
export const parse = (file: string, text: string): Either.Either<Config, InvalidConfig> =>
  Either.flatMap(Either.mapLeft(decode(file, text), (e) => withTheRest(file, text, e)), (config) => {
    if (config.tasks !== undefined || needsResolving(config)) return Either.right(config)
    const found = problemsIn(config, placesUnder((name) => ["processes", name]))
    return found.length === 0 ? Either.right(config) : Either.left(invalidAt(file, found, text))
  })

/**
 * The config `text` has without the values the schema refused, and where they were (see `configSalvage.ts`): what a
 * task expansion checks for the rest of a file's errors.
 *
 * @since 0.1.0
 * @category parsing
 */
export const salvaged = (text: string): Salvaged | undefined => {
  const s = Salvage.salvage(text, Schema.decodeUnknownEither(Config, { onExcessProperty: "error", errors: "all" }), (
    issue
  ) => problemsOf(issue, PROCESS_FIELDS, DEFAULTS_FIELDS))
  if (s === undefined) return undefined
  const merged = (schema: InvalidConfig, checks: InvalidConfig) =>
    Salvage.merged(schema, checks, s.broken, invalidConfig)
  return { config: s.config, broken: s.broken, gone: s.gone, merged }
}

/**
 * What {@link salvaged} gives: the config, and the schema's error with the checks' errors of that config added (but
 * those in an entry the schema refused part of), in the file's order.
 *
 * @since 0.1.0
 * @category parsing
 */
export interface Salvaged {
  readonly config: Config
  /** `processes.NAME`, `tasks.NAME`, `defaults.FIELD`: the entries the schema refused part of. */
  readonly broken: ReadonlyArray<string>
  /** Processes left out whole. */
  readonly gone: ReadonlyArray<string>
  readonly merged: (schema: InvalidConfig, checks: InvalidConfig) => InvalidConfig
}

/** A schema's error with the checks' errors of the rest of the config (see `configSalvage.ts`). */
const withTheRest = (file: string, text: string, error: InvalidConfig): InvalidConfig => {
  const s = salvaged(text)
  if (s === undefined || s.config.tasks !== undefined || needsResolving(s.config)) return error
  const found = problemsIn(s.config, placesUnder((name) => ["processes", name]), new Set(s.gone))
  return found.length === 0 ? error : s.merged(error, invalidAt(file, found, text))
}

/**
 * The text of a config file as a config, its fields valid, the graph unchecked (see {@link check}).
 *
 * @since 0.1.0
 * @category parsing
 */
export const decode = (file: string, text: string): Either.Either<Config, InvalidConfig> => {
  const read = ConfigText.parse(text)
  if ("errors" in read) {
    return Either.left(invalidConfig(
      file,
      read.errors.map((e) => ({
        path: "",
        detail: `not valid JSON: ${e.detail}`,
        location: ConfigText.locationAt(text, e.offset)
      }))
    ))
  }
  const json = read.json
  const plain = isPlainConfig(json)
  // The schema's records drop a `__proto__` key without a word (a process, a variable gone); the fast check refuses
  // every object that has one, so only a config it did not accept needs looking through.
  const reserved = plain ? undefined : reservedKeyIn(json, [])
  if (reserved !== undefined) {
    return Either.left(invalidAt(file, [{
      at: reserved,
      detail: "\"__proto__\" is not a name kiln takes (JavaScript objects reserve it): rename it",
      key: true
    }], text))
  }
  const decoded = plain
    ? Either.right(json as Config)
    : Schema.decodeUnknownEither(Config, { onExcessProperty: "error", errors: "all" })(json)
  if (Either.isLeft(decoded)) {
    return Either.left(invalidAt(file, problemsOf(decoded.left.issue, PROCESS_FIELDS, DEFAULTS_FIELDS), text))
  }
  if (!plain && !Object.hasOwn(json as object, "processes") && !Object.hasOwn(json as object, "tasks")) {
    // `{}` would be a config of nothing to run: more likely a file that is not yet what it should be.
    return Either.left(
      new InvalidConfig({ file, path: "processes", detail: "is required (or tasks, which give processes)" })
    )
  }
  return Either.right(decoded.right)
}

/**
 * The checks of a config's processes that the schema cannot make: their names, the fields it cannot judge alone
 * (paths, NULs, variable names), deps that name no process, and cycles. `declaredAt` says where the file declares a
 * process (default `processes.NAME`): a process a task gave is reported at the task.
 *
 * @since 0.1.0
 * @category parsing
 */
export const check = (
  file: string,
  config: Config,
  declaredAt: (name: string) => ReadonlyArray<PropertyKey> = (name) => ["processes", name]
): Either.Either<Config, InvalidConfig> => {
  const found = problemsIn(config, placesUnder(declaredAt))
  return found.length === 0 ? Either.right(config) : Either.left(invalidAt(file, found))
}

/**
 * Every problem {@link check} finds, each where `placeOf` says the file has it (see {@link Place}); `known`: names a
 * dep may give though the config lacks them (the processes of a task refused on its own, whose deps are not judged
 * again). Cycles and conflicts are looked for only when there is no problem else, and no name is `known`.
 *
 * @since 0.1.0
 * @category parsing
 */
export const findingsIn = (config: Config, placeOf: PlaceOf, known?: ReadonlySet<string>): Array<Finding> =>
  problemsIn(config, placeOf, known)
