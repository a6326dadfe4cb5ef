/**
 * Glob matching for workspace-relative POSIX paths, with picomatch's semantics (`dot: true`). The common globs
 * (`src/**`, `lib/*.ts`, `**\/*.json`, literal paths) are matched segment by segment with string operations;
 * anything else (`?`, classes, braces, extglobs, escapes) by picomatch's regular expression. Compiling a glob into a
 * regular expression, and V8 compiling that on its first test, is dear per glob: a run of a thousand processes, each
 * with its own globs, spent more on that than on walking the files.
 *
 * @internal
 */
import picomatch from "picomatch"

/** One path segment's pattern: a literal, or literal parts between `*` wildcards. */
type Segment = { readonly _tag: "globstar" } | { readonly _tag: "parts"; readonly parts: ReadonlyArray<string> }

type Compiled = (path: string) => boolean

const compiled = new Map<string, Compiled>()

// `*` is the only magic the segment matcher handles; a path separator inside a segment cannot occur.
const SIMPLE = /^[^?[\]{}()!+@\\|]*$/

const parsed = new Map<string, ReadonlyArray<Segment> | undefined>()

/** Segment patterns, or undefined when the glob needs picomatch; each glob parsed once (its base is asked often). */
const segmentsOf = (glob: string): ReadonlyArray<Segment> | undefined => {
  if (parsed.has(glob)) return parsed.get(glob)
  if (parsed.size > 10_000) parsed.clear()
  const segments = parse(glob)
  parsed.set(glob, segments)
  return segments
}

const parse = (glob: string): ReadonlyArray<Segment> | undefined => {
  if (!SIMPLE.test(glob) || glob.startsWith("/") || glob.startsWith("./") || glob.endsWith("/")) return undefined
  const segments: Array<Segment> = []
  for (const s of glob.split("/")) {
    if (s === "" || s === "." || s === "..") return undefined
    if (s === "**") {
      // Consecutive globstars are one.
      if (segments.at(-1)?._tag !== "globstar") segments.push({ _tag: "globstar" })
    } else {
      // `a**b` is `a*b`: a globstar only when it is the whole segment.
      segments.push({ _tag: "parts", parts: s.replace(/\*+/g, "*").split("*") })
    }
  }
  return segments
}

/** picomatch's `*` (with `dot`): any non-empty segment but `.` and `..`. */
const matchSegment = (parts: ReadonlyArray<string>, s: string): boolean => {
  if (parts.length === 1) return s === parts[0]
  if (s === "." || s === "..") return false
  const first = parts[0]!
  const last = parts[parts.length - 1]!
  if (s.length === 0 || s.length < first.length + last.length) return false
  if (!s.startsWith(first) || !s.endsWith(last)) return false
  let at = first.length
  const end = s.length - last.length
  for (let i = 1; i < parts.length - 1; i++) {
    const found = s.indexOf(parts[i]!, at)
    if (found < 0 || found + parts[i]!.length > end) return false
    at = found + parts[i]!.length
  }
  return true
}

/** picomatch lets a trailing `/**` match nothing (`src/**` matches `src`) unless what precedes it ends in `*`. */
const trailingMayBeEmpty = (pattern: ReadonlyArray<Segment>, p: number): boolean => {
  const before = pattern[p - 1]
  return before !== undefined && (before._tag === "globstar" || before.parts[before.parts.length - 1] !== "")
}

const matchSegments = (
  pattern: ReadonlyArray<Segment>,
  p: number,
  path: ReadonlyArray<string>,
  i: number
): boolean => {
  for (; p < pattern.length; p++, i++) {
    const seg = pattern[p]!
    if (seg._tag === "globstar") {
      // Zero or more whole segments, never `.` or `..`.
      for (let k = i;; k++) {
        if (
          p === pattern.length - 1
            ? k === path.length && (k > i || trailingMayBeEmpty(pattern, p))
            : matchSegments(pattern, p + 1, path, k)
        ) {
          return true
        }
        if (k === path.length || path[k] === "." || path[k] === "..") return false
      }
    }
    if (i >= path.length || !matchSegment(seg.parts, path[i]!)) return false
  }
  return i === path.length
}

const compile = (glob: string): Compiled => {
  const segments = segmentsOf(glob)
  if (segments === undefined) {
    const re = picomatch.makeRe(glob, { dot: true })
    return (p) => re.test(p)
  }
  if (segments.every((s) => s._tag === "parts" && s.parts.length === 1)) return (p) => p === glob
  return (p) => matchSegments(segments, 0, p.split("/"), 0)
}

const compiledOf = (glob: string): Compiled => {
  let c = compiled.get(glob)
  if (c === undefined) {
    if (compiled.size > 10_000) compiled.clear()
    compiled.set(glob, c = compile(glob))
  }
  return c
}

/** Whether a path matches any of the globs; none matches nothing. @internal */
export const matcher = (globs: ReadonlyArray<string>): (path: string) => boolean => {
  const fs = globs.map(compiledOf)
  if (fs.length === 1) return fs[0]!
  return (p) => fs.some((f) => f(p))
}

/** The static part of a glob (where a walk can start), or the glob itself when it has no magic. @internal */
export const baseOf = (glob: string): string => {
  const segments = segmentsOf(glob)
  if (segments !== undefined) {
    const literal: Array<string> = []
    for (const s of segments) {
      if (s._tag === "globstar" || s.parts.length > 1) return literal.join("/")
      literal.push(s.parts[0]!)
    }
    return glob
  }
  const scan = picomatch.scan(glob)
  return scan.isGlob ? scan.base : glob
}

/**
 * The literal start of a glob matched segment by segment ({@link baseOf}): every path it matches is that path or lies
 * under it. Undefined for a glob only picomatch matches, whose paths this does not vouch for. @internal
 */
export const literalBaseOf = (glob: string): string | undefined =>
  segmentsOf(glob) === undefined ? undefined : baseOf(glob)

/**
 * How `glob` meets what lies under the directory `dir` (a workspace path): `some` when it can match a path strictly
 * under it, `all` when it matches every one. Undefined when this cannot be told without a walk (a glob only
 * picomatch matches): a check built on it then says nothing rather than guess. @internal
 */
export const reachUnder = (
  glob: string,
  dir: string
): { readonly some: boolean; readonly all: boolean } | undefined => {
  const pattern = segmentsOf(glob)
  if (pattern === undefined) return undefined
  const names = dir.split("/")
  // Each walks the pattern along `dir`'s names; at its end, what is left of the pattern meets what is below.
  const walk = (p: number, i: number, atEnd: (p: number) => boolean): boolean => {
    if (i === names.length) return atEnd(p)
    const seg = pattern[p]
    if (seg === undefined) return false
    if (seg._tag === "globstar") return walk(p + 1, i, atEnd) || walk(p, i + 1, atEnd)
    return matchSegment(seg.parts, names[i]!) && walk(p + 1, i + 1, atEnd)
  }
  return {
    some: walk(0, 0, (p) => p < pattern.length),
    all: walk(0, 0, (p) => p === pattern.length - 1 && pattern[p]!._tag === "globstar")
  }
}
