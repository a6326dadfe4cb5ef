/**
 * The workspace's packages from its globs (`package.json`'s `workspaces`, `pnpm-workspace.yaml`'s `packages`): every
 * directory an include glob matches that holds a `package.json`, less those a `!` glob matches. As npm, yarn, pnpm and
 * bun do, a walk never enters `node_modules`, nor a directory whose name starts with a dot.
 *
 * The globs are the package managers' (`*`, `**`, `?`, `[…]`, `{a,b}`), matched here without a glob library: this
 * module runs in the no-op check too, which loads no package.
 *
 * @internal
 */
import * as fs from "node:fs"
import * as path from "node:path"

/** A glob as written, normalised: no `./` before it, no `/` after it. */
const normalised = (glob: string) => glob.replace(/^(\.\/)+/, "").replace(/\/+$/, "")

/** One character of a segment's glob: a literal, `?`, a `[…]` class, or `*`. */
type Unit =
  | { readonly kind: "literal"; readonly code: number }
  | { readonly kind: "any" }
  | { readonly kind: "class"; readonly negated: boolean; readonly ranges: ReadonlyArray<readonly [number, number]> }
  | { readonly kind: "star" }

/** The most alternatives one segment's braces may give (`{a,b}{c,d}` gives four): real globs have a handful. */
export const MAX_ALTERNATIVES = 64

/** A `[…]` class's body (after `[`, before `]`): `!` or `^` first negates; `a-z` is a range (one the wrong way none). */
const classOf = (body: string): Unit => {
  const negated = body[0] === "!" || body[0] === "^"
  const ranges: Array<readonly [number, number]> = []
  for (let j = negated ? 1 : 0; j < body.length;) {
    const from = body.charCodeAt(j)
    if (body[j + 1] === "-" && j + 2 < body.length) {
      ranges.push([from, body.charCodeAt(j + 2)])
      j += 3
    } else {
      ranges.push([from, from])
      j++
    }
  }
  return { kind: "class", negated, ranges }
}

/**
 * One path segment's glob (no `/` in it) as the lists of units it may be, its braces expanded; undefined past
 * {@link MAX_ALTERNATIVES}.
 */
const alternativesOf = (segment: string): Array<Array<Unit>> | undefined => {
  let lists: Array<Array<Unit>> = [[]]
  const add = (unit: Unit) => lists.forEach((l) => l.push(unit))
  for (let i = 0; i < segment.length; i++) {
    const c = segment[i]!
    if (c === "*") {
      add({ kind: "star" })
    } else if (c === "?") {
      add({ kind: "any" })
    } else if (c === "[") {
      const end = segment.indexOf("]", i + 2)
      if (end < 0) {
        add({ kind: "literal", code: c.charCodeAt(0) })
        continue
      }
      add(classOf(segment.slice(i + 1, end)))
      i = end
    } else if (c === "{") {
      const end = segment.indexOf("}", i)
      if (end < 0) {
        add({ kind: "literal", code: c.charCodeAt(0) })
        continue
      }
      const next: Array<Array<Unit>> = []
      for (const alternative of segment.slice(i + 1, end).split(",")) {
        const tails = alternativesOf(alternative)
        if (tails === undefined) return undefined
        for (const head of lists) for (const tail of tails) next.push([...head, ...tail])
        if (next.length > MAX_ALTERNATIVES) return undefined
      }
      lists = next
      i = end
    } else {
      add({ kind: "literal", code: segment.charCodeAt(i) })
    }
  }
  return lists
}

const matchesOne = (unit: Unit, code: number): boolean => {
  switch (unit.kind) {
    case "literal":
      return unit.code === code
    case "any":
      return true
    case "class":
      return unit.ranges.some(([from, to]) => code >= from && code <= to) !== unit.negated
    case "star":
      return false
  }
}

/**
 * Whether `items` match `pattern`, where `isStar` marks the items of the pattern that match any run (none
 * included) and `one` matches a single item: the classic wildcard walk, which goes back only to the last star, so
 * that its time is at most the product of the two lengths, whatever the pattern (a regular expression of many `*`s
 * took exponential time on a long name).
 */
