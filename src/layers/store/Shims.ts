/**
 * Package managers' `.bin` shims, made path-independent (issue #36). pnpm writes each command of `node_modules/.bin`
 * (and of every `node_modules/.bin` inside its `.pnpm`) as a shell script that exports a `NODE_PATH` naming the
 * checkout's absolute path. As the workspace holds them, two clones (or CI) never share a key, and a process that
 * runs one gets a `NODE_PATH` into the real workspace, outside its sandbox.
 *
 * A snapshot of a workspace therefore takes such a shim as it would read at {@link EXEC_ROOT}, the path every process
 * sees its sandbox at: every `<workspace>/` in it is `/mnt/`. Its digest is then the same in every checkout, and the
 * bytes the sandbox gets from the store are right for a process there: its `NODE_PATH` names its own sandbox. Where a
 * tree is mounted from the workspace as it is, its `.bin` directories are mounted from the store over it (see
 * `runner/internal/sharedInputs.ts`). Where this machine cannot show a sandbox at `/mnt` (`KILN_MOUNT_NAMESPACES=0`),
 * the shims say `/mnt` all the same, so that a tree has one digest everywhere: `NODE_PATH` then names directories
 * the process does not have, which Node skips, and the shim still runs its command, found relative to itself.
 *
 * npm's and yarn's `.bin` entries are symlinks, which hold no path of the checkout: left as they are.
 *
 * Plain code without Effect: the run memo's check reads files through it before the engine loads.
 *
 * @since 0.1.0
 */
import * as fs from "node:fs"
import * as path from "node:path"
import { EXEC_ROOT } from "../../os/MountNamespace.js"

/** What a shim's workspace path becomes. */
export { EXEC_ROOT }

/** A shim is a short script: a larger file in `.bin` is taken as it is. pnpm's are under 2 KiB. */
export const MAX_BYTES = 64 * 1024

const SHEBANG = Buffer.from("#!")

/**
 * Whether `relPath` (relative to the snapshot's root, `/`-separated) may be a shim: a file directly inside a
 * directory named `.bin` that is directly inside one named `node_modules`.
 *
 * @since 0.1.0
 */
export const isShimPath = (relPath: string): boolean => {
  // No split: a walk asks this of every file it reads.
  const name = relPath.lastIndexOf("/")
  if (name < 0 || !relPath.endsWith("/.bin", name)) return false
  const bin = name - "/.bin".length
  return relPath.endsWith("node_modules", bin) && (bin === "node_modules".length || relPath[bin - 13] === "/")
}

/** The workspace's paths a shim may hold: as resolved, and its real path when that differs (a symlinked checkout). */
const rootsCache = new Map<string, ReadonlyArray<string>>()

/**
 * The prefixes replaced in a shim under `root`: `root/` and its real path's, longest first.
 *
 * @since 0.1.0
 */
export const rootsOf = (root: string): ReadonlyArray<string> => {
  const known = rootsCache.get(root)
  if (known !== undefined) return known
  const resolved = path.resolve(root)
  let real = resolved
  try {
    real = fs.realpathSync(resolved)
  } catch {
    // Gone: its resolved path is all a shim can name.
  }
  // As a shim's bytes are compared: each byte one latin1 character, so that a path of any characters matches.
  const roots = [...new Set([real, resolved])].filter((r) => r !== "/")
    .map((r) => Buffer.from(`${r}/`, "utf8").toString("latin1"))
    .sort((a, b) => b.length - a.length)
  if (rootsCache.size > 1000) rootsCache.clear()
  rootsCache.set(root, roots)
  return roots
}

/**
 * The bytes of a shim as the store takes them, or `undefined` when `bytes` are taken as they are: not a script
 * (`#!`), larger than {@link MAX_BYTES}, or naming none of `roots` (see {@link rootsOf}). The caller has checked the
 * path ({@link isShimPath}).
 *
 * @since 0.1.0
 */
export const normalize = (bytes: Uint8Array, roots: ReadonlyArray<string>): Buffer | undefined => {
  if (bytes.length > MAX_BYTES || bytes.length < 2 || bytes[0] !== SHEBANG[0] || bytes[1] !== SHEBANG[1]) {
    return undefined
  }
  const text = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.length).toString("latin1")
  let out = text
  for (const r of roots) out = out.split(r).join(`${EXEC_ROOT}/`)
  return out === text ? undefined : Buffer.from(out, "latin1")
}

/**
 * The bytes the store takes for the file at `abs` that holds `bytes`, in the workspace `root`: normalized when it is a
 * shim under it, else `bytes`. What a check that reads a file again compares with the hash a snapshot recorded.
 *
 * @since 0.1.0
 */
export const asStored = (root: string, abs: string, bytes: Buffer): Buffer => {
  const rel = path.relative(root, abs)
  if (rel.startsWith("..") || path.isAbsolute(rel) || !isShimPath(rel.split(path.sep).join("/"))) return bytes
  return normalize(bytes, rootsOf(root)) ?? bytes
}

/**
 * The bytes the store takes for the file at `abs` in the workspace `root` (see {@link asStored}), read from disk; with
 * no root, its bytes as they are.
 *
 * @since 0.1.0
 */
export const readStored = (root: string | undefined, abs: string): Buffer => {
  const bytes = fs.readFileSync(abs)
  return root === undefined ? bytes : asStored(root, abs, bytes)
}
