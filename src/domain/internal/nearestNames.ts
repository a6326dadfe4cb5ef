/**
 * The process names nearest a selection word a user typed (`kiln run biuld:*`), by an edit distance in which a
 * glob's wildcards are free. Fields, options and commands are suggested by `didYouMean.ts`, whose words have no
 * wildcards. Plain code: the run memo's check selects before Effect is loaded.
 *
 * @internal
 */

/**
 * The edit distance (insertions, deletions, substitutions, and a swap of two neighbours, each costing 1) from
 * `pattern` to `text`. With `wildcards`, a `*` in `pattern` stands for any run of characters and a `?` for any one,
 * both free: `biuld:*` is one swap away from `build:web`.
 *
 * @internal
 */
export const editDistance = (pattern: string, text: string, wildcards = false): number => {
  const m = pattern.length
  const n = text.length
  // rows[i][j]: the distance from pattern[0, i) to text[0, j).
  const rows: Array<Array<number>> = [Array.from({ length: n + 1 }, (_, j) => j)]
  for (let i = 1; i <= m; i++) {
    const p = pattern[i - 1]!
    const star = wildcards && p === "*"
    const row: Array<number> = [star ? rows[i - 1]![0]! : i]
    for (let j = 1; j <= n; j++) {
      const t = text[j - 1]!
      const above = rows[i - 1]!
      let best: number
      if (star) {
        // The star takes nothing (above), or one more character (left).
        best = Math.min(above[j]!, row[j - 1]!)
      } else {
        const same = p === t || (wildcards && p === "?")
        best = Math.min(above[j]! + 1, row[j - 1]! + 1, above[j - 1]! + (same ? 0 : 1))
        if (i > 1 && j > 1 && p === text[j - 2] && pattern[i - 2] === t) best = Math.min(best, rows[i - 2]![j - 2]! + 1)
      }
      row.push(best)
    }
    rows.push(row)
  }
  return rows[m]![n]!
}

/** Whether a word holds a wildcard ({@link editDistance}'s `*` or `?`). @internal */
export const hasWildcards = (word: string): boolean => /[*?]/.test(word)

/**
 * The candidates nearest `word` (at most `limit`, in the candidates' order): those at the least distance from it, if
 * that is within a third of the word's length (at least 2 edits; wildcards in `word` match freely). None when nothing
 * is that near: a suggestion far from what was typed only misleads.
 *
 * @internal
 */
export const nearest = (
  word: string,
  candidates: Iterable<string>,
  options: { readonly limit?: number; readonly wildcards?: boolean } = {}
): Array<string> => {
  const wildcards = options.wildcards ?? false
  const literal = wildcards ? word.replace(/[*?]/g, "") : word
  const within = Math.max(2, Math.floor(literal.length / 3))
  const scored: Array<{ readonly name: string; readonly distance: number }> = []
  for (const name of candidates) {
    if (name === word) continue
    const distance = editDistance(word, name, wildcards)
    if (distance <= within) scored.push({ name, distance })
  }
  const least = Math.min(...scored.map((s) => s.distance))
  return scored.filter((s) => s.distance === least).slice(0, options.limit ?? 3).map((s) => s.name)
}

/**
 * `did you mean "a", "b" or "c"?`, for {@link nearest}'s suggestions; "" when there are none.
 *
 * @internal
 */
export const didYouMean = (suggestions: ReadonlyArray<string>): string => {
  if (suggestions.length === 0) return ""
  const quoted = suggestions.map((s) => JSON.stringify(s))
  const list = quoted.length === 1 ? quoted[0]! : `${quoted.slice(0, -1).join(", ")} or ${quoted.at(-1)}`
  return `did you mean ${list}?`
}
