/**
 * `gc` and `check` of the shared trees (see `sharedTrees.ts` for their layout): a tree goes when no live process
 * uses it and its lease has ended or its digest has left the store; a dead writer's temp directory goes; `check`
 * hashes every tree against its name.
 *
 * @internal
 */
import * as fs from "node:fs"
import * as path from "node:path"
import * as Digest from "../../../domain/Digest.js"
import * as Directory from "../../../domain/Directory.js"
import { errnoOf } from "../../../os/Errno.js"
import { sha256Hex } from "../../../os/LazyCrypto.js"
import * as Proc from "../../../os/Proc.js"
import { removeTree } from "../../../os/RemoveTree.js"
import { readMade, rootOf } from "./sharedTrees.js"

const HASH = /^[0-9a-f]{64}$/
/** `.tmp-<pid>-<start>-<random>` and `.made-.tmp-…`: what a writer leaves until it renames. */
const TEMP = /^(?:\.made-)?\.tmp-(\d+)-(\d*)-[0-9a-f]+$/

const list = (dir: string): Array<fs.Dirent> => {
  try {
    return fs.readdirSync(dir, { withFileTypes: true })
  } catch (e) {
    if (errnoOf(e) === "ENOENT") return []
    throw e
  }
}

const unlinkIfThere = (p: string) => {
  try {
    fs.unlinkSync(p)
  } catch (e) {
    if (errnoOf(e) !== "ENOENT") throw e
  }
}

/** The trees live processes use; the record of a dead one is removed. */
const inUse = (root: string): Set<string> => {
  const used = new Set<string>()
  const users = path.join(root, ".users")
  for (const entry of list(users)) {
    const m = /^(\d+)-(\d*)$/.exec(entry.name)
    const file = path.join(users, entry.name)
    if (m === null || !Proc.ownerAlive({ pid: Number(m[1]), startTime: m[2]! })) {
      unlinkIfThere(file)
      continue
    }
    try {
      for (const line of fs.readFileSync(file, "utf8").split("\n")) if (HASH.test(line)) used.add(line)
    } catch (e) {
      if (errnoOf(e) !== "ENOENT") throw e
    }
  }
  return used
}

/** @internal */
export interface TreesCollected {
  readonly removed: number
  readonly inUse: number
  readonly tempsRemoved: number
}

/**
 * Removes the trees nobody alive uses whose lease has ended or whose root directory `present` no longer finds, and
 * the temp directories of dead writers.
 *
 * @internal
 */
export const collect = (
  storeRoot: string,
  now: number,
  present: (digest: Digest.Digest) => boolean
): TreesCollected => {
  const root = rootOf(storeRoot)
  let removed = 0
  let tempsRemoved = 0
  let used = inUse(root)
  for (const entry of list(root)) {
    const p = path.join(root, entry.name)
    const temp = TEMP.exec(entry.name)
    if (temp !== null) {
      if (Proc.ownerAlive({ pid: Number(temp[1]), startTime: temp[2]! })) continue
      if (entry.isDirectory()) removeTree(p)
      else unlinkIfThere(p)
      tempsRemoved++
      continue
    }
    if (!HASH.test(entry.name) || !entry.isDirectory() || used.has(entry.name)) continue
    const made = readMade(path.join(root, `${entry.name}.made`))
    const leased = fs.statSync(p).mtimeMs > now
    if (leased && made !== undefined && present({ hash: entry.name, sizeBytes: made.sizeBytes })) continue
    // A process may have started to use it since the list was read: read it again, just before the removal.
    used = inUse(root)
    if (used.has(entry.name)) continue
    unlinkIfThere(path.join(root, `${entry.name}.made`))
    removeTree(p)
    removed++
  }
  for (const entry of list(root)) {
    const m = /^([0-9a-f]{64})\.made$/.exec(entry.name)
    if (m !== null && !fs.existsSync(path.join(root, m[1]!))) unlinkIfThere(path.join(root, entry.name))
  }
  return { removed, inUse: used.size, tempsRemoved }
}

/** The REAPI digest of the tree on disk at `dir`: files by content and executable bit, symlinks by target. */
const digestOnDisk = (dir: string): Digest.Digest => {
  const files: Array<Directory.FileNode> = []
  const directories: Array<Directory.DirectoryNode> = []
  const symlinks: Array<Directory.SymlinkNode> = []
  for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
    const p = path.join(dir, entry.name)
    if (entry.isDirectory()) directories.push({ name: entry.name, digest: digestOnDisk(p) })
    else if (entry.isSymbolicLink()) symlinks.push({ name: entry.name, target: fs.readlinkSync(p) })
    else if (entry.isFile()) {
      const bytes = fs.readFileSync(p)
      const hash = sha256Hex(bytes)
      const isExecutable = (fs.lstatSync(p).mode & 0o111) !== 0
      files.push({ name: entry.name, digest: { hash, sizeBytes: bytes.length }, isExecutable })
    } else throw new Error(`${p} is not a file, directory or symlink`)
  }
  const made = Directory.make({ files, directories, symlinks })
  if (made._tag === "Left") throw new Error(`${dir}: ${made.left.reason}`)
  return Directory.digestOf(made.right)
}

/** @internal */
export interface TreeProblem {
  readonly key: string
  readonly problem: string
}

/**
 * Hashes every shared tree against its name (and its record's size); with `repair`, removes the bad ones.
 *
 * @internal
 */
export const check = (
  storeRoot: string,
  repair: boolean
): { readonly checked: number; readonly problems: Array<TreeProblem>; readonly repaired: number } => {
  const root = rootOf(storeRoot)
  const problems: Array<TreeProblem> = []
  let checked = 0
  let repaired = 0
  for (const entry of list(root)) {
    if (!HASH.test(entry.name) || !entry.isDirectory()) continue
    checked++
    const p = path.join(root, entry.name)
    const made = readMade(path.join(root, `${entry.name}.made`))
    let problem: string | undefined
    if (made === undefined) problem = "it has no record of being completed"
    else {
      try {
        const actual = digestOnDisk(p)
        if (actual.hash !== entry.name || actual.sizeBytes !== made.sizeBytes) {
          problem = `its files hash to ${Digest.format(actual)}`
        }
      } catch (e) {
        problem = `it cannot be read: ${(e as Error).message}`
      }
    }
    if (problem === undefined) continue
    problems.push({ key: entry.name, problem })
    if (repair) {
      unlinkIfThere(path.join(root, `${entry.name}.made`))
      removeTree(p)
      repaired++
    }
  }
  return { checked, problems, repaired }
}
