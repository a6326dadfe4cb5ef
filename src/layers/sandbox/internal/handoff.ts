/**
 * Output files handed from a finished sandbox to write-back by rename, not copy. Creating a file was most of what
 * writing an output back cost: on a file system a build has churned, ext4 is slow to find a free inode for each new
 * file, on the engine's one thread, where a rename allocates none (docs/bench-log.md has the profile). Bazel moves its
 * outputs out of the sandbox for the same reason.
 *
 * A runner offers the small files it captured, moving them, before their sandbox is refilled or removed, into a
 * directory of this engine's beside the sandboxes (named like one, so that sweeps and the post-mortem of a killed
 * engine take it too). Write-back takes one holding the bytes it needs, renamed next to its target, and keeps it only
 * if it still is what a fresh write would have made: a regular file of one link, those very bytes (hashed again: a
 * straggler of the process that escaped its group could have written to it), owned as a new file there would be. Its
 * mode is set as a write's would be (under the umask). Anything else, and any error, is a miss: the caller writes
 * the bytes from the store as before. What nobody takes goes when the scope closes.
 *
 * @internal
 */
import * as fs from "node:fs"
import * as path from "node:path"
import type * as Digest from "../../../domain/Digest.js"
import { sha256Hex } from "../../../os/LazyCrypto.js"
import { LARGE_FILE_BYTES } from "../../store/Store.js"
import type { Handoff } from "../Sandboxes.js"
import * as SandboxDir from "./sandboxDir.js"

export type { Handoff }

/** Files held at most: a runner used without write-back (a library's) offers files nobody takes. */
const MAX_HELD = 4096

/** @internal */
export interface Owned extends Handoff {
  /** Where offered files wait, once one has been. */
  readonly directory: () => string | undefined
  /** Removes what nobody took, and the directory; throws what stopped it. */
  readonly close: () => void
}

/** @internal */
export const make = (root: string, owner: SandboxDir.Owner): Owned => {
  let dir: string | undefined
  let broken = false
  let next = 0
  const byHash = new Map<string, Array<string>>()
  let held = 0
  const uid = process.geteuid?.()
  const egid = process.getegid?.()

  const offer = (abs: string, digest: Digest.Digest): void => {
    if (broken || held >= MAX_HELD || digest.sizeBytes >= LARGE_FILE_BYTES) return
    try {
      dir ??= SandboxDir.create(root, owner)
    } catch {
      broken = true
      return
    }
    const staged = path.join(dir, (next++).toString(36))
    try {
      fs.renameSync(abs, staged)
    } catch {
      return
    }
    const list = byHash.get(digest.hash)
    if (list === undefined) byHash.set(digest.hash, [staged])
    else list.push(staged)
    held++
  }

  /** Whether the file open as `fd` at `dest` is what writing `digest` there with `mode` would have made. */
  const fit = (fd: number, dest: string, digest: Digest.Digest, mode: number): boolean => {
    const st = fs.fstatSync(fd)
    if (!st.isFile() || st.nlink !== 1 || st.size !== digest.sizeBytes) return false
    if (uid !== undefined && st.uid !== uid) return false
    const parent = fs.statSync(path.dirname(dest))
    const gid = (parent.mode & 0o2000) !== 0 ? parent.gid : egid
    if (gid !== undefined && st.gid !== gid) fs.fchownSync(fd, st.uid, gid)
    if (sha256Hex(fs.readFileSync(fd)) !== digest.hash) return false
    fs.fchmodSync(fd, mode & ~process.umask())
    return true
  }

  const take = (digest: Digest.Digest, dest: string, mode: number): boolean => {
    const list = byHash.get(digest.hash)
    const staged = list?.pop()
    if (staged === undefined) return false
    if (list!.length === 0) byHash.delete(digest.hash)
    held--
    try {
      fs.renameSync(staged, dest)
    } catch {
      fs.rmSync(staged, { force: true })
      return false
    }
    let kept = false
    try {
      const fd = fs.openSync(dest, fs.constants.O_RDONLY | fs.constants.O_NOFOLLOW)
      try {
        kept = fit(fd, dest, digest, mode)
      } finally {
        fs.closeSync(fd)
      }
    } catch {
      kept = false
    }
    if (!kept) fs.rmSync(dest, { force: true })
    return kept
  }

  const close = () => {
    byHash.clear()
    held = 0
    if (dir !== undefined) SandboxDir.removeOwn(dir)
    dir = undefined
  }

  return { offer, take, held: () => held, directory: () => dir, close }
}
