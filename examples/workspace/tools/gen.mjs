// Generates a module from config.json.
import * as fs from "node:fs"
import * as path from "node:path"
const [from, to] = process.argv.slice(2)
const config = JSON.parse(fs.readFileSync(from, "utf8"))
fs.mkdirSync(path.dirname(to), { recursive: true })
fs.writeFileSync(to, `export const config = ${JSON.stringify(config)}\n`)
console.log(`generated ${to}`)
