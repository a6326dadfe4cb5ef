/**
 * Reads what a workspace says about itself, once: its member globs (`pnpm-workspace.yaml`'s `packages`, else the root
 * `package.json`'s `workspaces`), each member's `package.json` (name, version, scripts, dependencies), which
 * `node_modules` directories exist, what the `.gitignore` files ignore at the top of each package (`gitIgnore.ts`),
 * and the names of the files at the root. Synchronous plain code: the no-op check runs it too, before it loads
 * anything (see `programs/kiln/noop.ts`).
 *
 * @internal
 */
import * as fs from "node:fs"
import * as path from "node:path"
import { readSmallFile } from "../../../os/TextFile.js"
import * as GitIgnore from "./gitIgnore.js"
import { directoriesOf, globMatcher, globProblem } from "./packageGlobs.js"
import { readPackages } from "./pnpmWorkspaceYaml.js"

/** A problem with a workspace file: the file (relative to the workspace), the field, what is wrong. */
export interface Problem {
  readonly file: string
  readonly path: string
  readonly detail: string
}

/** One package of the workspace, as its `package.json` says. */
export interface Package {
  readonly name: string
  readonly version: string | undefined
  /** Relative to the workspace root; `""` for the root itself. */
  readonly directory: string
  readonly scripts: Readonly<Record<string, string>>
  /** Every entry of its dependencies, devDependencies, peerDependencies and optionalDependencies: name and spec. */
  readonly dependencies: ReadonlyArray<readonly [string, string]>
  /** Whether it has a `node_modules` directory with anything in it. */
  readonly nodeModules: boolean
  /**
   * The entries at the top of its directory that the workspace's `.gitignore` files ignore (`gitIgnore.ts`), sorted,
   * a directory's with a trailing `/`.
   */
  readonly ignored: ReadonlyArray<string>
}

/** The workspace's packages and the root's files, as read. */
export interface Workspace {
  /** Sorted by directory. */
  readonly packages: ReadonlyArray<Package>
  /** The names of the files (and symlinks) at the root, sorted. */
  readonly rootFiles: ReadonlyArray<string>
  /** Whether the root has a `node_modules` directory with anything in it. */
  readonly rootNodeModules: boolean
  /** The directory of the `node` that runs kiln: scripts run `node` from there unless it is on the default PATH. */
  readonly nodeDirectory: string
  /**
   * Whether the workspace's package manager runs a script's `pre` and `post` scripts around it: npm and yarn 1 do;
   * pnpm (since 7), yarn 2+ and bun do not.
   */
  readonly prePostScripts: boolean
}

export const isProblem = (u: unknown): u is Problem =>
  typeof u === "object" && u !== null && "detail" in u && "file" in u

const DEPENDENCY_FIELDS = ["dependencies", "devDependencies", "peerDependencies", "optionalDependencies"] as const

const isRecord = (u: unknown): u is Record<string, unknown> => typeof u === "object" && u !== null && !Array.isArray(u)

/** A `package.json` larger than this is refused: a real one is a few kilobytes, a root one with configs a few hundred. */
const LARGEST_PACKAGE_JSON = 4 * 1024 * 1024

/** A `pnpm-workspace.yaml` larger than this is refused (its catalogs make it a few kilobytes). */
const LARGEST_WORKSPACE_YAML = 1024 * 1024

/** A member glob longer than this is refused: a real one is a few dozen characters. */
const MAX_GLOB_LENGTH = 1000

const readJson = (root: string, file: string): unknown | Problem => {
  const read = readSmallFile(path.join(root, file), LARGEST_PACKAGE_JSON)
  if (read._tag === "Absent") return { file, path: "", detail: "cannot read: ENOENT" }
  if (read._tag === "Refused") return { file, path: "", detail: read.detail }
  const text = read.text
  try {
    return JSON.parse(text.replace(/^\uFEFF/, "")) as unknown
  } catch (e) {
    return { file, path: "", detail: `not valid JSON (${(e as Error).message})` }
  }
}

