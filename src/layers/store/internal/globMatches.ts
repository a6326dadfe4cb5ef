/**
 * Which include globs of a snapshot matched a file or symlink it holds, recorded as its walk adds each one (the walk
 * has the path in hand then): a glob that matched nothing is a caller's error to report (the engine's "matches
 * nothing"), and finding it afterwards cost a second walk of the snapshot's tree, listing the trees taken whole.
 *
 * @internal
 */
import type { Filter } from "./snapshotFilter.js"
import type { WholeDir } from "./walks/statIndex.js"
import * as WholeDirs from "./walks/wholeDirs.js"

/** @internal */
export interface GlobMatches {
  readonly filter: Filter
  /** By include glob (`Filter.includeGlobs`): whether it matched a path the snapshot holds. */
  readonly hit: Array<boolean>
  /** How many have not: once none is left, a path costs nothing more. */
  left: number
}

/** @internal */
export const make = (filter: Filter): GlobMatches => ({
  filter,
  hit: filter.includeGlobs.map(() => false),
  left: filter.includeGlobs.length
})

/** Whether `rel` is `base` or lies under it. */
const within = (rel: string, base: string) => base === "" || rel === base || rel.startsWith(`${base}/`)

/**
 * A file or symlink at `rel` went into the snapshot's tree. A glob matches only under its base (the walk starts
 * there), so most globs are passed over by a prefix test, not a match.
 *
 * @internal
 */
export const notePath = (m: GlobMatches, rel: string): void => {
  if (m.left === 0) return
  const globs = m.filter.includeGlobs
  for (let i = 0; i < globs.length; i++) {
    const g = globs[i]!
    if (!m.hit[i] && within(rel, g.base) && g.matches(rel)) {
      m.hit[i] = true
      m.left--
    }
  }
}

/**
 * A directory taken whole (`abs`, at `rel`) went into the snapshot's tree. A glob that takes it whole (`dir/**`)
 * matched if it holds a file or symlink: its tree keeps its empty directories (it is the directory as it is on disk),
 * and a directory holding only empty ones matches nothing, as it does where the walk drops them. A glob whose base
 * reaches into it is tried on its paths, listed only then.
 *
 * @internal
 */
export const noteWhole = (m: GlobMatches, rel: string, abs: string, whole: WholeDir): void => {
  if (m.left === 0) return
  // Its walk observed every path under it: the first file or symlink ends the search.
  if (!whole.observations.some((o) => o.kind === "f" || o.kind === "l")) return
  const globs = m.filter.includeGlobs
  let inside: ReadonlyArray<string> | undefined
  for (let i = 0; i < globs.length; i++) {
    if (m.hit[i]) continue
    const { base, glob, matches } = globs[i]!
    const takesIt = glob === "**" || (glob === `${base}/**` && within(rel, base))
    const reaches = within(rel, base) || base.startsWith(`${rel}/`)
    if (!takesIt && !reaches) continue
    if (!takesIt) {
      inside ??= WholeDirs.pathsIn(whole, abs)
      if (!inside.some((p) => matches(`${rel}/${p}`))) continue
    }
    m.hit[i] = true
    m.left--
  }
}

/**
 * A walk whose tree may not be kept (a glob's base walked into a holder first): its matches count once merged.
 *
 * @internal
 */
export const fork = (m: GlobMatches): GlobMatches => ({ filter: m.filter, hit: [...m.hit], left: m.left })

/** @internal */
export const merge = (into: GlobMatches, from: GlobMatches): void => {
  from.hit.forEach((h, i) => {
    if (h && !into.hit[i]) {
      into.hit[i] = true
      into.left--
    }
  })
}

/** The include globs that matched nothing, in their order. @internal */
export const unmatched = (m: GlobMatches): Array<string> =>
  m.filter.includeGlobs.flatMap((g, i) => m.hit[i] ? [] : [g.glob])
