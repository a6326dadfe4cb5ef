/**
 * "Did you mean": the candidates nearest a word that names none (a field, a process, an option, a command), by
 * Damerau-Levenshtein distance. Plain code without Effect: the no-op check and the direct `kiln run` reader load it.
 *
 * @internal
 */
import { editDistance } from "./nearestNames.js"

/** Edits (insert, delete, substitute, swap two neighbours) from `a` to `b`, case-insensitive. */
const distance = (a: string, b: string): number => editDistance(a.toLowerCase(), b.toLowerCase())

/**
 * The candidates nearest `word`, if within a third of the longer word's length (at least one edit: `bild` →
 * `build`), in alphabetical order, at most `max`. A candidate equal to
 * `word` is not a suggestion.
 *
 * @internal
 */
export const nearest = (word: string, candidates: ReadonlyArray<string>, max = 3): Array<string> => {
  const near = [...new Set(candidates)]
    .filter((c) => c !== word)
    .map((candidate) => ({ candidate, d: distance(word, candidate) }))
    .filter(({ candidate, d }) =>
      d <= Math.max(1, Math.floor(Math.max(word.length, candidate.length) / 3)) &&
      // Not a word replaced whole: `x` is one edit from `a`, and no more like it.
      d < Math.min(word.length, candidate.length)
    )
  // Only the nearest: `ouputs` is one edit from `outputs`, and two from `inputs`, which would only confuse.
  const best = Math.min(...near.map(({ d }) => d))
  return near.filter(({ d }) => d === best)
    .sort((x, y) => x.candidate.localeCompare(y.candidate))
    .slice(0, max)
    .map(({ candidate }) => candidate)
}

/**
 * ` (did you mean "a" or "b"?)`, or "" when nothing is near: what an error line that names an unknown word ends with.
 *
 * @internal
 */
export const didYouMean = (word: string, candidates: ReadonlyArray<string>, quote = (s: string) => `"${s}"`) => {
  const near = nearest(word, candidates).map(quote)
  if (near.length === 0) return ""
  const listed = near.length === 1 ? near[0] : `${near.slice(0, -1).join(", ")} or ${near.at(-1)}`
  return `: did you mean ${listed}?`
}
