/**
 * What `kiln run` shows of its processes' output, as each one finishes (`--output-logs`, `--log-order`): read from
 * the store by the digests its report carries (a cache hit's are those its action result stored, so a hit replays
 * the output of the run that made it), and handed to the progress display, which prints it under the process's line.
 * A failed tool's last lines (`--failure-lines`) are the engine's (its report's `detail`), shown with the command that
 * re-runs it.
 */
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as ProcessName from "../../../domain/config/ProcessName.js"
import * as Digest from "../../../domain/Digest.js"
import type * as Engine from "../../../layers/engine/Engine.js"
import type * as Store from "../../../layers/store/Store.js"

/**
 * `full`: every process's output, cached ones' replayed; `new-only`: the output of what ran, hits hidden;
 * `errors-only`: only failures', their last lines; `none`: no process's line and no output, only a failure's line
 * and its re-run command.
 */
export type OutputLogs = "full" | "errors-only" | "new-only" | "none"

/** `stream`: each line prefixed by its process's name; `grouped`: a process's output whole, under its line. */
export type LogOrder = "stream" | "grouped"

export interface Settings {
  readonly logs: OutputLogs
  readonly order: LogOrder
  /**
   * Whether processes that run here are followed, their lines printed as they write them (`stream`, with `full` or
   * `new-only`): their output is then not printed again when they finish.
   */
  readonly follow: boolean
  /** Whether processes may run at once: only then does `stream` prefix lines (there is nothing to tell apart). */
  readonly concurrent: boolean
}

/** Whether `logs` shows the whole output of a process that finished as `r` did. */
export const showsWhole = (logs: OutputLogs, r: Engine.ProcessReport): boolean =>
  r.stdoutDigest !== undefined && (
    logs === "full" || (logs === "new-only" && (r.source === "ran" || r.source === "remote"))
  )

/** Turbo's words for a hit whose output is shown: it is the stored output of an earlier run, not this one's. */
export const REPLAYING = "cache hit, replaying logs"

const isHit = (r: Engine.ProcessReport) => r.source === "cache-hit" || r.source === "remote-cache"

/** A process's text as `settings` lay it out: its lines prefixed by its name (stream, when others run too), or as is. */
export const laidOut = (name: string, text: string, settings: Settings): string => {
  const trimmed = text.replace(/\n+$/, "")
  if (trimmed === "") return ""
  return settings.order === "stream" && settings.concurrent
    ? trimmed.split("\n").map((l) => `${name}: ${l}`).join("\n")
    : trimmed
}

/** A stored log as text; when it cannot be read, a line saying so (and why: its bytes may be only on the remote). */
const read = (store: Store.Store["Type"], which: string, digest: string | undefined) => {
  if (digest === undefined) return Effect.succeed("")
  const parsed = Digest.parse(digest)
  if (Either.isLeft(parsed)) return Effect.succeed("")
  return store.getFile(parsed.right).pipe(
    Effect.map((bytes) => Buffer.from(bytes).toString("utf8")),
    Effect.catchAll((e) => Effect.succeed(`(its ${which} ${digest} cannot be read here: ${e.message})\n`))
  )
}

/** A process's whole output: stdout, then stderr (kiln keeps them apart, so it cannot interleave them as written). */
export const wholeOutput = (store: Store.Store["Type"], r: Engine.ProcessReport) =>
  Effect.map(
    Effect.zip(read(store, "stdout", r.stdoutDigest), read(store, "stderr", r.stderrDigest)),
    ([out, err]) => `${out}${out !== "" && !out.endsWith("\n") ? "\n" : ""}${err}`
  )

/** Whether `settings` follow processes' output as they run: what streams shows whole lines as they come. */
export const follows = (logs: OutputLogs, order: LogOrder): boolean =>
  order === "stream" && (logs === "full" || logs === "new-only")

/** The part of each followed process's output that does not end a line yet, by process and stream. */
export type Partial = Map<string, string>

/** A followed process's new bytes as whole lines, prefixed when others run too; the rest kept for its next bytes. */
export const during =
  (settings: Settings, partial: Partial) =>
  (e: { readonly name: string; readonly stream: "stdout" | "stderr"; readonly bytes: Uint8Array }): string => {
    const key = `${e.stream} ${e.name}`
    const text = (partial.get(key) ?? "") + Buffer.from(e.bytes).toString("utf8")
    const end = text.lastIndexOf("\n")
    partial.set(key, text.slice(end + 1))
    return end < 0 ? "" : laidOut(e.name, text.slice(0, end), settings)
  }

/** What a followed process left without a newline at its end. */
const rest = (partial: Partial, name: string): string =>
  (["stdout", "stderr"] as const).map((stream) => {
    const key = `${stream} ${name}`
    const left = partial.get(key) ?? ""
    partial.delete(key)
    return left
  }).filter((t) => t !== "").join("\n")

/**
 * What is shown under a finished process's line: its output as `settings` ask, and for a failed tool its last lines
 * (unless its whole output was shown) and the command that re-runs it. Empty when nothing is.
 */
export const after = (store: Store.Store["Type"], settings: Settings, partial: Partial) => (r: Engine.ProcessReport) =>
  Effect.gen(function*() {
    const parts: Array<string> = []
    const whole = settings.logs !== "none" && showsWhole(settings.logs, r)
    // Its lines were printed as it wrote them; what did not end a line is printed now.
    const followed = whole && settings.follow && r.source === "ran"
    if (followed) {
      const left = laidOut(r.name, rest(partial, r.name), settings)
      if (left !== "") parts.push(left)
    } else if (whole) {
      const text = laidOut(r.name, yield* wholeOutput(store, r), settings)
      if (text !== "") parts.push(...(isHit(r) ? [laidOut(r.name, REPLAYING, settings)] : []), text)
    }
    if (r.reproduce !== undefined) {
      if (!whole && settings.logs !== "none" && r.detail !== undefined && r.detail !== "") parts.push(r.detail)
      else if (r.hint !== undefined) parts.push(r.hint)
      parts.push(`re-run it with: ${r.reproduce}`)
    }
    return parts.join("\n")
  })

/** How many of the paths a process wrote outside its outputs its line names. */
const UNDECLARED_SHOWN = 3

/**
 * The line said at the end of a run for a process that wrote files outside its declared outputs (they are neither
 * cached nor written back): `gen wrote 1 file that is not among its outputs: gen/extra.txt`; undefined for one that
 * did not (or did not run here).
 */
export const undeclaredLine = (r: Engine.ProcessReport): string | undefined => {
  const u = r.undeclaredWrites
  if (u === undefined || u.count === 0) return undefined
  const shown = u.sample.slice(0, UNDECLARED_SHOWN)
  const files = `${u.truncated === true ? "at least " : ""}${u.count} ${u.count === 1 ? "file" : "files"}`
  const verb = u.count === 1 && u.truncated !== true ? "is" : "are"
  // Names a tool chose: escaped, as every path kiln prints from a workspace is.
  return `${r.name} wrote ${files} that ${verb} not among its outputs: ${shown.map(ProcessName.printable).join(", ")}` +
    `${u.count > shown.length ? ", …" : ""}`
}
