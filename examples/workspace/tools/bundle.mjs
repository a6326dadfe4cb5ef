// Concatenates modules into one file (imports between them are dropped: they all end up in one scope).
import * as fs from "node:fs"
import * as path from "node:path"
const [to, ...from] = process.argv.slice(2)
const body = from.map((f) => fs.readFileSync(f, "utf8").replace(/^import .*$/gm, "").replace(/^export /gm, "")).join(
  "\n"
)
fs.mkdirSync(path.dirname(to), { recursive: true })
fs.writeFileSync(to, `${body}\nconsole.log(main())\n`)
console.log(`bundled ${from.length} modules into ${to}`)
