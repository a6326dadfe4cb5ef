/**
 * The peers benchmark's workspaces: N tasks, task `p<i>` in `packages/p<i>/` with 5 small source files under `src/`
 * and one output beside them, described to all three tools at once: `kiln.json`; a bun workspace for Turborepo (a
 * root package.json with `packageManager: "bun@…"`, turbo.json, a package.json per task); a Bazel workspace
 * (WORKSPACE, a BUILD.bazel per task, one genrule each). Every tool gets its own copy of the same bytes, so that
 * their outputs, caches and convenience symlinks never meet, and every tool runs the same command in the task's
 * package directory (Bazel: the same pipeline, with its own paths for the same files).
 */
import * as fs from "node:fs"
import * as path from "node:path"
import { DIAMOND_WIDTH, type Shape } from "../kiln.js"
import { rm } from "../report.js"

export const BUN_VERSION = "1.4.4"
const PATH = "/usr/bin:/bin"

/** hash: `cat` of the sources and the deps' outputs into `sha256sum`; esbuild: a minified bundle of the sources. */
export type Kind = "hash" | "esbuild"

/** A workspace to measure. */
export interface Case {
  /** `wide500`: what `--only` names. */
  readonly key: string
  /** `wide 500`: what the report says. */
  readonly label: string
  readonly shape: Shape
  readonly n: number
  readonly kind: Kind
}

export const caseOf = (shape: Shape, n: number, kind: Kind = "hash"): Case => {
  const name = kind === "esbuild" ? "esbuild" : shape
  return { key: `${name}${n}`, label: `${name} ${n.toLocaleString("en-US")}`, shape, n, kind }
}

export interface Task {
  readonly name: string
  readonly deps: ReadonlyArray<string>
  /** `packages/p<i>`, relative to the workspace root. */
  readonly dir: string
  /** The task's output, relative to its package directory. */
  readonly output: string
  /** The shell command every tool runs, in the package directory (kiln and Turborepo verbatim). */
  readonly command: string
}

export interface PeerWorkspace {
  readonly case: Case
  /** What every source file's contents start with: the workspace's own, so that no two workspaces share a result. */
  readonly salt: string
  readonly tasks: ReadonlyArray<Task>
  /** The task nothing depends on whose source an edit changes: the last one. */
  readonly leaf: Task
  /** The esbuild binary, by absolute path: the same for every tool, outside every workspace. */
  readonly esbuild: string
}

/** wide: no deps; chain: each on the one before; diamond: layers of 1 and {@link DIAMOND_WIDTH}, alternating. */
const depsOf = (shape: Shape, n: number): Array<Array<number>> => {
  if (shape === "wide") return Array.from({ length: n }, () => [])
  if (shape === "chain") return Array.from({ length: n }, (_, i) => (i === 0 ? [] : [i - 1]))
  const deps: Array<Array<number>> = []
  let previous: Array<number> = []
  let wideLayer = false
  while (deps.length < n) {
    const layer: Array<number> = []
    for (let k = 0; k < Math.min(wideLayer ? DIAMOND_WIDTH : 1, n - deps.length); k++) {
      layer.push(deps.length)
      deps.push(previous)
    }
    previous = layer
    wideLayer = !wideLayer
  }
  return deps
}

const HASH_SOURCES = ["f0.txt", "f1.txt", "f2.txt", "f3.txt", "f4.txt"]
const ESBUILD_MODULES = ["a", "b", "c", "d"]
const ESBUILD_SOURCES = ["index.js", ...ESBUILD_MODULES.map((m) => `${m}.js`)]

export const sourcesOf = (kind: Kind): ReadonlyArray<string> => (kind === "hash" ? HASH_SOURCES : ESBUILD_SOURCES)

/**
 * `--minify`: a bundle's comments name each module's path relative to the working directory, which is the package
 * directory for kiln and Turborepo and Bazel's execroot for Bazel; minified, the bundle is the same bytes for all.
 */
const esbuildArgs = (esbuild: string, entry: string, outfile: string) =>
  `${esbuild} --bundle --minify --log-level=warning ${entry} --outfile=${outfile}`

export const planOf = (c: Case, esbuild: string): PeerWorkspace => {
  const tasks = depsOf(c.shape, c.n).map((deps, i): Task => {
    const name = `p${i}`
    const depNames = deps.map((d) => `p${d}`)
    if (c.kind === "esbuild") {
      return {
        name,
        deps: depNames,
        dir: `packages/${name}`,
        output: "bundle.js",
        command: esbuildArgs(esbuild, "src/index.js", "bundle.js")
      }
    }
    const files = [...HASH_SOURCES.map((f) => `src/${f}`), ...depNames.map((d) => `../${d}/hash.txt`)]
    return {
      name,
      deps: depNames,
      dir: `packages/${name}`,
      output: "hash.txt",
      command: `cat ${files.join(" ")} | sha256sum > hash.txt`
    }
  })
  return { case: c, salt: `peers ${c.key}`, tasks, leaf: tasks[tasks.length - 1]!, esbuild }
}

// ---------------------------------------------------------------------------------------------------------------
// Sources

const esbuildSource = (file: string, salt: string, task: string, edit?: number): string => {
  if (file === "index.js") {
    return [
      ...ESBUILD_MODULES.map((m) => `import { ${m} } from "./${m}.js"`),
      `console.log([${ESBUILD_MODULES.map((m) => `${m}()`).join(", ")}].join(" "))`,
      ""
    ].join("\n")
  }
  const m = file.slice(0, -3)
  const text = `${salt} ${task} ${m}${edit === undefined ? "" : ` edit ${edit}`}`
  return `export const ${m} = () => ${JSON.stringify(text)}\n`
}

