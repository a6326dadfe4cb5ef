/**
 * Durations as users write them in flags and config: `250ms`, `90s`, `5m`, `1h`, `1.5s`.
 */
import * as Duration from "effect/Duration"
import * as Either from "effect/Either"

const UNITS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000 }

export const parse = (input: string): Either.Either<Duration.Duration, string> => {
  const m = /^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h)\s*$/.exec(input)
  if (m === null) {
    return Either.left(`invalid duration \`${input}\`: expected a number and a unit (ms, s, m, h), e.g. 90s`)
  }
  return Either.right(Duration.millis(Math.round(Number(m[1]) * UNITS[m[2]!]!)))
}
