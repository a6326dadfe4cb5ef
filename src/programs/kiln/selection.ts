/**
 * The processes a command acts on, from its words and `--affected` (see `domain/config/Selection.ts`): `kiln run`,
 * `kiln ls`, `kiln graph` and `kiln explain` select alike. `--affected` asks git what differs from a base: the
 * files `git diff --name-only BASE` names (committed since, staged or not) and the untracked ones git does not
 * ignore.
 */
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import * as childProcess from "node:child_process"
import * as path from "node:path"
import * as Affected from "../../domain/Affected.js"
import { type Config, InvalidConfig } from "../../domain/config/Config.js"
import * as Selection from "../../domain/config/Selection.js"
import { AFFECTED_DEFAULT } from "./optionTable.js"

/**
 * `--affected` cannot be answered: the workspace is not in git, or the base cannot be found.
 */
export class AffectedUnavailable extends Schema.TaggedError<AffectedUnavailable>("kiln/AffectedUnavailable")(
  "AffectedUnavailable",
  { detail: Schema.String }
) {
  override get message(): string {
    return `--affected: ${this.detail}`
  }
}

/** The graph of a config's processes. */
export const graphOf = (config: Config): Selection.Graph => ({
  names: Object.keys(config.processes),
  depsOf: (name) => config.processes[name]?.deps ?? []
})

/**
 * `git ARGS` in `cwd`: its stdout, or undefined when it failed (its stderr's first line in `error`). Never with the
 * repository's file-system monitor: `core.fsmonitor` in a checkout's own `.git/config` (one unpacked from an archive,
 * say) names a command git runs, and `kiln ls --affected` must not run one.
 */
const git = (cwd: string, args: ReadonlyArray<string>) =>
  Effect.sync(() => {
    const r = childProcess.spawnSync("git", ["-c", "core.fsmonitor=false", ...args], {
      cwd,
      encoding: "utf8",
      stdio: ["ignore", "pipe", "pipe"]
    })
    if (r.error !== undefined) return { ok: false as const, error: r.error.message }
    if (r.status !== 0) return { ok: false as const, error: (r.stderr ?? "").trim().split("\n")[0] ?? "" }
    return { ok: true as const, stdout: r.stdout }
  })

/** `git ARGS`'s stdout, trimmed, or `AffectedUnavailable` with `why`. */
const gitOr = (cwd: string, args: ReadonlyArray<string>, why: (error: string) => string) =>
  Effect.flatMap(
    git(cwd, args),
    (r) => r.ok ? Effect.succeed(r.stdout.trim()) : Effect.fail(new AffectedUnavailable({ detail: why(r.error) }))
  )

/**
 * The base `--affected` compares with: `ref` when given; else the merge base of HEAD with the default branch
 * (origin/HEAD's branch, else `main`, else `master`).
 */
const baseOf = (workspace: string, ref: string) =>
  Effect.gen(function*() {
    if (ref !== "") {
      return yield* gitOr(
        workspace,
        ["rev-parse", "--verify", "--quiet", "--end-of-options", `${ref}^{commit}`],
        () => `"${ref}" is not a commit git knows`
      )
    }
    const origin = yield* git(workspace, ["symbolic-ref", "--quiet", "--short", "refs/remotes/origin/HEAD"])
    let branch = origin.ok ? origin.stdout.trim() : undefined
    for (const candidate of ["main", "master"]) {
      if (branch !== undefined) break
      const found = yield* git(workspace, ["rev-parse", "--verify", "--quiet", `refs/heads/${candidate}`])
      if (found.ok) branch = candidate
    }
    if (branch === undefined) {
      return yield* new AffectedUnavailable({
        detail: "no default branch to compare with (origin/HEAD, main or master): name a base, --affected=REF"
      })
    }
    return yield* gitOr(
      workspace,
      ["merge-base", "HEAD", branch],
      (error) => `no merge base of HEAD and ${branch}${error !== "" ? ` (${error})` : ""}`
    )
  })

/** The workspace-relative paths that differ from `ref`'s base (see {@link baseOf}), untracked files included. */
export const changedFiles = (workspace: string, ref: string) =>
  Effect.gen(function*() {
    yield* gitOr(workspace, ["rev-parse", "--is-inside-work-tree"], () => `${workspace} is not in a git work tree`)
    const base = yield* baseOf(workspace, ref)
    const diff = yield* gitOr(
      workspace,
      ["-c", "core.quotepath=off", "diff", "--name-only", "--no-renames", "-z", "--relative", base, "--"],
      (error) => `git diff failed: ${error}`
    )
    const untracked = yield* gitOr(
      workspace,
      ["ls-files", "--others", "--exclude-standard", "-z", "--", "."],
      (error) => `git ls-files failed: ${error}`
    )
    return [...new Set([...diff.split("\0"), ...untracked.split("\0")].filter((p) => p !== ""))]
  })

/**
 * The processes `words` and `affected` (`--affected`'s REF, or `AFFECTED_DEFAULT`) select in `config`, in its
 * order; a word that names nothing is an `InvalidConfig` (exit 2) suggesting the nearest names.
 */
export const select = (
  configFile: string,
  config: Config,
  words: ReadonlyArray<string>,
  affected: Option.Option<string>
) =>
  Effect.gen(function*() {
    const graph = graphOf(config)
    let found: Set<string> | undefined
    if (Option.isSome(affected)) {
      const workspace = path.dirname(configFile)
      const changed = yield* changedFiles(workspace, affected.value === AFFECTED_DEFAULT ? "" : affected.value)
      found = Affected.affected(
        graph,
        (name) => config.processes[name]?.inputs ?? [],
        changed,
        path.basename(configFile)
      )
    }
    const selected = Selection.select(graph, words, found)
    if (selected._tag === "Unknown") {
      return yield* new InvalidConfig({ file: path.basename(configFile), path: "", detail: selected.message })
    }
    return selected.names
  })

/** `--affected` could not be answered: its one line on stderr, exit code 2 (a usage error). */
export const exitOnAffectedUnavailable = <A, E, R>(effect: Effect.Effect<A, E | AffectedUnavailable, R>) =>
  Effect.catchIf(
    effect,
    (e): e is AffectedUnavailable =>
      typeof e === "object" && e !== null && "_tag" in e && e._tag === "AffectedUnavailable",
    (e) =>
      Effect.sync(() => {
        process.stderr.write(`kiln: ${e.message}\n`)
        process.exitCode = 2
      })
  )
