// The size bar for src/: no file over 600 lines and no function over 150, measured on TypeScript's syntax tree (a
// function's lines run from its first token to its closing brace; a nested function counts inside its parent too).
// `node scripts/sizes.mjs` prints each one over the bar and exits 1; test/package/sizes.test.ts runs it in CI.
import * as fs from "node:fs"
import * as path from "node:path"
import ts from "typescript"

export const MAX_FILE_LINES = 600
export const MAX_FUNCTION_LINES = 150

const sourceFiles = (dir) =>
  fs.readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const p = path.join(dir, e.name)
    return e.isDirectory() ? sourceFiles(p) : e.name.endsWith(".ts") ? [p] : []
  })

const isFunction = (node) =>
  ts.isFunctionDeclaration(node) || ts.isFunctionExpression(node) || ts.isArrowFunction(node) ||
  ts.isMethodDeclaration(node) || ts.isConstructorDeclaration(node) || ts.isGetAccessor(node) ||
  ts.isSetAccessor(node)

/** The name a function is known by: its own, or the variable, property or call it is the argument of. */
const nameOf = (node, file) => {
  if (node.name !== undefined) return node.name.getText(file)
  let p = node.parent
  while (p !== undefined && !ts.isSourceFile(p)) {
    if ((ts.isVariableDeclaration(p) || ts.isPropertyAssignment(p) || ts.isPropertyDeclaration(p)) && p.name) {
      return p.name.getText(file)
    }
    p = p.parent
  }
  return "(anonymous)"
}

/** Every file and function of `root` over the bar, as `file:line name: N lines`. */
export const oversized = (root) => {
  const found = []
  for (const file of sourceFiles(root).sort()) {
    const text = fs.readFileSync(file, "utf8")
    const lines = text.split("\n").length - (text.endsWith("\n") ? 1 : 0)
    if (lines > MAX_FILE_LINES) found.push(`${file}: ${lines} lines (the bar is ${MAX_FILE_LINES})`)
    const source = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, true)
    const visit = (node) => {
      if (isFunction(node) && node.body !== undefined) {
        const start = source.getLineAndCharacterOfPosition(node.getStart(source)).line
        const end = source.getLineAndCharacterOfPosition(node.getEnd()).line
        const n = end - start + 1
        if (n > MAX_FUNCTION_LINES) {
          found.push(`${file}:${start + 1} ${nameOf(node, source)}: ${n} lines (the bar is ${MAX_FUNCTION_LINES})`)
        }
      }
      ts.forEachChild(node, visit)
    }
    visit(source)
  }
  return found
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const found = oversized(process.argv[2] ?? "src")
  for (const line of found) console.error(line)
  process.exit(found.length === 0 ? 0 : 1)
}
