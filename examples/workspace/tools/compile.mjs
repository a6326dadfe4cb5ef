// A stand-in compiler: strips comments and blank lines, and stamps the output.
import * as fs from "node:fs"
import * as path from "node:path"
const [from, to] = process.argv.slice(2)
const source = fs.readFileSync(from, "utf8")
const out = source.split("\n").filter((l) => l.trim() !== "" && !l.trim().startsWith("//")).join("\n")
fs.mkdirSync(path.dirname(to), { recursive: true })
fs.writeFileSync(to, `// compiled from ${from}\n${out}\n`)
console.log(`compiled ${from}`)
