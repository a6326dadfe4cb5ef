/**
 * "Did you mean": the nearest of some names to one that names none, for the command line's errors (`usage.ts`) as for
 * kiln.json's (`domain/internal/didYouMean.ts` holds the code).
 */
export {
  /**
   * ` : did you mean "a" or "b"?`, or "" when nothing is near.
   */
  didYouMean,
  /**
   * The candidates nearest a word, if near enough.
   */
  nearest
} from "../internal/didYouMean.js"
