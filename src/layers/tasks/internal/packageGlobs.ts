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

const escapeRegExp = (s: string) => s.replace(/[.+^$()|\\]/g, "\\$&")

/** One path segment's glob as a regular expression's source (no `/` in it). */
const segmentSource = (segment: string): string => {
  let out = ""
  for (let i = 0; i < segment.length; i++) {
    const c = segment[i]!
    if (c === "*") {
      out += "[^/]*"
    } else if (c === "?") {
      out += "[^/]"
    } else if (c === "[") {
      const end = segment.indexOf("]", i + 2)
      if (end < 0) {
        out += "\\["
        continue
      }
      const body = segment.slice(i + 1, end).replace(/^!/, "^").replace(/\\/g, "\\\\")
      out += `[${body}]`
      i = end
    } else if (c === "{") {
      const end = segment.indexOf("}", i)
      if (end < 0) {
        out += "\\{"
        continue
      }
      out += `(?:${segment.slice(i + 1, end).split(",").map(segmentSource).join("|")})`
      i = end
    } else {
      out += escapeRegExp(c)
    }
  }
  return out
}

/** A matcher of workspace-relative directory paths (`""`: the root). */
export const globMatcher = (glob: string): (dir: string) => boolean => {
  const g = normalised(glob)
  if (g === "" || g === ".") return (dir) => dir === ""
  const segments = g.split("/")
  const last = segments.length - 1
  let source = ""
  for (const [i, s] of segments.entries()) {
    if (s === "**") {
      // Any number of whole segments, none included.
      source += last === 0 ? ".*" : i === 0 ? "(?:[^/]+/)*" : i === last ? "(?:/[^/]+)*" : "(?:/[^/]+)*/"
      continue
    }
    source += (i > 0 && segments[i - 1] !== "**" ? "/" : "") + segmentSource(s)
  }
  const re = new RegExp(`^${source}$`)
  return (dir) => re.test(dir)
}

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
