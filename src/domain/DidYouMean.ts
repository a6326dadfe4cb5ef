/**
 * "Did you mean": the nearest of some names to one that names none, for the command line's errors (`usage.ts`) as for
 * kiln.json's (`domain/internal/didYouMean.ts` holds the code).
 *
 * @since 0.1.0
 */
export {
  /**
   * ` : did you mean "a" or "b"?`, or "" when nothing is near.
   *
   * @since 0.1.0
   */
  didYouMean,
  /**
   * The candidates nearest a word, if near enough.
   *
   * @since 0.1.0
   */
  nearest
} from "./internal/didYouMean.js"
