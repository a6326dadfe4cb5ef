/**
 * Byte sizes as users write them: `1024`, `512K`, `20GiB`, `1.5G` (binary units; `B` and `iB` optional).
 */
import * as Either from "effect/Either"

const UNITS: Record<string, number> = { "": 1, k: 2 ** 10, m: 2 ** 20, g: 2 ** 30, t: 2 ** 40 }

export const parse = (input: string): Either.Either<number, string> => {
  const m = /^\s*(\d+(?:\.\d+)?)\s*([kmgt]?)(?:i?b)?\s*$/i.exec(input)
  if (m === null) {
    return Either.left(`invalid size \`${input}\`: expected a number of bytes with an optional unit (K, M, G, T)`)
  }
  const bytes = Math.floor(Number(m[1]) * UNITS[m[2]!.toLowerCase()]!)
  return Number.isSafeInteger(bytes) ? Either.right(bytes) : Either.left(`invalid size \`${input}\`: too large`)
}

export const format = (bytes: number): string => {
  const units = ["B", "KiB", "MiB", "GiB", "TiB"]
  let n = bytes
  let i = 0
  while (n >= 1024 && i < units.length - 1) {
    n /= 1024
    i++
  }
  return i === 0 ? `${bytes} B` : `${n.toFixed(n >= 100 ? 0 : n >= 10 ? 1 : 2)} ${units[i]}`
}