/**
 * Whether `dir` holds anything but package managers' bookkeeping (see `snapshotFilter.BOOKKEEPING`). A symbolic link
 * there is declared as it is, never listed: what it points at may be outside the workspace, and whether that is empty
 * is not the workspace's to say (the snapshot takes the link by its own rules).
 */
const hasModules = (dir: string): boolean => {
  try {
    const st = fs.lstatSync(dir)
    if (st.isSymbolicLink()) return true
    return st.isDirectory() && fs.readdirSync(dir).some((n) => !n.startsWith(".") || n === ".bin" || n === ".pnpm")
  } catch {
    return false
  }
}

/** The member globs and where they were written, or undefined when the workspace declares none (one package). */
const memberGlobs = (
  root: string,
  rootJson: Record<string, unknown>
): { readonly file: string; readonly field: string; readonly globs: ReadonlyArray<string> } | undefined | Problem => {
  const yamlFile = "pnpm-workspace.yaml"
  const read = readSmallFile(path.join(root, yamlFile), LARGEST_WORKSPACE_YAML)
  if (read._tag === "Refused") return { file: yamlFile, path: "", detail: read.detail }
  const yaml = read._tag === "Read" ? read.text : undefined
  if (yaml !== undefined) {
    const packages = readPackages(yaml)
    if (packages !== undefined && !Array.isArray(packages)) {
      const problem = packages as { line: number; detail: string }
      return { file: yamlFile, path: `line ${problem.line}`, detail: problem.detail }
    }
    // pnpm takes a workspace file without `packages` as the root package alone.
    return packages === undefined ? undefined : { file: yamlFile, field: "packages", globs: packages as Array<string> }
  }
  const ws = rootJson.workspaces
  if (ws === undefined) return undefined
  const [field, globs] = isRecord(ws) ? ["workspaces.packages", ws.packages] : ["workspaces", ws]
  if (!Array.isArray(globs) || !globs.every((g) => typeof g === "string")) {
    return {
      file: "package.json",
      path: field,
      detail: "must be a list of globs (or `{ \"packages\": [...] }`)"
    }
  }
  return { file: "package.json", field, globs }
}

/** One member's `package.json`, read. */
const readPackage = (root: string, directory: string, gitIgnore: GitIgnore.Reader): Package | Problem => {
  const file = directory === "" ? "package.json" : `${directory}/package.json`
  const json = readJson(root, file)
  if (isProblem(json)) return json
  if (!isRecord(json)) return { file, path: "", detail: "must be a JSON object" }
  if (typeof json.name !== "string" || json.name === "") {
    return { file, path: "name", detail: "a workspace package needs a name: its processes are named after it" }
  }
  // No prototype: a task named `constructor` or `toString` is a script the package has or has not, never Object's.
  const scripts: Record<string, string> = Object.create(null) as Record<string, string>
  if (json.scripts !== undefined) {
    if (!isRecord(json.scripts)) return { file, path: "scripts", detail: "must be an object of strings" }
    for (const [k, v] of Object.entries(json.scripts)) {
      if (typeof v !== "string") return { file, path: `scripts.${k}`, detail: "must be a string" }
      scripts[k] = v
    }
  }
  const dependencies: Array<readonly [string, string]> = []
  for (const field of DEPENDENCY_FIELDS) {
    const deps = json[field]
    if (deps === undefined) continue
    if (!isRecord(deps)) return { file, path: field, detail: "must be an object" }
    for (const [k, v] of Object.entries(deps)) if (typeof v === "string") dependencies.push([k, v])
  }
  return {
    name: json.name,
    version: typeof json.version === "string" ? json.version : undefined,
    directory,
    scripts,
    dependencies,
    nodeModules: hasModules(path.join(root, directory, "node_modules")),
    ignored: gitIgnore.ignoredIn(directory)
  }
}

/**
 * Whether the workspace's package manager runs `pre`/`post` scripts: by package.json's `packageManager` when it names
 * one, else by the lockfile or workspace file there is (npm's when there is none).
 */
