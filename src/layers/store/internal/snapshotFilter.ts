/**
 * What a snapshot's globs take, compiled once per glob list: where a walk may start, which paths it includes, which
 * directories it may skip, and which it takes whole.
 *
 * @internal
 */
import * as Glob from "../../../domain/Glob.js"

/** @internal */
export interface Filter {
  /**
   * Where a walk can start instead of the root: the static bases of the include globs, none under another. Absent
   * when some glob can match anywhere. Walking from the bases keeps a snapshot's cost to what its globs can match,
   * not the size of the workspace.
   */
  readonly starts: ReadonlyArray<string> | undefined
  readonly includes: (relPath: string) => boolean
  /** Whether the walk may skip a directory: nothing under it can be included. */
  readonly prunes: (relDir: string) => boolean
  /**
   * Whether everything under a directory is included (a glob like `node_modules/**` takes it, and no exclude can
   * reach into it): its walk is then the same for every filter that takes it whole, and is shared (see `wholeDirs`),
   * and its tree holds its empty directories too (see `snapshot.walkDir`), and all but a package manager's bookkeeping
   * files (see {@link BOOKKEEPING}) and tools' caches (see {@link TOOL_CACHES}). `""` is the snapshot's root.
   */
  readonly takesAll: (relDir: string) => boolean
  /**
   * {@link includes} for a path beneath a directory {@link takesAll} took: no glob need be matched there (tens of
   * thousands of paths in a real `node_modules`), only the bookkeeping files are left out.
   */
  readonly includesBeneathWhole: (relPath: string) => boolean
  /** Whether a walk beneath a directory {@link takesAll} took skips the directory `relDir`: a tool's cache's. */
  readonly skipsBeneathWhole: (relDir: string) => boolean
  /** The include globs, each on its own: a snapshot says which of them matched nothing (see `Matched`). */
  readonly includeGlobs: ReadonlyArray<IncludeGlob>
}

/** One include glob of a filter. @internal */
export interface IncludeGlob {
  readonly glob: string
  readonly matches: (relPath: string) => boolean
  /** Its static base (see `Glob.baseOf`): the directories where it can match anything. */
  readonly base: string
}

/**
 * Files package managers keep directly inside a `node_modules` directory for their own bookkeeping, never inputs of a
 * process that takes them (issue #36): installs rewrite them when nothing changed, and as inputs every key that takes
 * `node_modules/**` would change with them, so that a no-op install rebuilt everything. None holds anything a build
 * reads: what they record about the install is the tree beside them. A file of the same name elsewhere is an input.
 *
 * @internal
 */
export const BOOKKEEPING: ReadonlySet<string> = new Set([
  // pnpm 10's record of when it last checked the workspace: a no-op `pnpm install` rewrites its timestamp.
  ".pnpm-workspace-state-v1.json",
  // The same record under its name in earlier pnpm 10 releases.
  ".pnpm-workspace-state.json",
  // pnpm's layout record: every install rewrites it (new stat, same bytes), and it holds `prunedAt`, a timestamp.
  ".modules.yaml",
  // npm's hidden lockfile: its own cache of the tree it describes, rewritten by installs.
  ".package-lock.json",
  // yarn's install state (yarn 2+ with the node-modules linker) and yarn 1's integrity record.
  ".yarn-state.yml",
  ".yarn-integrity"
])

/**
 * Whether `relPath` is a package manager's bookkeeping file (see {@link BOOKKEEPING}): one of those names, directly
 * inside a directory named `node_modules`.
 *
 * @internal
 */
export const isBookkeeping = (relPath: string): boolean => {
  const slash = relPath.lastIndexOf("/")
  if (slash < 0 || !BOOKKEEPING.has(relPath.slice(slash + 1))) return false
  const parent = relPath.slice(0, slash)
  return parent === "node_modules" || parent.endsWith("/node_modules")
}

/**
 * Directories tools keep their caches in directly inside a `node_modules` directory, never inputs either: vite's
 * pre-bundled dependencies and bundled config (`.vite`, `.vite-temp`), vitest's results (`.vite/vitest`, or `.vitest`
 * before), and `find-cache-dir`'s shared one (`.cache`: babel-loader, terser, eslint, storybook, nx). A tool run by
 * hand in a package (`vitest`, `vite build`) leaves them in the workspace, and as inputs each such run would change
 * the keys of every task that takes the package or its `node_modules`, and two checkouts would share none. A cache a
 * process needs across runs is a named cache (`namedCaches`).
 *
 * @internal
 */
export const TOOL_CACHES: ReadonlySet<string> = new Set([".cache", ".vite", ".vite-temp", ".vitest"])

/** Whether the directory `relDir` is a tool's cache (see {@link TOOL_CACHES}). @internal */
export const isToolCache = (relDir: string): boolean => {
  const slash = relDir.lastIndexOf("/")
  if (!TOOL_CACHES.has(relDir.slice(slash + 1))) return false
  const parent = slash < 0 ? "" : relDir.slice(0, slash)
  return parent === "node_modules" || parent.endsWith("/node_modules")
}

