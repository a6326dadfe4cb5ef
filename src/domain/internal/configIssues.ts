/**
 * kiln.json's schema errors in a user's words, every one of them: `expected an array of strings, e.g. ["node",
 * "tools/gen.mjs"]` where the schema says `Expected ReadonlyArray<string>, actual "node tools/gen.mjs"`, all three
 * allowed values of a choice where it names the first, and "did you mean" for an unknown field (or what kiln calls a
 * field another build tool's name is for).
 *
 * @internal
 */
import * as Option from "effect/Option"
import type * as ParseResult from "effect/ParseResult"
import * as AST from "effect/SchemaAST"
import type { Finding } from "../config/Config.js"
import { didYouMean } from "./didYouMean.js"

/**
 * An annotation saying what a schema expects, in a user's words (`a duration such as "60s"`): its errors say that,
 * whatever part of it failed.
 *
 * @internal
 */
export const Expected: unique symbol = Symbol.for("kiln/Config/Expected")

/** A problem of the config (see `Config.Finding`). */
export type Found = Finding

/** Other tools' names for kiln's fields (turbo, Nx, Pants, npm): what to write instead. */
const OTHER_NAMES: Record<string, string> = {
  dependsOn: "kiln calls it `deps`",
  command: "kiln calls it `argv`, an array: e.g. [\"npm\", \"run\", \"build\"]",
  cmd: "kiln calls it `argv`, an array: e.g. [\"npm\", \"run\", \"build\"]",
  args: "kiln calls it `argv`, an array whose first element is the command",
  cwd: "kiln calls it `workingDirectory`",
  pipeline: "kiln calls it `tasks`",
  targets: "kiln calls them `processes`",
  globalDependencies: "kiln's are `defaults.inputs`",
  globalEnv: "kiln's are `defaults.passEnv`",
  globalPassThroughEnv: "kiln's are `defaults.passThroughEnv`",
  timeout_seconds: "kiln's `timeout` is a duration such as \"60s\""
}

/** What the words of a field that is not there say, at `at` among `fields`. */
const unknownField = (
  at: ReadonlyArray<PropertyKey>,
  fields: ReadonlyArray<string>,
  processFields: ReadonlySet<string>,
  defaultsFields: ReadonlySet<string>
): string => {
  const word = String(at.at(-1))
  const other = OTHER_NAMES[word]
  if (other !== undefined) return `unknown field: ${other}`
  const topLevel = at.length === 1
  if (topLevel && defaultsFields.has(word)) {
    return `unknown field: \`${word}\` for every process goes in \`defaults\`, one process's in processes.NAME`
  }
  if ((topLevel || at[0] === "defaults") && processFields.has(word)) {
    return `unknown field: \`${word}\` belongs to a process: processes.NAME.${word}`
  }
  return `unknown field${didYouMean(word, fields)}`
}

const isUndefined = (ast: AST.AST) => ast._tag === "UndefinedKeyword"

/** `["node", "tools/gen.mjs"]` from `"node tools/gen.mjs"`: what an array of strings written as one string meant. */
const asArray = (s: string) => JSON.stringify(s.trim().split(/\s+/).filter((w) => w !== "")).replace(/","/g, "\", \"")

/** What `ast` expects, in a user's words; `actual` gives an example where it can. */
const expected = (ast: AST.AST, actual: unknown): string => {
  const named = AST.getAnnotation<string>(ast, Expected)
  if (Option.isSome(named)) return `expected ${named.value}`
  switch (ast._tag) {
    case "TupleType": {
      const element = ast.rest[0]?.type
      const of = element?._tag === "StringKeyword" ? "strings" : "values"
      return `expected an array of ${of}${
        typeof actual === "string" && of === "strings" ? `, e.g. ${asArray(actual)}` : ""
      }`
    }
    case "StringKeyword":
      return "expected a string"
    case "BooleanKeyword":
      return "expected true or false"
    case "TypeLiteral":
      return ast.propertySignatures.length === 0 ? "expected an object of names and strings" : "expected an object"
    case "Literal":
      return `expected ${JSON.stringify(ast.literal)}`
    case "Union": {
      const members = ast.types.filter((t) => !isUndefined(t))
      if (members.every(AST.isLiteral)) {
        const values = members.map((m) => JSON.stringify(m.literal))
        return values.length === 1 ? `expected ${values[0]}` : `expected one of ${values.join(", ")}`
      }
      return members.length === 1 ? expected(members[0]!, actual) : "invalid"
    }
    case "Refinement":
      return expected(ast.from, actual)
    case "Transformation":
      return expected(ast.to, actual)
    default:
      return "invalid"
  }
}

