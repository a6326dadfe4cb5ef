/**
 * The directories one write-back writes into, each made sure of once to be a real directory: `lstat`ed, never
 * followed. A write through a symlink lands wherever the link points (`mkdir -p` follows them, and so does every
 * path a write or a listing is given), so nothing is written, made, listed or removed under a directory until it is
 * known to be one.
 *
 * Where the output tree has a directory and the workspace a symlink or a file (a tool's convenience link, a
 * committed `out -> ../build`, an earlier result), that entry is replaced by a real directory: only the link itself
 * is removed, as for any output the result replaces. Above the output tree (the process's working directory) the
 * workspace is the user's: a symlink there is refused, naming it, and nothing is written.
 *
 * @internal
 */
import * as fs from "node:fs"
import * as path from "node:path"
import { InvalidOutput } from "../../../domain/TreeErrors.js"
import { errnoOf } from "../../../os/Errno.js"
import { mkdirp } from "../../../os/Mkdirp.js"

/** @internal */
export interface OutputDirs {
  /** Makes `rel` (relative to the working directory) a real directory, and each above it; `output` names the error. */
  readonly ensure: (rel: string, output: string) => void
  /** Whether `rel` was made sure of. */
  readonly isReal: (rel: string) => boolean
  /**
   * Whether this write-back made `rel` itself (nothing was there): then nothing is in it but what it writes there
   * (the workspace lock keeps other kilns out), so a path in it need not be looked at before it is written.
   */
  readonly madeHere: (rel: string) => boolean
  /** Forgets that `rel` is real (it turned out gone): the next `ensure` looks again. */
  readonly forget: (rel: string) => void
}

/** The path above `rel` ("" for a name at the top). @internal */
export const parentOf = (rel: string): string => {
  const slash = rel.lastIndexOf("/")
  return slash === -1 ? "" : rel.slice(0, slash)
}

const kindOf = (st: fs.Stats) => st.isSymbolicLink() ? "a symlink" : st.isFile() ? "a file" : "not a directory"

/**
 * The directories under `workspace`/`workingDirectory` that a write-back of an output tree may write into;
 * `treeDirectories` are the tree's own directories (relative to the working directory), which replace what is there.
 *
 * @internal
 */
export const make = (
  workspace: string,
  workingDirectory: string,
  treeDirectories: ReadonlySet<string>
): OutputDirs => {
  const base = path.join(workspace, workingDirectory)
  const real = new Set<string>()
  const made = new Set<string>()

  /** Makes `abs` a directory if nothing is there; its stat otherwise (undefined: made). */
  const mkdirOrStat = (abs: string): fs.Stats | undefined => {
    const st = fs.lstatSync(abs, { throwIfNoEntry: false })
    if (st !== undefined) return st
    try {
      fs.mkdirSync(abs)
      return undefined
    } catch (e) {
      // Its parent is real (made sure of first), so only a workspace that is not there yet lacks one: made.
      if (errnoOf(e) === "ENOENT" && !fs.existsSync(workspace)) {
        mkdirp(workspace)
        return mkdirOrStat(abs)
      }
      if (errnoOf(e) !== "EEXIST") throw e
      return fs.lstatSync(abs)
    }
  }

  /** The working directory, from the workspace down: the user's, so a symlink there is refused. */
  const ensureBase = (output: string) => {
    let rel = ""
    for (const name of workingDirectory.split("/").filter((n) => n !== "" && n !== ".")) {
      rel = rel === "" ? name : `${rel}/${name}`
      const st = mkdirOrStat(path.join(workspace, rel))
      if (st !== undefined && !st.isDirectory()) {
        throw new InvalidOutput({
          output,
          problem: `is written under \`${rel}\`, which is ${kindOf(st)} in the workspace: kiln writes outputs ` +
            "only into real directories"
        })
      }
    }
    real.add("")
  }

  const ensureOne = (rel: string, output: string) => {
    const abs = path.join(base, rel)
    const st = mkdirOrStat(abs)
    if (st !== undefined && !st.isDirectory()) {
      if (!treeDirectories.has(rel)) {
        throw new InvalidOutput({
          output,
          problem: `is written under \`${rel}\`, which is ${kindOf(st)}: kiln writes outputs only into real directories`
        })
      }
      fs.unlinkSync(abs)
      fs.mkdirSync(abs)
    }
    if (st === undefined) made.add(rel)
    else made.delete(rel)
    real.add(rel)
  }

  return {
    ensure: (rel, output) => {
      if (real.has(rel)) return
      if (!real.has("")) ensureBase(output)
      const chain: Array<string> = []
      for (let r = rel; !real.has(r); r = parentOf(r)) chain.push(r)
      for (let i = chain.length - 1; i >= 0; i--) ensureOne(chain[i]!, output)
    },
    isReal: (rel) => real.has(rel),
    madeHere: (rel) => made.has(rel),
    forget: (rel) => {
      real.delete(rel)
      made.delete(rel)
      // The top gone too (or never there): a workspace is made, as a directory of the output is.
      if (rel === "" && !fs.existsSync(base)) {
        real.clear()
        made.clear()
        if (!fs.existsSync(workspace)) mkdirp(workspace)
      }
    }
  }
}
