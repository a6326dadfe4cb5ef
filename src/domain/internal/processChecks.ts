/**
 * The checks of a process's fields the schema cannot make (`Config.check`): plain code, each problem of a process.
 *
 * @internal
 */
import type { Config } from "../Config.js"
import { entryOf, hostPathProblem } from "../ResolvedConfig.js"
import { didYouMean } from "./didYouMean.js"
import { quoted } from "./fieldText.js"

/** Why a field of a process is refused: where in the process, and what is wrong. */
export interface Refused {
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
 * that leave the sandbox or the workspace, NUL bytes, variable names that are not names; each of them. Each is refused
 * before anything runs, rather than found by the spawner, the sandbox or the process.
 */
export function* refusedIn(config: Config, name: string): Generator<Refused> {
  const pc = config.processes[name]!
  for (const [i, dep] of (pc.deps ?? []).entries()) {
    if (!Object.hasOwn(config.processes, dep)) {
      yield {
        at: ["deps", i],
        detail: `unknown process ${quoted(dep)}${didYouMean(dep, Object.keys(config.processes), quoted)}`
      }
    }
  }
  for (const [i, arg] of pc.argv.entries()) {
    if (arg.includes(NUL)) yield { at: ["argv", i], detail: "holds a NUL byte, which no argument can" }
  }
  for (const [k, v] of Object.entries(pc.env ?? {})) {
    if (k === "" || k.includes("=") || k.includes(NUL)) {
      yield {
        at: ["env", k],
        detail: `${quoted(k)} is not a variable name: it must be non-empty, without = or NUL`
      }
    }
    if (v.includes(NUL)) yield { at: ["env", k], detail: "holds a NUL byte, which no variable's value can" }
  }
  for (const [i, entry] of (pc.passThroughEnv ?? []).entries()) {
    const { fallback, name } = entryOf(entry)
    if (name === "" || name.includes(NUL) || fallback?.includes(NUL)) {
      yield { at: ["passThroughEnv", i], detail: `${quoted(entry)} is not a variable name (NAME or NAME=default)` }
    }
  }
  const wd = pc.workingDirectory
  if (wd !== undefined && (wd.startsWith("/") || wd.split("/").includes("..") || wd.includes(NUL))) {
    yield { at: ["workingDirectory"], detail: `${quoted(wd)} must be a relative path inside the sandbox` }
  }
  for (const [i, declared] of (pc.outputs ?? []).entries()) {
    // A leading `?`: an output the process may leave unmade (see `Process.optionalOutputs`).
    const out = declared.replace(/^\?/, "")
    if (!staysInside(out)) {
      yield {
        at: ["outputs", i],
        detail: `${quoted(out)} must be a relative path inside the working directory`
      }
    } else if (isItself(out) && !out.endsWith("/")) {
      yield {
        at: ["outputs", i],
        detail: `${quoted(out)} is the working directory itself, not a file: a directory output ends with /`
      }
    }
  }
  for (const [i, input] of (pc.inputs ?? []).entries()) {
    if (!staysInside(input.replace(/^!/, ""))) {
      yield {
        at: ["inputs", i],
        detail: `invalid glob ${quoted(input)}: globs are relative to the workspace and stay inside it`
      }
    }
  }
  for (const [i, input] of (pc.optionalInputs ?? []).entries()) {
    if (!staysInside(input.replace(/^!/, ""))) {
      yield {
        at: ["optionalInputs", i],
        detail: `invalid glob ${quoted(input)}: globs are relative to the workspace and stay inside it`
      }
    }
  }
  for (const [i, writable] of (pc.writableInputs ?? []).entries()) {
    if (!staysInside(writable)) {
      yield {
        at: ["writableInputs", i],
        detail: `${quoted(writable)} must be a relative path inside the workspace`
      }
    }
  }
  for (const [i, p] of (pc.hostPaths ?? []).entries()) {
    const bad = hostPathProblem(p)
    if (bad !== undefined) yield { at: ["hostPaths", i], detail: bad }
  }
  for (const [cache, at] of Object.entries(pc.namedCaches ?? {})) {
    if (!staysInside(at) || isItself(at)) {
      yield {
        at: ["namedCaches", cache],
        detail: `${quoted(at)} must be a relative path inside the sandbox, below its root`
      }
    }
  }
}