/** The words of a schema's `message` annotation, when they are a plain string. */
const messageOf = (issue: ParseResult.ParseIssue, ast: AST.AST): string | undefined => {
  const annotation = AST.getMessageAnnotation(ast)
  if (Option.isNone(annotation)) return undefined
  const said = annotation.value(issue)
  return typeof said === "string" ?
    said :
    typeof said === "object" && "message" in said && typeof said.message === "string"
    ? said.message
    : undefined
}

/** What a record's key must be, when its schema says so (a named cache's name): the words for a key that is not. */
const keyRuleOf = (ast: AST.AST): string | undefined => {
  if (ast._tag !== "TypeLiteral") return undefined
  const parameter = ast.indexSignatures[0]?.parameter
  if (parameter === undefined) return undefined
  const annotation = AST.getMessageAnnotation(parameter)
  if (Option.isNone(annotation)) return undefined
  const said = annotation.value(undefined as never)
  return typeof said === "string" ? said : undefined
}

/** The fields of the object `ast` is, for "did you mean". */
const fieldsOf = (ast: AST.AST): ReadonlyArray<string> | undefined =>
  ast._tag === "TypeLiteral" && ast.propertySignatures.length > 0
    ? ast.propertySignatures.map((p) => String(p.name))
    : ast._tag === "Transformation"
    ? fieldsOf(ast.to)
    : undefined

/**
 * Every problem `issue` holds, each once, where it is.
 *
 * @internal
 */
export const problemsOf = (
  issue: ParseResult.ParseIssue,
  processFields: ReadonlySet<string>,
  defaultsFields: ReadonlySet<string>
): Array<Found> => {
  const found: Array<Found> = []
  const walk = (
    issue: ParseResult.ParseIssue,
    at: ReadonlyArray<PropertyKey>,
    fields: ReadonlyArray<string>,
    keyRule?: string
  ) => {
    switch (issue._tag) {
      case "Pointer": {
        const more = Array.isArray(issue.path) ? issue.path : [issue.path as PropertyKey]
        return walk(issue.issue, [...at, ...more], fields, keyRule)
      }
      case "Unexpected":
        return found.push({
          at,
          detail: keyRule ?? unknownField(at, fields, processFields, defaultsFields),
          key: true
        })
      case "Missing":
        return found.push({ at, detail: "is required" })
      case "Forbidden":
        return found.push({ at, detail: issue.message ?? "invalid" })
      case "Type":
        return found.push({ at, detail: issue.message ?? expected(issue.ast, issue.actual) })
      case "Refinement":
        // A filter's own words (`must not be empty: …`), else what the refined schema expects as a whole.
        if (issue.kind === "Predicate") {
          const said = messageOf(issue, issue.ast) ??
            (issue.issue._tag === "Type" ? issue.issue.message : undefined)
          if (said !== undefined) return found.push({ at, detail: said })
        }
        if (Option.isSome(AST.getAnnotation(issue.ast, Expected))) {
          return found.push({ at, detail: expected(issue.ast, issue.actual) })
        }
        return walk(issue.issue, at, fields)
      case "Transformation":
        return walk(issue.issue, at, fields)
      case "Composite": {
        const issues = Array.isArray(issue.issues) ? issue.issues : [issue.issues as ParseResult.ParseIssue]
        if (issue.ast._tag === "Union") {
          // An optional field is a union with undefined: what the field is when it is there is what went wrong.
          const members = issue.ast.types.filter((t) => !isUndefined(t))
          const relevant = issues.filter((i) => !(i._tag === "Type" && isUndefined(i.ast)))
          if (members.length === 1 && relevant.length === 1) return walk(relevant[0]!, at, fields)
          return found.push({ at, detail: expected(issue.ast, issue.actual) })
        }
        const inner = fieldsOf(issue.ast) ?? fields
        for (const i of issues) walk(i, at, inner, keyRuleOf(issue.ast))
        return
      }
    }
  }
  walk(issue, [], [])
  const seen = new Set<string>()
  return found.filter((f) => {
    const key = JSON.stringify([f.at.map(String), f.detail])
    if (seen.has(key)) return false
    seen.add(key)
    return true
  })
}

/** The path of the first own `__proto__` key in `json`'s objects, if any. */
export const reservedKeyIn = (json: unknown, at: Array<PropertyKey>): Array<PropertyKey> | undefined => {
  if (typeof json !== "object" || json === null) return undefined
  if (!Array.isArray(json) && Object.hasOwn(json, "__proto__")) return [...at, "__proto__"]
  for (const [k, v] of Object.entries(json)) {
    const found = reservedKeyIn(v, [...at, Array.isArray(json) ? Number(k) : k])
    if (found !== undefined) return found
  }
  return undefined
}
