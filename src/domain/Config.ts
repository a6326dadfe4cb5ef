/**
 * `kiln.json`: the processes of a workspace, validated by one Schema that also emits the JSON Schema editors use.
 *
 * @since 0.1.0
 */
import * as Either from "effect/Either"
import * as ParseResult from "effect/ParseResult"
import * as Schema from "effect/Schema"
import * as DurationText from "./DurationText.js"
import { conflictIn } from "./internal/declarations.js"
import { escapeControls, pathText, quoted } from "./internal/fieldText.js"
import { CachePolicy } from "./Process.js"
import { entryOf, hostPathProblem, needsResolving } from "./ResolvedConfig.js"

const Duration = Schema.String.pipe(
  Schema.filter((s) =>
    Either.isRight(DurationText.parse(s)) || `invalid duration ${quoted(s)}: expected e.g. "90s" or "5m"`
  ),
  Schema.annotations({ description: "a duration: a number and a unit (ms, s, m, h), e.g. \"90s\"" })
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
 * own, `inputs` and `hostPaths` added to its own, `timeout`, `cache` and `network` where it has none.
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
  timeout: Schema.optional(Duration),
  cache: Schema.optional(CachePolicy),
  hostPaths: Schema.optional(HostPaths),
  network: Schema.optional(Network)
})