const sourceText = (kind: Kind, file: string, salt: string, task: string, edit?: number): string =>
  kind === "esbuild"
    ? esbuildSource(file, salt, task, edit)
    : `${salt} ${task} ${file}${edit === undefined ? "" : ` edit ${edit}`}\n`

/** The leaf's source file an edit rewrites: the last one (for esbuild a module whose string the bundle prints). */
export const leafFile = (ws: PeerWorkspace): string => {
  const sources = sourcesOf(ws.case.kind)
  return `${ws.leaf.dir}/src/${sources[sources.length - 1]}`
}

/** Rewrites the leaf's source file with contents of edit number `k`: the same bytes in every tool's copy. */
export const editLeaf = (ws: PeerWorkspace, root: string, k: number): void => {
  const sources = sourcesOf(ws.case.kind)
  const text = sourceText(ws.case.kind, sources[sources.length - 1]!, ws.salt, ws.leaf.name, k)
  fs.writeFileSync(path.join(root, leafFile(ws)), text)
}

// ---------------------------------------------------------------------------------------------------------------
// The three tools' descriptions

const kilnJson = (ws: PeerWorkspace): string => {
  const processes: Record<string, unknown> = {}
  for (const t of ws.tasks) {
    processes[t.name] = {
      // bash, as Turborepo's script runner (bun) and Bazel's genrule run their commands.
      argv: ["/bin/bash", "-c", t.command],
      workingDirectory: t.dir,
      inputs: [`${t.dir}/src/**`],
      ...(t.deps.length > 0 ? { deps: t.deps } : {}),
      outputs: [t.output],
      env: { PATH },
      // The strict sandbox shows a process only what it declares: the esbuild binary is outside the workspace.
      ...(ws.case.kind === "esbuild" ? { hostPaths: [path.dirname(ws.esbuild)] } : {})
    }
  }
  return JSON.stringify({ processes }, null, 1)
}

const rootPackageJson = () =>
  JSON.stringify(
    { name: "peers-workspace", private: true, packageManager: `bun@${BUN_VERSION}`, workspaces: ["packages/*"] },
    null,
    1
  )

const turboJson = (ws: PeerWorkspace) =>
  JSON.stringify(
    {
      $schema: "https://turborepo.com/schema.json",
      tasks: { build: { dependsOn: ["^build"], inputs: ["src/**"], outputs: [ws.tasks[0]!.output] } }
    },
    null,
    1
  )

const packageJson = (t: Task) =>
  JSON.stringify(
    {
      name: t.name,
      private: true,
      scripts: { build: t.command },
      ...(t.deps.length > 0 ? { dependencies: Object.fromEntries(t.deps.map((d) => [d, "workspace:*"])) } : {})
    },
    null,
    1
  )

const starlark = (s: string) => JSON.stringify(s)

/**
 * One genrule: the same pipeline on the same files, in the same order (`$(SRCS)` keeps the order of `srcs`: the
 * sources, then the deps' outputs).
 */
const buildFile = (ws: PeerWorkspace, t: Task) => {
  const sources = sourcesOf(ws.case.kind).map((f) => `src/${f}`)
  const srcs = [...sources, ...t.deps.map((d) => `//packages/${d}`)]
  const cmd = ws.case.kind === "esbuild"
    ? esbuildArgs(ws.esbuild, "$(location src/index.js)", "$@")
    : "cat $(SRCS) | sha256sum > $@"
  return [
    `package(default_visibility = ["//visibility:public"])`,
    "",
    "genrule(",
    `    name = ${starlark(t.name)},`,
    `    srcs = [${srcs.map(starlark).join(", ")}],`,
    `    outs = [${starlark(t.output)}],`,
    `    cmd = ${starlark(cmd)},`,
    ")",
    ""
  ].join("\n")
}

/** Writes the workspace into `root`: the sources and every tool's description of the tasks. */
export const writeCopy = (ws: PeerWorkspace, root: string): void => {
  fs.mkdirSync(root, { recursive: true })
  fs.writeFileSync(path.join(root, "kiln.json"), kilnJson(ws))
  fs.writeFileSync(path.join(root, "package.json"), rootPackageJson())
  fs.writeFileSync(path.join(root, "turbo.json"), turboJson(ws))
  fs.writeFileSync(path.join(root, "WORKSPACE"), `workspace(name = "peers")\n`)
  for (const t of ws.tasks) {
    const dir = path.join(root, t.dir)
    fs.mkdirSync(path.join(dir, "src"), { recursive: true })
    for (const f of sourcesOf(ws.case.kind)) {
      fs.writeFileSync(path.join(dir, "src", f), sourceText(ws.case.kind, f, ws.salt, t.name))
    }
    fs.writeFileSync(path.join(dir, "package.json"), packageJson(t))
    fs.writeFileSync(path.join(dir, "BUILD.bazel"), buildFile(ws, t))
  }
}

/** Removes every task's output from the copy at `root` (kiln's and Turborepo's: Bazel's are in its output base). */
export const removeOutputs = (ws: PeerWorkspace, root: string): void => {
  for (const t of ws.tasks) fs.rmSync(path.join(root, t.dir, t.output), { force: true })
}

/** How a tool that keeps its cache in `cache` goes cold (cache and outputs gone) or loses only its outputs. */
export const resets = (ws: PeerWorkspace, root: string, cache: string) => ({
  toCold: () => {
    rm(cache)
    removeOutputs(ws, root)
    return Promise.resolve()
  },
  dropOutputs: () => Promise.resolve(removeOutputs(ws, root))
})