const runsPrePost = (root: string, rootJson: Record<string, unknown>, rootFiles: ReadonlyArray<string>): boolean => {
  const declared = typeof rootJson.packageManager === "string"
    ? /^(npm|pnpm|yarn|bun)@(\d+)/.exec(rootJson.packageManager)
    : null
  if (declared !== null) return declared[1] === "npm" || (declared[1] === "yarn" && declared[2] === "1")
  const has = (f: string) => rootFiles.includes(f)
  if (has("pnpm-lock.yaml") || has("pnpm-workspace.yaml") || has("bun.lock") || has("bun.lockb")) return false
  if (has("yarn.lock")) {
    // yarn 1's lockfile says so in its header; yarn 2+ writes YAML with a `__metadata` entry. Only the header is read.
    let fd: number | undefined
    try {
      fd = fs.openSync(
        path.join(root, "yarn.lock"),
        fs.constants.O_RDONLY | fs.constants.O_NOFOLLOW | fs.constants.O_NONBLOCK
      )
      if (!fs.fstatSync(fd).isFile()) return false
      const head = Buffer.alloc(200)
      return head.toString("utf8", 0, fs.readSync(fd, head, 0, head.length, 0)).includes("yarn lockfile v1")
    } catch {
      return false
    } finally {
      if (fd !== undefined) fs.closeSync(fd)
    }
  }
  return true
}

/**
 * The workspace at `root`, or the first problem with its files. Without member globs, the root package is the only
 * package.
 */
export const read = (root: string, nodeDirectory: string = path.dirname(process.execPath)): Workspace | Problem => {
  const rootJson = readJson(root, "package.json")
  if (isProblem(rootJson)) {
    return { ...rootJson, detail: `${rootJson.detail}: tasks are the scripts of the workspace's packages` }
  }
  if (!isRecord(rootJson)) return { file: "package.json", path: "", detail: "must be a JSON object" }
  const members = memberGlobs(root, rootJson)
  if (isProblem(members)) return members
  let directories: Array<string>
  if (members === undefined) {
    directories = [""]
  } else {
    const found = new Set<string>()
    const excluded: Array<(dir: string) => boolean> = []
    for (const [i, glob] of members.globs.entries()) {
      const problem = glob.length > MAX_GLOB_LENGTH
        ? `is longer than ${MAX_GLOB_LENGTH} characters`
        : globProblem(glob.replace(/^!/, ""))
      if (problem !== undefined) {
        return {
          file: members.file,
          path: `${members.field}[${i}]`,
          detail: `${JSON.stringify(glob.slice(0, 80))} ${problem}`
        }
      }
      if (glob.startsWith("!")) {
        excluded.push(globMatcher(glob.slice(1)))
        continue
      }
      if (glob.startsWith("/") || glob.split("/").includes("..")) {
        return {
          file: members.file,
          path: `${members.field}[${i}]`,
          detail: `${JSON.stringify(glob)} leaves the workspace`
        }
      }
      const dirs = directoriesOf(root, glob)
      if (dirs.length === 0) {
        return {
          file: members.file,
          path: `${members.field}[${i}]`,
          detail: `${JSON.stringify(glob)} matches no package (no directory with a package.json)`
        }
      }
      for (const d of dirs) found.add(d)
    }
    directories = [...found].filter((d) => !excluded.some((x) => x(d))).sort()
  }
  const packages: Array<Package> = []
  const gitIgnore = new GitIgnore.Reader(root)
  for (const d of directories) {
    const p = readPackage(root, d, gitIgnore)
    if (isProblem(p)) return p
    packages.push(p)
  }
  let rootFiles: Array<string>
  try {
    rootFiles = fs.readdirSync(root, { withFileTypes: true }).filter((e) => !e.isDirectory()).map((e) => e.name).sort()
  } catch (e) {
    return { file: ".", path: "", detail: `cannot read: ${(e as NodeJS.ErrnoException).code ?? String(e)}` }
  }
  return {
    packages,
    rootFiles,
    rootNodeModules: hasModules(path.join(root, "node_modules")),
    nodeDirectory,
    prePostScripts: runsPrePost(root, rootJson, rootFiles)
  }
}
