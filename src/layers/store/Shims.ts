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
 */
import * as fs from "node:fs"
import * as path from "node:path"
import { EXEC_ROOT } from "../../os/mounts/MountNamespace.js"

/** What a shim's workspace path becomes. */
export { EXEC_ROOT }

/** A shim is a short script: a larger file in `.bin` is taken as it is. pnpm's are under 2 KiB. */
export const MAX_BYTES = 64 * 1024

const SHEBANG = Buffer.from("#!")

/**
 * Whether `relPath` (relative to the snapshot's root, `/`-separated) may be a shim: a file directly inside a
 * directory named `.bin` that is directly inside one named `node_modules`.
 */
export const isShimPath = (relPath: string): boolean => {
  // No split: a walk asks this of every file it reads.
  const name = relPath.lastIndexOf("/")
  if (name < 0 || !relPath.endsWith("/.bin", name)) return false
  const bin = name - "/.bin".length
  return relPath.endsWith("node_modules", bin) && (bin === "node_modules".length || relPath[bin - 13] === "/")
}

/**
 * What a shim under a workspace may name of it: the workspace's path (as resolved, and its real path when that differs:
 * a symlinked checkout) as `prefixes` of what is in it, each followed by `/`, longest first; and `above`, the
 * `node_modules` of each directory above it but `/`, which pnpm 9 lists in `NODE_PATH` as Node's own lookup would go
 * (`/home/u/node_modules:/home/node_modules:/node_modules`), and which a process at `/mnt` has none of. Each as a shim's
 * bytes are compared: one latin1 character a byte, so that a path of any characters matches.
 */
export interface Roots {
  readonly prefixes: ReadonlyArray<string>
  readonly above: RegExp | undefined
}

const escaped = (text: string) => text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")

/**
 * The {@link Roots} of the workspace paths `paths` (absolute, resolved), taken as they are.
 */
export const rootsFrom = (paths: ReadonlyArray<string>): Roots => {
  const latin1 = (p: string) => Buffer.from(p, "utf8").toString("latin1")
  const inside = [...new Set(paths)].filter((r) => r !== "/")
  const ancestors = new Set<string>()
  for (const p of inside) {
    for (let up = path.dirname(p); up !== "/" && up !== path.dirname(up); up = path.dirname(up)) ancestors.add(up)
  }
  const names = [...ancestors].sort((a, b) => b.length - a.length).map((a) => escaped(latin1(a))).join("|")
  return {
    prefixes: inside.map((r) => latin1(`${r}/`)).sort((a, b) => b.length - a.length),
    // An entry of a colon-separated list in quotes, with the colon that separates it from the one before or after.
    above: names === ""
      ? undefined
      : new RegExp(`:(?:${names})/node_modules(?=[:"])|(?<=")(?:${names})/node_modules:`, "g")
  }
}

const rootsCache = new Map<string, Roots>()

/**
 * The {@link Roots} of the workspace `root`: its resolved path and its real path. Remembered per path.
 */
export const rootsOf = (root: string): Roots => {
  const known = rootsCache.get(root)
  if (known !== undefined) return known
  const resolved = path.resolve(root)
  let real = resolved
  try {
    real = fs.realpathSync(resolved)
  } catch {
    // Gone: its resolved path is all a shim can name.
  }
  const roots = rootsFrom([real, resolved])
  if (rootsCache.size > 1000) rootsCache.clear()
  rootsCache.set(root, roots)
  return roots
}

/**
 * The bytes of a shim as the store takes them, or `undefined` when `bytes` are taken as they are: not a script
 * (`#!`), larger than {@link MAX_BYTES}, or naming no prefix of `roots` (see {@link rootsOf}). Every prefix is then
 * `/mnt/`, and every entry of `above` dropped from the lists it is in. The caller has checked the path
 * ({@link isShimPath}).
 */
export const normalize = (bytes: Uint8Array, roots: Roots): Buffer | undefined => {
  if (bytes.length > MAX_BYTES || bytes.length < 2 || bytes[0] !== SHEBANG[0] || bytes[1] !== SHEBANG[1]) {
    return undefined
  }
  const text = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.length).toString("latin1")
  if (!roots.prefixes.some((r) => text.includes(r))) return undefined
  let out = roots.above === undefined ? text : text.replace(roots.above, "")
  for (const r of roots.prefixes) out = out.split(r).join(`${EXEC_ROOT}/`)
  return Buffer.from(out, "latin1")
}

/**
 * The bytes the store takes for the file at `abs` that holds `bytes`, in the workspace `root`: normalized when it is a
 * shim under it, else `bytes`. What a check that reads a file again compares with the hash a snapshot recorded.
 */
export const asStored = (root: string, abs: string, bytes: Buffer): Buffer => {
  const rel = path.relative(root, abs)
  if (rel.startsWith("..") || path.isAbsolute(rel) || !isShimPath(rel.split(path.sep).join("/"))) return bytes
  return normalize(bytes, rootsOf(root)) ?? bytes
}

/**
 * The bytes the store takes for the file at `abs` in the workspace `root` (see {@link asStored}), read from disk; with
 * no root, its bytes as they are.
 */
export const readStored = (root: string | undefined, abs: string): Buffer => {
  const bytes = fs.readFileSync(abs)
  return root === undefined ? bytes : asStored(root, abs, bytes)
}
