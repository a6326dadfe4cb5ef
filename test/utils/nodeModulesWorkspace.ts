/**
 * A small workspace whose one process reads a `node_modules` of 40 files (a directory taken whole, with its saved
 * walk) and a source file: the tests of what kiln keeps of such a directory between runs share it.
 */
export const READS_NODE_MODULES = {
  processes: {
    read: {
      argv: ["/bin/sh", "-c", "cat node_modules/p1/f5.js src/a.txt > out.txt"],
      inputs: ["node_modules/**", "src/**"],
      outputs: ["out.txt"],
      env: { PATH: "/usr/bin:/bin" }
    }
  }
}

/** Its files: kiln.json, `src/a.txt` holding `source`, and `node_modules/p<i % 4>/f<i>.js` holding `<i>`. */
export const nodeModulesWorkspace = (source: string): Record<string, string> => {
  const files: Record<string, string> = { "src/a.txt": source, "kiln.json": JSON.stringify(READS_NODE_MODULES) }
  for (let i = 0; i < 40; i++) files[`node_modules/p${i % 4}/f${i}.js`] = `${i}\n`
  return files
}
