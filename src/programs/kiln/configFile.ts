/**
 * Which kiln.json a command reads: the one `--config` names, else the nearest from the working directory up, as git
 * finds its repository (and turbo and Bazel their workspace's root): kiln works from any directory of the workspace.
 * The workspace is the directory that holds it, and every path of kiln.json stays relative to it.
 *
 * Plain code without Effect: the no-op check finds the config with it before anything else is loaded.
 */
import * as fs from "node:fs"
import * as path from "node:path"
import { readSmallFile } from "../../os/TextFile.js"

/** The name kiln looks for. */
export const CONFIG_NAME = "kiln.json"

/** Where the README says what kiln.json is, for a user who has none. */
export const README_SECTION = "README.md#kiln-run-and-kilnjson"

/** What a command says when there is no kiln.json to read. */
export const notFound = (cwd: string) =>
  `no ${CONFIG_NAME} in ${cwd} or above: see ${README_SECTION} (or name one with --config FILE)`

/**
 * The configs {@link find} found by walking up rather than by name: {@link readText} reads one only if its user (or
 * root) owns it.
 */
const foundByWalking = new Set<string>()

/**
 * The config file: `given` (resolved against `cwd`) when there is one, else the nearest `kiln.json` in `cwd` or a
 * directory above it; undefined when there is none up to the root.
 */
export const find = (given: string | undefined, cwd: string = process.cwd()): string | undefined => {
  if (given !== undefined) {
    // Named, it is read whoever owns it, though an earlier walk of this process (a standby's last run) found it.
    const named = path.resolve(cwd, given)
    foundByWalking.delete(named)
    return named
  }
  for (let dir = path.resolve(cwd);; dir = path.dirname(dir)) {
    const candidate = path.join(dir, CONFIG_NAME)
    // A directory named kiln.json is not a config: the walk goes on past it, as git's does past a `.git` file it cannot
    // use. Anything else there is this directory's config, read or refused as it is (a FIFO is not passed over to a
    // kiln.json further up).
    const found = fs.lstatSync(candidate, { throwIfNoEntry: false })
    if (found !== undefined && !found.isDirectory()) {
      foundByWalking.add(candidate)
      return candidate
    }
    if (path.dirname(dir) === dir) return undefined
  }
}

/**
 * Why a kiln.json found by walking up is not read: its owner (or, for a symlink, the link's) is another user than
 * this process's and not root. A kiln.json another user put in a shared directory above one's own (`/tmp`, a
 * team's checkout root) would otherwise run its processes, with its `hostPaths`, network and remote, as this user,
 * from any directory below it: git refuses another user's repository for the same reason (`safe.directory`).
 */
const ownerProblem = (file: string, real: string): string | undefined => {
  const me = process.geteuid?.()
  if (me === undefined) return undefined
  for (const at of new Set([file, real])) {
    const owner = fs.lstatSync(at).uid
    if (owner !== me && owner !== 0) {
      return `is owned by another user (uid ${owner}) and was found by looking up from the working directory: kiln ` +
        "reads another user's config only when it is named (--config)"
    }
  }
  return undefined
}

/** A kiln.json larger than this is refused: a generated one for a large monorepo is a few hundred kilobytes. */
const LARGEST_CONFIG = 16 * 1024 * 1024

/**
 * The config file's text, or why it cannot be read. A symlink is followed only to a file in its own directory or
 * below (a config kept in `config/kiln.json` and linked from the root): one committed to point anywhere else (a file
 * outside the workspace, `/proc/self/environ`) would have kiln quote that file's lines in its errors, into a CI log.
 * Only a regular file is read, and none larger than {@link LARGEST_CONFIG}: a FIFO or a device is refused at once.
 */
export const readText = (file: string): { readonly text: string } | { readonly problem: string } => {
  let target = file
  try {
    if (fs.lstatSync(file).isSymbolicLink()) {
      const real = fs.realpathSync(file)
      const home = fs.realpathSync(path.dirname(file))
      if (!real.startsWith(`${home}/`)) {
        return { problem: `is a symlink to ${real}, outside its directory: kiln follows one only within it` }
      }
      target = real
    }
  } catch (e) {
    return { problem: `cannot read: ${(e as NodeJS.ErrnoException).code ?? String(e)}` }
  }
  try {
    const foreign = foundByWalking.has(file) ? ownerProblem(file, target) : undefined
    if (foreign !== undefined) return { problem: foreign }
  } catch (e) {
    return { problem: `cannot read: ${(e as NodeJS.ErrnoException).code ?? String(e)}` }
  }
  const read = readSmallFile(target, LARGEST_CONFIG)
  return read._tag === "Read"
    ? { text: read.text }
    : { problem: read._tag === "Absent" ? "cannot read: ENOENT" : read.detail }
}