/** Whether `relPath` is in a tool's cache (see {@link TOOL_CACHES}), or is one. */
const inToolCache = (relPath: string): boolean => {
  for (let at = relPath.indexOf("node_modules/."); at >= 0; at = relPath.indexOf("node_modules/.", at + 1)) {
    if (at > 0 && relPath[at - 1] !== "/") continue
    const end = relPath.indexOf("/", at + 13)
    if (isToolCache(end < 0 ? relPath : relPath.slice(0, end))) return true
  }
  return false
}

/** Not an input whatever the globs say: a package manager's bookkeeping file, or a path in a tool's cache. */
const neverInput = (relPath: string): boolean => isBookkeeping(relPath) || inToolCache(relPath)

/**
 * Globs relative to the snapshot root; a leading `!` excludes. With no include glob, everything is included.
 * A package manager's bookkeeping files ({@link BOOKKEEPING}) and tools' caches ({@link TOOL_CACHES}) are excluded
 * under any glob: they are not inputs.
 *
 * @internal
 */
const filters = new Map<string, Filter | undefined>()

/**
 * The filter of a glob list, compiled once per process: a run snapshots hundreds of processes, often with the
 * same globs, and compiling a matcher costs more than walking a small directory.
 *
 * @internal
 */
export const filterOf = (globs: ReadonlyArray<string>): Filter | undefined => {
  const key = JSON.stringify(globs)
  if (filters.has(key)) return filters.get(key)
  const filter = compileFilter(globs)
  if (filters.size > 10_000) filters.clear()
  filters.set(key, filter)
  return filter
}

const compileFilter = (globs: ReadonlyArray<string>): Filter | undefined => {
  const include = globs.filter((g) => !g.startsWith("!"))
  const exclude = globs.filter((g) => g.startsWith("!")).map((g) => g.slice(1))
  if (include.length === 0 && exclude.length === 0) return undefined
  const inc = include.length === 0 ? () => true : Glob.matcher(include)
  const exc = exclude.length === 0 ? () => false : Glob.matcher(exclude)
  const bases = include.length === 0 ? undefined : include.map(Glob.baseOf)
  const starts: Array<string> = []
  if (bases !== undefined && !bases.some((b) => b === "")) {
    for (const b of [...new Set(bases)].sort((x, y) => x.length - y.length)) {
      if (!starts.some((k) => b.startsWith(`${k}/`))) starts.push(b)
    }
  }
  // The bases of include globs that take all under them (`b/**`, or `**`), and of the excludes.
  const wholeBases = include.filter((g) => g === `${Glob.baseOf(g)}/**` || g === "**").map(Glob.baseOf)
  const wholeUnder = wholePrefixes(include)
  const excludeBases = exclude.map(Glob.baseOf)
  const within = (d: string, b: string) => b === "" || d === b || d.startsWith(`${b}/`)
  return {
    takesAll: (d) =>
      (wholeBases.some((b) => within(d, b)) ||
        (wholeUnder !== undefined && d !== "" && selfOrAncestor(d, wholeUnder))) &&
      !excludeBases.some((b) => within(d, b) || d === "" || b.startsWith(`${d}/`)),
    starts: bases !== undefined && !bases.some((b) => b === "") ? starts : undefined,
    includeGlobs: include.map((glob) => ({ glob, matches: Glob.matcher([glob]), base: Glob.baseOf(glob) })),
    includes: (p) => inc(p) && !exc(p) && !neverInput(p),
    includesBeneathWhole: (p) => !isBookkeeping(p),
    skipsBeneathWhole: isToolCache,
    prunes: (d) =>
      exc(d) || inToolCache(d) ||
      (bases !== undefined &&
        !bases.some((b) => b === "" || b === d || b.startsWith(`${d}/`) || d.startsWith(`${b}/`)))
  }
}

// The directories that include globs of the form `P/**` take whole when `P` has magic in it (`**/node_modules/**`,
// `packages/*/node_modules/**`): those matching `P`, each with everything under it. As users write the globs of a
// workspace with a `node_modules` per package, each of those trees is then an input as it is on disk, and is walked,
// recorded and mounted once, as `node_modules/**` is. `undefined` when no glob has that form.
const wholePrefixes = (include: ReadonlyArray<string>): ((relDir: string) => boolean) | undefined => {
  const prefixes = include
    .filter((g) => g.endsWith("/**") && Glob.baseOf(g.slice(0, -3)) !== g.slice(0, -3))
    .map((g) => g.slice(0, -3))
  return prefixes.length === 0 ? undefined : Glob.matcher(prefixes)
}

/** Whether `relDir` or a directory above it matches. */
const selfOrAncestor = (relDir: string, matches: (relDir: string) => boolean): boolean => {
  for (let end = relDir.indexOf("/"); end >= 0; end = relDir.indexOf("/", end + 1)) {
    if (matches(relDir.slice(0, end))) return true
  }
  return matches(relDir)
}
