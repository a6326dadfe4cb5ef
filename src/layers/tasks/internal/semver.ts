/**
 * Whether a version satisfies a dependency's range, as npm, yarn and bun decide that a workspace package (rather
 * than the registry's) is what a dependency names: `1.2.3`, `=1.2.3`, `^1.2`, `~1.2.3`, `1.x`, `*`, `>=1 <2`,
 * `1.0.0 - 2.0.0` and `a || b`. A version with a prerelease tag satisfies only a comparator of the same
 * major.minor.patch that has one too, as semver says. A range it cannot read is not satisfied: the dependency is then
 * not the workspace's.
 *
 * @internal
 */

type Version = readonly [number, number, number, string]

const VERSION = /^v?(\d+)\.(\d+)\.(\d+)(?:-([0-9A-Za-z.-]+))?(?:\+[0-9A-Za-z.-]+)?$/

const versionOf = (text: string): Version | undefined => {
  const m = VERSION.exec(text.trim())
  return m === null ? undefined : [Number(m[1]), Number(m[2]), Number(m[3]), m[4] ?? ""]
}

const comparePre = (a: string, b: string): number => {
  if (a === b) return 0
  if (a === "") return 1
  if (b === "") return -1
  const pa = a.split(".")
  const pb = b.split(".")
  for (let i = 0; i < Math.max(pa.length, pb.length); i++) {
    const x = pa[i]
    const y = pb[i]
    if (x === undefined) return -1
    if (y === undefined) return 1
    if (x === y) continue
    const nx = /^\d+$/.test(x)
    const ny = /^\d+$/.test(y)
    if (nx && ny) return Number(x) - Number(y)
    if (nx) return -1
    if (ny) return 1
    return x < y ? -1 : 1
  }
  return 0
}

const compare = (a: Version, b: Version): number => a[0] - b[0] || a[1] - b[1] || a[2] - b[2] || comparePre(a[3], b[3])

/** A partial version: `1`, `1.2`, `1.2.3`, `1.x`, `*`, with its prerelease. */
interface Partial {
  readonly parts: ReadonlyArray<number>
  readonly pre: string
}

const partialOf = (text: string): Partial | undefined => {
  const m = /^v?(?:(\d+|[xX*])(?:\.(\d+|[xX*])(?:\.(\d+|[xX*])(?:-([0-9A-Za-z.-]+))?)?)?)?(?:\+[0-9A-Za-z.-]+)?$/
    .exec(text)
  if (m === null) return undefined
  const parts: Array<number> = []
  for (const p of [m[1], m[2], m[3]]) {
    if (p === undefined || /^[xX*]$/.test(p)) break
    parts.push(Number(p))
  }
  return { parts, pre: m[4] ?? "" }
}

type Comparator = { readonly op: "<" | "<=" | ">" | ">=" | "="; readonly v: Version }

const full = (p: Partial, fill = 0): Version => [p.parts[0] ?? fill, p.parts[1] ?? fill, p.parts[2] ?? fill, p.pre]

/** The comparators one term of a range stands for (`^1.2` is `>=1.2.0 <2.0.0-0`), or undefined. */
const comparatorsOf = (term: string): Array<Comparator> | undefined => {
  const m = /^(\^|~>?|>=|<=|>|<|=)?\s*(.*)$/.exec(term)!
  const op = m[1] ?? ""
  const p = partialOf(m[2]!)
  if (p === undefined) return undefined
  const [major, minor, patch] = p.parts
  const low = full(p)
  const upper = (v: Version): Comparator => ({ op: "<", v })
  if (op === "^") {
    if (major === undefined) return []
    const hi: Version = major > 0 || minor === undefined
      ? [major + 1, 0, 0, "0"]
      : minor > 0 || patch === undefined
      ? [0, minor + 1, 0, "0"]
      : [0, 0, patch + 1, "0"]
    return [{ op: ">=", v: low }, upper(hi)]
  }
  if (op === "~" || op === "~>") {
    if (major === undefined) return []
    const hi: Version = minor === undefined ? [major + 1, 0, 0, "0"] : [major, minor + 1, 0, "0"]
    return [{ op: ">=", v: low }, upper(hi)]
  }
  if (op === "" || op === "=") {
    if (major === undefined) return []
    if (patch !== undefined) return [{ op: "=", v: low }]
    const hi: Version = minor === undefined ? [major + 1, 0, 0, "0"] : [major, minor + 1, 0, "0"]
    return [{ op: ">=", v: low }, upper(hi)]
  }
  if (major === undefined) return op === "<" || op === ">" ? [{ op: "<", v: [0, 0, 0, "0"] }] : []
  if (op === ">" && patch === undefined) {
    return [{ op: ">=", v: minor === undefined ? [major + 1, 0, 0, ""] : [major, minor + 1, 0, ""] }]
  }
  if (op === "<=" && patch === undefined) {
    return [upper(minor === undefined ? [major + 1, 0, 0, "0"] : [major, minor + 1, 0, "0"])]
  }
  return [{ op: op as Comparator["op"], v: low }]
}

const holds = (v: Version, c: Comparator): boolean => {
  const d = compare(v, c.v)
  switch (c.op) {
    case "<":
      return d < 0
    case "<=":
      return d <= 0
    case ">":
      return d > 0
    case ">=":
      return d >= 0
    case "=":
      return d === 0
  }
}

/** Whether `version` satisfies `range`. */
export const satisfies = (version: string, range: string): boolean => {
  const v = versionOf(version)
  if (v === undefined) return false
  return range.split("||").some((alternative) => {
    const text = alternative.trim().replace(/(\^|~>?|>=|<=|>|<|=)\s+/g, "$1")
    let comparators: Array<Comparator> = []
    const hyphen = /^(\S+)\s+-\s+(\S+)$/.exec(text)
    if (hyphen !== null) {
      const from = partialOf(hyphen[1]!)
      const to = partialOf(hyphen[2]!)
      if (from === undefined || to === undefined) return false
      comparators.push({ op: ">=", v: full(from) })
      const [major, minor] = to.parts
      if (to.parts.length === 3) comparators.push({ op: "<=", v: full(to) })
      else if (major !== undefined) {
        comparators.push({ op: "<", v: minor === undefined ? [major + 1, 0, 0, "0"] : [major, minor + 1, 0, "0"] })
      }
    } else {
      for (const term of text === "" ? [] : text.split(/\s+/)) {
        const cs = comparatorsOf(term)
        if (cs === undefined) return false
        comparators = comparators.concat(cs)
      }
    }
    if (!comparators.every((c) => holds(v, c))) return false
    // A prerelease satisfies only a comparator of its own major.minor.patch that has a prerelease too.
    return v[3] === "" ||
      comparators.some((c) => c.v[3] !== "" && c.v[3] !== "0" && c.v[0] === v[0] && c.v[1] === v[1] && c.v[2] === v[2])
  })
}