const wildcardMatch = <P, T>(
  pattern: ReadonlyArray<P>,
  items: ReadonlyArray<T> | string,
  isStar: (p: P) => boolean,
  one: (p: P, at: number) => boolean
): boolean => {
  let p = 0
  let i = 0
  let starP = -1
  let starI = 0
  while (i < items.length) {
    if (p < pattern.length && !isStar(pattern[p]!) && one(pattern[p]!, i)) {
      p++
      i++
    } else if (p < pattern.length && isStar(pattern[p]!)) {
      starP = p++
      starI = i
    } else if (starP >= 0) {
      p = starP + 1
      i = ++starI
    } else {
      return false
    }
  }
  while (p < pattern.length && isStar(pattern[p]!)) p++
  return p === pattern.length
}

/** A segment of a glob: `**` (any number of whole segments) or what one segment may be. */
type Segment = "**" | ReadonlyArray<ReadonlyArray<Unit>>

/**
 * A matcher of workspace-relative directory paths (`""`: the root); one that matches nothing when the glob has more
 * alternatives than {@link MAX_ALTERNATIVES} (see {@link globProblem}).
 */
export const globMatcher = (glob: string): (dir: string) => boolean => {
  const g = normalised(glob)
  if (g === "" || g === ".") return (dir) => dir === ""
  const segments: Array<Segment> = []
  for (const s of g.split("/")) {
    if (s === "**") {
      segments.push("**")
      continue
    }
    const alternatives = alternativesOf(s)
    if (alternatives === undefined) return () => false
    segments.push(alternatives)
  }
  const segmentMatches = (segment: Segment, part: string) =>
    segment !== "**" &&
    segment.some((units) =>
      wildcardMatch(units, part, (u) => u.kind === "star", (u, at) => matchesOne(u, part.charCodeAt(at)))
    )
  return (dir) => {
    const parts = dir === "" ? [] : dir.split("/")
    return wildcardMatch(segments, parts, (s) => s === "**", (s, at) => segmentMatches(s, parts[at]!))
  }
}

/** Why a glob cannot be matched as written (too many alternatives), or undefined. */
export const globProblem = (glob: string): string | undefined =>
  normalised(glob).split("/").some((s) => s !== "**" && alternativesOf(s) === undefined)
    ? `has more than ${MAX_ALTERNATIVES} alternatives in one segment`
    : undefined

/** Where a walk for `glob` starts (its literal directories) and how deep it goes below there (Infinity for `**`). */
const walkOf = (glob: string): { readonly base: string; readonly depth: number } => {
  const segments = normalised(glob).split("/").filter((s) => s !== "" && s !== ".")
  const literal: Array<string> = []
  for (const s of segments) {
    if (/[*?[{]/.test(s)) break
    literal.push(s)
  }
  const rest = segments.slice(literal.length)
  return { base: literal.join("/"), depth: rest.includes("**") ? Infinity : rest.length }
}

/** Whether a relative path stays inside the workspace (no `..`, not absolute). */
export const staysInside = (p: string) => p !== "" && !p.startsWith("/") && !p.split("/").includes("..")

/**
 * The package directories one include glob finds (relative to `root`, sorted), before any exclusion. A directory
 * qualifies when it holds a `package.json` file. No symlink is followed, neither on the way to the glob's base nor
 * to a `package.json` (a committed link would have kiln read, and run the scripts of, a package outside the
 * workspace), and none is walked into.
 */
export const directoriesOf = (root: string, glob: string): Array<string> => {
  const matches = globMatcher(glob)
  const { base, depth } = walkOf(glob)
  const found: Array<string> = []
  const visit = (rel: string, left: number) => {
    if (matches(rel) && isFile(path.join(root, rel, "package.json"))) found.push(rel)
    if (left === 0) return
    let entries: Array<fs.Dirent>
    try {
      entries = fs.readdirSync(path.join(root, rel), { withFileTypes: true })
    } catch {
      return
    }
    for (const e of entries) {
      if (!e.isDirectory() || e.name === "node_modules" || e.name.startsWith(".")) continue
      visit(rel === "" ? e.name : `${rel}/${e.name}`, left - 1)
    }
  }
  if (isRealDirectory(root, base)) visit(base, depth)
  return found.sort()
}

/** Whether `file` is a regular file, not a symlink to one. */
const isFile = (file: string): boolean => {
  try {
    return fs.lstatSync(file).isFile()
  } catch {
    return false
  }
}

/** Whether `rel` under `root` is a directory reached through directories alone, no symlink on the way. */
const isRealDirectory = (root: string, rel: string): boolean => {
  let at = root
  for (const segment of rel === "" ? [] : rel.split("/")) {
    at = path.join(at, segment)
    try {
      if (!fs.lstatSync(at).isDirectory()) return false
    } catch {
      // Nothing there: the glob finds nothing.
      return false
    }
  }
  return true
}
