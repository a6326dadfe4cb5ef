/**
 * Which entries at the top of a package's directory the workspace's `.gitignore` files ignore: a coverage report, a
 * `.turbo` or `*.tsbuildinfo` a tool run by hand leaves there is not source, and a package's files as tasks take them
 * leave it out, as Turborepo's hash of "the files git would commit" does, so that the run after it changes no key.
 *
 * Only the committed `.gitignore` files from the top of the git work tree (the workspace's root outside one) down to
 * the package are read (not `.git/info/exclude` or a user's global excludes: every clone then leaves out the same),
 * and only the package's own top-level entries are judged: a deeper ignored path (`src/generated/`, written by a
 * codegen a build reads) stays an input. Every doubt keeps a path in: a pattern this cannot read exactly (escapes,
 * braces), or longer or wilder than a real one, is skipped when it ignores and gives the package up when it
 * re-includes (`!`); a `.gitignore` that is a symlink, too large or unreadable is not read; a package whose directory
 * git ignores (or one above it: a home directory's dotfiles repository ignoring `*`) has nothing left out.
 * Synchronous plain code: the no-op check runs it too (see `workspaceFiles.ts`).
 *
 * @internal
 */
import * as fs from "node:fs"
import * as path from "node:path"
import { racyAt } from "../../../os/RawStat.js"
import { globMatcher } from "./packageGlobs.js"

/** One pattern of a `.gitignore`, with the directory of its file (workspace-relative, `""` for the root). */
interface Rule {
  readonly base: string
  readonly pattern: string
  readonly negated: boolean
  readonly directoryOnly: boolean
  /** Matched against the path below `base` (a pattern with a `/` before its end), else against the name alone. */
  readonly anchored: boolean
  /**
   * Where a name's pattern is looked for ({@link Chain}): `=name` (no wildcard), `^c` (it starts with the literal
   * `c`), `$c` (it ends with it), `*` (it starts and ends with a wildcard); `/` for an anchored pattern.
   */
  readonly key: string
  /** The matcher, made on first need (most patterns are never tried: see {@link Chain}). */
  matcher?: (path: string) => boolean
}

const WILDCARDS = "*?["

