/**
 * What `kiln run` and `kiln exec` say of the sandbox before anything runs (#37): where this machine cannot give
 * processes the strict sandbox (user namespaces disabled, a container without the capabilities), `auto` says so once,
 * naming why, and runs as `off`; `strict` refuses instead (exit 2), for CI. Written against the probe's answer
 * (`{ works, why }`), so that the lines are tested without a machine that refuses.
 */
import * as fs from "node:fs"
import * as path from "node:path"
import type * as SandboxMode from "../../../layers/runner/SandboxMode.js"
import * as MountNamespace from "../../../os/mounts/MountNamespace.js"
import * as PrivateDir from "../../../os/PrivateDir.js"

/** Whether this machine can make the strict view, and why not when it cannot (the errno, the sysctl to check). */
export interface StrictProbe {
  readonly works: boolean
  readonly why: string
}

/**
 * This machine's answer, probed once per kiln process or read from what an earlier run kept in `answersDir` (see
 * `MountNamespace.rememberProbesIn`); undefined: this build has no strict view. The answers are the machine's, not a
 * store's: kept in the user's runtime directory, a run on a fresh store (a new workspace, CI's first run) starts
 * no probe program that an earlier run on this boot has already run.
 */
export const strictProbe = (
  answersDir: string | undefined = PrivateDir.fixedSocketDirectory()
): StrictProbe | undefined => {
  // Only in a directory this user alone can write: answers planted by another would turn the sandbox off. Checked
  // even as `fixedSocketDirectory` gives it. None (no runtime directory every run finds): probed again each run.
  if (answersDir !== undefined && fs.existsSync(answersDir) && PrivateDir.inspect(answersDir, "own") === undefined) {
    MountNamespace.rememberProbesIn(path.join(answersDir, "probes.json"))
  }
  return MountNamespace.strictProbe()
}

/** What to say: a refusal (its line, exit 2), a warning line, or nothing. */
export type Notice =
  | { readonly _tag: "Refuse"; readonly line: string }
  | { readonly _tag: "Warn"; readonly line: string }
  | undefined

/**
 * The notice for a run under `mode`, which `from` set (`--sandbox strict`, or kiln.json's `"sandbox": "strict"`), on a
 * machine whose probe answered `probe`.
 */
export const noticeOf = (mode: SandboxMode.Mode, from: string, probe: StrictProbe | undefined): Notice => {
  if (mode === "off" || probe?.works === true) return undefined
  const why = probe?.why ?? "this build of kiln has no strict sandbox"
  if (mode === "strict") {
    return {
      _tag: "Refuse",
      line: `kiln: ${from}: this machine cannot give processes the strict sandbox: ${why}`
    }
  }
  // Without a probe there is no strict view to miss: nothing to warn of.
  if (probe === undefined) return undefined
  return {
    _tag: "Warn",
    line: `kiln: warning: processes run without the strict sandbox (they can read what they did not declare): ${why}` +
      " (--sandbox off says nothing of it; --sandbox strict makes it an error)"
  }
}

/** Says the notice on stderr; false when the run is refused (exit code 2 set). */
export const say = (notice: Notice): boolean => {
  if (notice === undefined) return true
  process.stderr.write(`${notice.line}\n`)
  if (notice._tag === "Warn") return true
  process.exitCode = 2
  return false
}

/** Where the mode came from, as the refusal names it. */
export const fromOf = (flag: SandboxMode.Mode | undefined): string =>
  flag !== undefined ? `--sandbox ${flag}` : "kiln.json's \"sandbox\": \"strict\""
