/**
 * What the engine (`Spawner.ts`) and its spawner (`main.ts`) say to each other: one JSON object per line, each
 * naming its `kind`. Requests go to the spawner's stdin, replies come back on its stdout.
 *
 * Requests: `spawn` starts `argv` in `cwd` with exactly `env`, its stdout and stderr going to the files named
 * (created or truncated); `remove` removes each tree of `paths` (a sandbox whose group is gone, its log files);
 * `arm` gives the post-mortem, a command to start, detached, with stderr appended to `log`, if the engine dies;
 * `disarm` (the engine's clean end) takes it back.
 *
 * Replies, to the `id` of a `spawn` or `remove`: `started` once the child runs (its `pid` is also its process group),
 * `exited` when it exits (`alone`: nothing of its group was left then), `removed`, or `failed` with the errno `code`
 * (ENOENT, ETXTBSY, …) and Node's message when it could not start or remove. A request the spawner cannot use (not
 * JSON, a field missing or of the wrong type, a NUL in a string) is answered too, by `rejected` with the number of its
 * line (0 for the first line the spawner read), since its id may be what is wrong: no request is ever left unanswered.
 *
 * Plain code, like `main.ts` which loads it: nothing here may load Effect.
 *
 * @internal
 */

/** @internal */
export interface Spawn {
  readonly kind: "spawn"
  readonly id: number
  readonly argv: ReadonlyArray<string>
  readonly cwd: string
  readonly env: Readonly<Record<string, string>>
  readonly stdout: string
  readonly stderr: string
  /**
   * The mount namespace it runs in (see `MountNamespace.toWire`): its mounts, its sandbox bound at the exec root, and
   * its working directory there, which it starts in rather than `cwd` (`cwd` is checked to exist all the same).
   */
  readonly namespace?: ReadonlyArray<string>
}

/** @internal */
export interface Remove {
  readonly kind: "remove"
  readonly id: number
  readonly paths: ReadonlyArray<string>
}

/** @internal */
export interface Arm {
  readonly kind: "arm"
  readonly argv: ReadonlyArray<string>
  readonly log: string
}

/** @internal */
export interface Disarm {
  readonly kind: "disarm"
}

/** @internal */
export type Request = Spawn | Remove | Arm | Disarm

/** @internal */
export interface Started {
  readonly kind: "started"
  readonly id: number
  readonly pid: number
}

/** @internal */
export interface Exited {
  readonly kind: "exited"
  readonly id: number
  readonly code: number | null
  readonly signal: NodeJS.Signals | null
  readonly alone: boolean
}

/** @internal */
export interface Removed {
  readonly kind: "removed"
  readonly id: number
}

/** @internal */
export interface Failed {
  readonly kind: "failed"
  readonly id: number
  readonly code: string
  readonly message: string
}

/** @internal */
export interface Rejected {
  readonly kind: "rejected"
  /** The request's line, counted from 0 over every line the spawner read. */
  readonly line: number
  readonly reason: string
}

/** @internal */
export type Reply = Started | Exited | Removed | Failed | Rejected

/** A line that is not a message of its direction: `reason` says which field is wrong, with the line's start. */
export interface Malformed {
  readonly kind: "malformed"
  readonly reason: string
}

/** One message as the line that carries it. @internal */
export const encode = (message: Request | Reply): string => `${JSON.stringify(message)}\n`

type Check = (value: unknown) => boolean

/** A check for every field of every kind of `M`: adding a field to a message without checking it fails to compile. */
type Checks<M extends { readonly kind: string }> = {
  readonly [K in M["kind"]]: { readonly [F in Exclude<keyof Extract<M, { kind: K }>, "kind">]-?: Check }
}

const isString: Check = (v) => typeof v === "string"
const isId: Check = (v) => Number.isSafeInteger(v) && (v as number) >= 0
const isPid: Check = (v) => Number.isSafeInteger(v) && (v as number) > 0
const isStrings: Check = (v) => Array.isArray(v) && v.every(isString)
const isOptionalStrings: Check = (v) => v === undefined || isStrings(v)
const isArgv: Check = (v) => isStrings(v) && (v as Array<string>).length > 0
const isEnv: Check = (v) => typeof v === "object" && v !== null && !Array.isArray(v) && Object.values(v).every(isString)
const isExitCode: Check = (v) => v === null || Number.isInteger(v)
const isSignal: Check = (v) => v === null || typeof v === "string"
const isBoolean: Check = (v) => typeof v === "boolean"

const requestChecks: Checks<Request> = {
  spawn: {
    id: isId,
    argv: isArgv,
    cwd: isString,
    env: isEnv,
    stdout: isString,
    stderr: isString,
    namespace: isOptionalStrings
  },
  remove: { id: isId, paths: isStrings },
  arm: { argv: isArgv, log: isString },
  disarm: {}
}

const replyChecks: Checks<Reply> = {
  started: { id: isId, pid: isPid },
  exited: { id: isId, code: isExitCode, signal: isSignal, alone: isBoolean },
  removed: { id: isId },
  failed: { id: isId, code: isString, message: isString },
  rejected: { line: isId, reason: isString }
}

/** The start of a bad line, enough to recognise it in a one-line error. */
const excerpt = (line: string) => (line.length > 120 ? `${line.slice(0, 120)}…` : line)

const decode = <M extends { readonly kind: string }>(
  what: string,
  checks: Checks<M>,
  line: string
): M | Malformed => {
  const malformed = (why: string): Malformed => ({
    kind: "malformed",
    reason: `${why} in the ${what} ${excerpt(line)}`
  })
  let message: unknown
  try {
    message = JSON.parse(line)
  } catch {
    return malformed("not JSON")
  }
  if (typeof message !== "object" || message === null) return malformed("not an object")
  const fields = message as Record<string, unknown>
  const kind = fields.kind
  if (typeof kind !== "string" || !Object.hasOwn(checks, kind)) return malformed(`no such kind ${JSON.stringify(kind)}`)
  for (const [field, check] of Object.entries(checks[kind as M["kind"]] as Record<string, Check>)) {
    if (!check(fields[field])) return malformed(`a ${kind} with a bad or missing "${field}"`)
  }
  return message as M
}

/** @internal */
export const decodeRequest = (line: string): Request | Malformed => decode<Request>("request", requestChecks, line)

/** @internal */
export const decodeReply = (line: string): Reply | Malformed => decode<Reply>("reply", replyChecks, line)

/**
 * Splits a stream of text chunks into lines, calling `onLine` with each whole one (without its newline); a partial
 * last line waits for the chunk that ends it.
 *
 * @internal
 */
export const lineSplitter = (onLine: (line: string) => void): (chunk: string) => void => {
  let rest = ""
  return (chunk) => {
    const text = rest + chunk
    let start = 0
    for (let end = text.indexOf("\n"); end !== -1; end = text.indexOf("\n", start)) {
      onLine(text.slice(start, end))
      start = end + 1
    }
    rest = text.slice(start)
  }
}