/** Where {@link Chain} files a pattern (see `Rule.key`). */
const keyOf = (pattern: string, anchored: boolean): string => {
  if (anchored) return "/"
  if (!/[*?[]/.test(pattern)) return `=${pattern}`
  if (!WILDCARDS.includes(pattern[0]!)) return `^${pattern[0]}`
  const last = pattern[pattern.length - 1]!
  return WILDCARDS.includes(last) || last === "]" ? "*" : `$${last}`
}

/**
 * A matcher of one pattern: a name with `*`s (`coverage`, `*.log`, `npm-debug.log*`) by string operations, a path
 * without `**` segment by segment (`.yarn/cache` is not tried further on `src/memory`), anything else by a regular
 * expression made on first need, and only tried on a path holding the pattern's longest literal run: a real root
 * `.gitignore` has a hundred or more patterns, and the no-op check, which reads it on every run, runs cold code.
 */
const matcherOf = (pattern: string): (path: string) => boolean => {
  if (pattern.includes("/") && !pattern.split("/").includes("**")) {
    const segments = pattern.split("/").map(matcherOf)
    return (p) => {
      const parts = p.split("/")
      return parts.length === segments.length && segments.every((m, i) => m(parts[i]!))
    }
  }
  if (!/[?[/]/.test(pattern)) {
    const parts = pattern.split("*")
    if (parts.length === 1) return (p) => p === pattern
    const first = parts[0]!
    const last = parts[parts.length - 1]!
    return (p) => {
      if (p.length < first.length + last.length || !p.startsWith(first) || !p.endsWith(last)) return false
      let at = first.length
      for (let i = 1; i < parts.length - 1; i++) {
        const found = p.indexOf(parts[i]!, at)
        if (found < 0 || found + parts[i]!.length > p.length - last.length) return false
        at = found + parts[i]!.length
      }
      return true
    }
  }
  const literal = pattern.split(/[*?/]|\[[^\]]*\]/).reduce((a, b) => (b.length > a.length ? b : a), "")
  let compiled: ((path: string) => boolean) | undefined
  const glob = (p: string) => p.includes(literal) && (compiled ??= globMatcher(pattern))(p)
  if (!pattern.endsWith("/**")) return glob
  // `a/**` is what lies inside `a`, not `a` itself (a glob's `**` may match no segment).
  const itself = matcherOf(pattern.slice(0, -3))
  return (p) => glob(p) && !itself(p)
}

/** A `.gitignore`'s rules, or `"unsure"` when it re-includes by a pattern this cannot read. */
type Rules = ReadonlyArray<Rule> | "unsure"

/** A `.gitignore` larger than this is not read: a real one is a few kilobytes. */
const LARGEST_READ = 256 * 1024

/**
 * Patterns of one `.gitignore` read at most (a real one has a few hundred): every top entry of a package is tried
 * against those that can match it, and 26,000 wildcard patterns against 22,000 entries took half a minute. The rest
 * are read as unreadable ones are (an ignoring one skipped, a re-including one gives the file up).
 */
const MOST_RULES = 1024

/** Characters whose meaning differs between git's patterns and the globs kiln matches. */
const UNREADABLE = /[\\{}()|]/

/**
 * Whether a pattern is read: none with characters whose meaning differs ({@link UNREADABLE}), and none longer or
 * with more wildcards than a real one has, whose regular expression could take very long on a long name.
 */
const readable = (line: string) => line.length <= 200 && !UNREADABLE.test(line) && line.split(/[*?]/).length <= 9

/** The rules of `text`, the `.gitignore` of `base` (gitignore(5): comments, `!`, trailing `/`, a `/` anchors). */
export const parse = (text: string, base: string): Rules => {
  const rules: Array<Rule> = []
  for (let start = 0; start < text.length;) {
    let end = text.indexOf("\n", start)
    if (end < 0) end = text.length
    const next = end + 1
    // Trailing blanks (and a CR) are not part of a pattern; a comment or a blank line is none.
    while (end > start && " \t\r".includes(text[end - 1]!)) end--
    const first = text[start]
    if (end === start || first === "#") {
      start = next
      continue
    }
    const negated = first === "!"
    let line = text.slice(negated ? start + 1 : start, end)
    start = next
    if (!readable(line) || rules.length === MOST_RULES) {
      if (negated) return "unsure"
      continue
    }
    const directoryOnly = line.endsWith("/")
    while (line.endsWith("/")) line = line.slice(0, -1)
    const anchored = line.includes("/")
    while (line.startsWith("/")) line = line.slice(1)
    if (line === "" || (anchored && line.split("/").some((s) => s === "." || s === ".."))) {
      if (negated) return "unsure"
      continue
    }
    if (line === "." || line === "..") continue
    rules.push({ base, pattern: line, negated, directoryOnly, anchored, key: keyOf(line, anchored) })
  }
  return rules
}

/** A `.gitignore` as read: its rules, and what tells its bytes changed (`""` when there is none). */
interface Read {
  readonly identity: string
  readonly rules: Rules
}

const NONE: Read = { identity: "", rules: [] }

/**
 * Files read before, by path, with the identity they had: a standby engine answers run after run, and its no-op
 * check then parses the same `.gitignore` files again only when they change.
 */
const readBefore = new Map<string, Read>()

/** The `.gitignore` of the workspace directory `dir`: its rules, or none when it is absent or not read. */
const readRules = (root: string, dir: string): Read => {
  const file = path.join(root, dir, ".gitignore")
  // Most directories have none: asked without an exception, which costs more than the question.
  let seen: fs.BigIntStats | undefined
  try {
    seen = fs.lstatSync(file, { bigint: true, throwIfNoEntry: false })
  } catch {
    return NONE
  }
  if (seen === undefined || !seen.isFile() || seen.size > LARGEST_READ) return NONE
  const identity = `${seen.dev}:${seen.ino}:${seen.size}:${seen.mtimeNs}:${seen.ctimeNs}`
  const before = readBefore.get(file)
  if (before?.identity === identity) return before
  let fd: number
  try {
    // A `.gitignore` that is a link is not followed (git does not follow one either); a FIFO put there since the
    // `lstat` does not hold the open (the `fstat` below refuses it).
    fd = fs.openSync(file, fs.constants.O_RDONLY | fs.constants.O_NOFOLLOW | fs.constants.O_NONBLOCK)
  } catch {
    return NONE
  }
  try {
    const stat = fs.fstatSync(fd, { bigint: true })
    if (!stat.isFile() || stat.size > LARGEST_READ) return NONE
    const bytes = Buffer.alloc(Number(stat.size))
    const read = fs.readSync(fd, bytes, 0, bytes.length, 0)
    const rules = parse(bytes.toString("utf8", 0, read), dir)
    const got = { identity: `${stat.dev}:${stat.ino}:${stat.size}:${stat.mtimeNs}:${stat.ctimeNs}`, rules }
    // Changed within a timestamp tick, another change in the same tick would leave its times as they are: not kept.
    if (!racyAt(stat, BigInt(Date.now()) * 1_000_000n)) {
      if (readBefore.size > 1000) readBefore.clear()
      readBefore.set(file, got)
    }
    return got
  } catch {
    return NONE
  } finally {
    fs.closeSync(fd)
  }
}

/** Whether `rule` matches the workspace path `rel` (a directory when `isDirectory`), `name` its last segment. */
const matches = (rule: Rule, rel: string, name: string, isDirectory: boolean): boolean => {
  if (rule.directoryOnly && !isDirectory) return false
  if (rule.base !== "" && !rel.startsWith(`${rule.base}/`)) return false
  rule.matcher ??= matcherOf(rule.pattern)
  return rule.matcher(!rule.anchored ? name : rule.base === "" ? rel : rel.slice(rule.base.length + 1))
}

/**
 * The rules of the `.gitignore` files from the root down to a directory, in git's order of precedence (the last that
 * matches a path decides), indexed: a pattern that is a plain name is found by the name, so that a path is tried
 * against the few patterns with wildcards or slashes and not against the hundred a real root file has.
 */
class Chain {
  /** Each pattern's index by its key (see `Rule.key`), last first. */
  private readonly byKey = new Map<string, Array<number>>()
  private static readonly NONE: ReadonlyArray<number> = []

  constructor(readonly rules: ReadonlyArray<Rule>) {
    for (let i = rules.length - 1; i >= 0; i--) {
      const key = rules[i]!.key
      const at = this.byKey.get(key)
      if (at === undefined) this.byKey.set(key, [i])
      else at.push(i)
    }
  }

  private of(key: string): ReadonlyArray<number> {
    return this.byKey.get(key) ?? Chain.NONE
  }

  get isEmpty(): boolean {
    return this.rules.length === 0
  }

  /** The last of `indices` (given last first, all above `after`) whose rule matches, else `after`. */
  private lastOf(indices: ReadonlyArray<number>, after: number, rel: string, name: string, isDirectory: boolean) {
    for (const i of indices) {
      if (i <= after) break
      if (matches(this.rules[i]!, rel, name, isDirectory)) return i
    }
    return after
  }

  /** Whether the rules ignore the workspace path `rel`. */
  ignores(rel: string, isDirectory: boolean): boolean {
    const name = rel.slice(rel.lastIndexOf("/") + 1)
    // Only the patterns that can match the name are tried: a name is matched by its own, by those starting with
    // its first character or ending with its last, by those with wildcards at both ends, and by anchored ones.
    let last = -1
    for (const key of [`=${name}`, `^${name[0]}`, `$${name[name.length - 1]}`, "*", "/"]) {
      last = this.lastOf(this.of(key), last, rel, name, isDirectory)
    }
    return last >= 0 && !this.rules[last]!.negated
  }
}

/** The deepest directories above a workspace that are looked at for a `.git`: a checkout is not that deep. */
const DEEPEST_CHECKOUT = 64

/**
 * Where the git work tree a workspace lies in starts: the nearest directory from the workspace up that holds a `.git`
 * (a directory, or a worktree's file), so that the `.gitignore` files above a workspace in a subdirectory of a
 * repository apply as they do to git; the workspace itself when none does.
 */
const topOf = (workspace: string): { readonly root: string; readonly below: string } => {
  let at = workspace
  for (let i = 0; i < DEEPEST_CHECKOUT; i++) {
    let found: boolean
    try {
      found = fs.lstatSync(path.join(at, ".git"), { throwIfNoEntry: false }) !== undefined
    } catch {
      // A directory above that cannot be searched: no further up.
      break
    }
    if (found) return { root: at, below: path.relative(at, workspace).split(path.sep).join("/") }
    const up = path.dirname(at)
    if (up === at) break
    at = up
  }
  return { root: workspace, below: "" }
}

/** Chains made before, by the identities of their files (see {@link readBefore}). */
const chainsBefore = new Map<string, Chain>()

/** Package directories judged before, by path: the identity of their rules and their own, and the answer. */
const judgedBefore = new Map<string, { readonly identity: string; readonly ignored: ReadonlyArray<string> }>()

/** The `.gitignore` rules of a workspace, read once per directory. */
export class Reader {
  private readonly chains = new Map<string, { readonly identity: string; readonly chain: Chain } | "unsure">()

  /** The top of the git work tree the workspace lies in (the workspace itself when it lies in none). */
  private readonly root: string
  /** The workspace's path below {@link root} (`""` when it is the top). */
  private readonly below: string

  constructor(workspace: string) {
    const top = topOf(path.resolve(workspace))
    this.root = top.root
    this.below = top.below
  }

  /**
   * The names of the entries at the top of the package directory `dir` (workspace-relative) that the `.gitignore`
   * files from the top of the git work tree down to it ignore, a directory's with a trailing `/`.
   */
  ignoredIn(workspaceDir: string): Array<string> {
    const dir = this.below === "" ? workspaceDir : workspaceDir === "" ? this.below : `${this.below}/${workspaceDir}`
    const found = this.chainOf(dir)
    if (found === "unsure" || found.chain.isEmpty) return []
    const at = path.join(this.root, dir)
    // A directory whose entries did not change (its times did not) under the same rules has the same answer: a
    // standby engine's no-op check then lists no package directory at all.
    let seen: fs.BigIntStats | undefined
    try {
      seen = fs.lstatSync(at, { bigint: true, throwIfNoEntry: false })
    } catch {
      return []
    }
    const identity = seen === undefined
      ? undefined
      : `${found.identity}|${seen.dev}:${seen.ino}:${seen.mtimeNs}:${seen.ctimeNs}`
    const before = identity === undefined ? undefined : judgedBefore.get(at)
    if (before !== undefined && before.identity === identity) return [...before.ignored]
    let entries: Array<fs.Dirent>
    try {
      entries = fs.readdirSync(at, { withFileTypes: true })
    } catch {
      return []
    }
    const ignored: Array<string> = []
    for (const e of entries) {
      const isDirectory = e.isDirectory()
      if (found.chain.ignores(dir === "" ? e.name : `${dir}/${e.name}`, isDirectory)) {
        ignored.push(isDirectory ? `${e.name}/` : e.name)
      }
    }
    ignored.sort()
    // As a `.gitignore` read (see `readRules`), a directory changed within a timestamp tick is not kept.
    if (identity !== undefined && !racyAt(seen!, BigInt(Date.now()) * 1_000_000n)) {
      if (judgedBefore.size > 10_000) judgedBefore.clear()
      judgedBefore.set(at, { identity, ignored })
    }
    return [...ignored]
  }

  /**
   * The rules that judge the entries of `dir`: those of the `.gitignore` files from the root down to it. `"unsure"`
   * when one of them cannot be read exactly, or when git ignores `dir` or a directory above it (it then holds nothing
   * git would commit, and is not judged at all).
   */
  private chainOf(dir: string): { readonly identity: string; readonly chain: Chain } | "unsure" {
    const known = this.chains.get(dir)
    if (known !== undefined) return known
    const parent = dir === "" ? undefined : this.chainOf(dir.includes("/") ? dir.slice(0, dir.lastIndexOf("/")) : "")
    const own = readRules(this.root, dir)
    let found: { readonly identity: string; readonly chain: Chain } | "unsure"
    if (parent === "unsure" || own.rules === "unsure" || (parent !== undefined && parent.chain.ignores(dir, true))) {
      found = "unsure"
    } else if (own.rules.length === 0 && parent !== undefined) {
      found = parent
    } else {
      const identity = `${parent?.identity ?? path.resolve(this.root)}|${dir}:${own.identity}`
      let chain = chainsBefore.get(identity)
      if (chain === undefined) {
        if (chainsBefore.size > 1000) chainsBefore.clear()
        chainsBefore.set(identity, chain = new Chain([...(parent?.chain.rules ?? []), ...own.rules]))
      }
      found = { identity, chain }
    }
    this.chains.set(dir, found)
    return found
  }
}