const configFields = {
  $schema: Schema.optional(Schema.String),
  defaults: Schema.optional(DefaultsConfig).annotations({
    description: "what every process, explicit or a task's, gets unless it says otherwise: env, passEnv, " +
      "passThroughEnv, inputs (added), timeout, cache, hostPaths (added), network"
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

/**
 * A configuration error: one line naming the file, the field and what is wrong. Exit code 2.
 *
 * @since 0.1.0
 * @category errors
 */
export class InvalidConfig extends Schema.TaggedError<InvalidConfig>("kiln/InvalidConfig")("InvalidConfig", {
  file: Schema.String,
  path: Schema.String,
  detail: Schema.String
}) {
  override get message(): string {
    const line = this.path === "" ? `${this.file}: ${this.detail}` : `${this.file}: ${this.path}: ${this.detail}`
    // What the JSON parser or the schema quotes of the file (a token, a value) is escaped too: one line, no escapes.
    return escapeControls(line)
  }
}

const issueText = (issue: ParseResult.ArrayFormatterIssue) =>
  issue._tag === "Unexpected" ? "unknown field" : issue._tag === "Missing" ? "is required" : issue.message

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
  for (const k of ["inputs", "passEnv", "passThroughEnv", "hostPaths"] as const) {
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
    for (const k of ["deps", "outputs", "writableInputs"] as const) {
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
  Either.flatMap(
    decode(file, text),
    (config) => config.tasks === undefined && !needsResolving(config) ? check(file, config) : Either.right(config)
  )

/**
 * The text of a config file as a config, its fields valid, the graph unchecked (see {@link check}).
 *
 * @since 0.1.0
 * @category parsing
 */
export const decode = (file: string, text: string): Either.Either<Config, InvalidConfig> => {
  let json: unknown
  try {
    json = JSON.parse(text)
  } catch (e) {
    return Either.left(new InvalidConfig({ file, path: "", detail: `not valid JSON (${(e as Error).message})` }))
  }
  const plain = isPlainConfig(json)
  // The schema's records drop a `__proto__` key without a word (a process, a variable gone); the fast check refuses
  // every object that has one, so only a config it did not accept needs looking through.
  const reserved = plain ? undefined : reservedKeyIn(json, [])
  if (reserved !== undefined) {
    return Either.left(
      new InvalidConfig({
        file,
        path: pathText(reserved),
        detail: "\"__proto__\" is not a name kiln takes (JavaScript objects reserve it): rename it"
      })
    )
  }
  const decoded = plain
    ? Either.right(json as Config)
    : Schema.decodeUnknownEither(Config, { onExcessProperty: "error", errors: "first" })(json)
  if (Either.isLeft(decoded)) {
    const [issue] = ParseResult.ArrayFormatter.formatErrorSync(decoded.left)
    return Either.left(
      new InvalidConfig({
        file,
        path: pathText(issue?.path ?? []),
        detail: issue === undefined ? "invalid" : issueText(issue)
      })
    )
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
  for (const name of Object.keys(config.processes)) {
    const badName = nameProblem(name)
    if (badName !== undefined) {
      return Either.left(
        new InvalidConfig({ file, path: pathText(declaredAt(name)), detail: `is not a process name: ${badName}` })
      )
    }
  }
  for (const name of Object.keys(config.processes)) {
    const refused = refusedIn(config, name)
    if (refused !== undefined) {
      return Either.left(
        new InvalidConfig({ file, path: pathText([...declaredAt(name), ...refused.at]), detail: refused.detail })
      )
    }
  }
  const cycle = findCycle(config)
  if (cycle !== undefined) {
    const at = cycle.some((name) => declaredAt(name)[0] === "tasks") ? "tasks" : "processes"
    return Either.left(
      new InvalidConfig({ file, path: at, detail: `dependency cycle: ${cycle.join(" -> ")}` })
    )
  }
  const conflict = conflictIn(config.processes)
  if (conflict !== undefined) {
    return Either.left(
      new InvalidConfig({
        file,
        path: pathText([...declaredAt(conflict.name), ...conflict.at]),
        detail: conflict.detail
      })
    )
  }
  return Either.right(config)
}

/** The path of the first own `__proto__` key in `json`'s objects, if any. */
const reservedKeyIn = (json: unknown, at: Array<PropertyKey>): Array<PropertyKey> | undefined => {
  if (typeof json !== "object" || json === null) return undefined
  if (!Array.isArray(json) && Object.hasOwn(json, "__proto__")) return [...at, "__proto__"]
  for (const [k, v] of Object.entries(json)) {
    const found = reservedKeyIn(v, [...at, Array.isArray(json) ? Number(k) : k])
    if (found !== undefined) return found
  }
  return undefined
}

/** Why `name` cannot name a process, if it cannot: one that would print as another, or print what kiln did not say. */
const nameProblem = (name: string): string | undefined => {
  if (name === "") return "it is empty"
  // A name is printed on the terminal: the status line, `✓ name`, errors.
  const control = /[\u0000-\u001f\u007f-\u009f]/.exec(name)
  if (control !== null) {
    const code = control[0].charCodeAt(0).toString(16).toUpperCase().padStart(4, "0")
    return `it holds the control character U+${code}, which would reach the terminal as it is`
  }
  // " a" would print as "a": two processes that look like one.
  if (/^\s|\s$/.test(name)) return "it begins or ends with whitespace"
  return undefined
}

/** Why a field of a process is refused: where in the process, and what is wrong. */
interface Refused {
  readonly at: ReadonlyArray<PropertyKey>
  readonly detail: string
}

/** No path, argument or variable can hold a NUL: the C strings `execve` and every path call take end at it. */
const NUL = "\u0000"

/** A relative path that stays where it is relative to: not empty, not absolute, no `..` and no NUL. */
const staysInside = (p: string) => p !== "" && !p.startsWith("/") && !p.split("/").includes("..") && !p.includes(NUL)

/** `.`, `./`, `a/..`-free spellings of the directory itself, which no file or symlink can stand in for. */
const isItself = (p: string) => p.split("/").every((s) => s === "" || s === ".")

/**
 * What the schema cannot say about a process: deps that name no process (an own key: `toString` is not one), paths
 * that leave the sandbox or the workspace, NUL bytes, variable names that are not names. Each is refused before
 * anything runs, rather than found by the spawner, the sandbox or the process.
 */
const refusedIn = (config: Config, name: string): Refused | undefined => {
  const pc = config.processes[name]!
  for (const [i, dep] of (pc.deps ?? []).entries()) {
    if (!Object.hasOwn(config.processes, dep)) return { at: ["deps", i], detail: `unknown process ${quoted(dep)}` }
  }
  for (const [i, arg] of pc.argv.entries()) {
    if (arg.includes(NUL)) return { at: ["argv", i], detail: "holds a NUL byte, which no argument can" }
  }
  for (const [k, v] of Object.entries(pc.env ?? {})) {
    if (k === "" || k.includes("=") || k.includes(NUL)) {
      return {
        at: ["env", k],
        detail: `${quoted(k)} is not a variable name: it must be non-empty, without = or NUL`
      }
    }
    if (v.includes(NUL)) return { at: ["env", k], detail: "holds a NUL byte, which no variable's value can" }
  }
  for (const [i, entry] of (pc.passThroughEnv ?? []).entries()) {
    const { fallback, name } = entryOf(entry)
    if (name === "" || name.includes(NUL) || fallback?.includes(NUL)) {
      return { at: ["passThroughEnv", i], detail: `${quoted(entry)} is not a variable name (NAME or NAME=default)` }
    }
  }
  const wd = pc.workingDirectory
  if (wd !== undefined && (wd.startsWith("/") || wd.split("/").includes("..") || wd.includes(NUL))) {
    return { at: ["workingDirectory"], detail: `${quoted(wd)} must be a relative path inside the sandbox` }
  }
  for (const [i, declared] of (pc.outputs ?? []).entries()) {
    // A leading `?`: an output the process may leave unmade (see `Process.optionalOutputs`).
    const out = declared.replace(/^\?/, "")
    if (!staysInside(out)) {
      return {
        at: ["outputs", i],
        detail: `${quoted(out)} must be a relative path inside the working directory`
      }
    }
    if (isItself(out) && !out.endsWith("/")) {
      return {
        at: ["outputs", i],
        detail: `${quoted(out)} is the working directory itself, not a file: a directory output ends with /`
      }
    }
  }
  for (const [i, input] of (pc.inputs ?? []).entries()) {
    if (!staysInside(input.replace(/^!/, ""))) {
      return {
        at: ["inputs", i],
        detail: `invalid glob ${quoted(input)}: globs are relative to the workspace and stay inside it`
      }
    }
  }
  for (const [i, writable] of (pc.writableInputs ?? []).entries()) {
    if (!staysInside(writable)) {
      return {
        at: ["writableInputs", i],
        detail: `${quoted(writable)} must be a relative path inside the workspace`
      }
    }
  }
  for (const [i, p] of (pc.hostPaths ?? []).entries()) {
    const bad = hostPathProblem(p)
    if (bad !== undefined) return { at: ["hostPaths", i], detail: bad }
  }
  for (const [cache, at] of Object.entries(pc.namedCaches ?? {})) {
    if (!staysInside(at) || isItself(at)) {
      return {
        at: ["namedCaches", cache],
        detail: `${quoted(at)} must be a relative path inside the sandbox, below its root`
      }
    }
  }
  return undefined
}

const findCycle = (config: Config): Array<string> | undefined => {
  const state = new Map<string, "visiting" | "done">()
  const stack: Array<string> = []
  const visit = (name: string): Array<string> | undefined => {
    if (state.get(name) === "done") return undefined
    if (state.get(name) === "visiting") return [...stack.slice(stack.indexOf(name)), name]
    state.set(name, "visiting")
    stack.push(name)
    for (const dep of config.processes[name]!.deps ?? []) {
      const found = visit(dep)
      if (found !== undefined) return found
    }
    stack.pop()
    state.set(name, "done")
    return undefined
  }
  for (const name of Object.keys(config.processes).sort()) {
    const found = visit(name)
    if (found !== undefined) return found
  }
  return undefined
}
