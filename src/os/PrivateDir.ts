/**
 * Whether a directory kiln keeps its state in (the store root, the sandbox root, the named caches, its runtime
 * directory) is safe from the other users of the machine, as ssh asks of `~/.ssh`: the directory is its user's (or,
 * for a root that may be shared, a group's on purpose), nobody else can write it, and nobody else can replace it,
 * which any directory above it that others can write would let them do. A directory another user made first (under
 * `/dev/shm` or `/tmp`, which all may write) would let them read every input and swap a running sandbox for their own.
 * Plain code without Effect: the run memo's check reads the store before anything else is loaded.
 *
 * @internal
 */
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import * as DirectoryFinding from "../domain/DirectoryFinding.js"
import { cacheDir } from "./CacheDir.js"
import { errnoOf } from "./Errno.js"
import { mkdirp } from "./Mkdirp.js"

/**
 * Who may write a root besides its user. `own`: nobody (a sandbox root, the runtime directory). `group`: the
 * members of its group too, when it says so by being setgid and group-writable, and this user is one of them (a store,
 * or named caches, shared by a team: `mkdir -m 2770`); its owner may then be another member.
 *
 * @internal
 */
export type Sharing = "own" | "group"

/** What makes a directory unsafe: the directory, its owner and mode, and why. @internal */
export type Finding = DirectoryFinding.Finding

const STICKY = 0o1000
const SETGID = 0o2000
const GROUP_WRITE = 0o020
const OTHER_WRITE = 0o002

/** `0777`, `2770`: a mode as `chmod` takes it. @internal */
export const octal = DirectoryFinding.octal

interface Account {
  readonly uid: number
  readonly gid: number
  readonly groups: ReadonlyArray<number>
}

const account = (): Account | undefined => {
  if (typeof process.geteuid !== "function") return undefined
  return {
    uid: process.geteuid(),
    gid: process.getegid!(),
    groups: [process.getegid!(), ...(process.getgroups?.() ?? [])]
  }
}

/** The user's name, looked up only when a group-writable directory asks (a passwd lookup is most of a check). */
let userName: { readonly value: string | undefined } | undefined
const nameOf = (): string | undefined => {
  if (userName === undefined) {
    try {
      userName = { value: os.userInfo().username }
    } catch {
      // A uid without a passwd entry (a container's): no name, so no group is taken for its private one.
      userName = { value: undefined }
    }
  }
  return userName.value
}

let groupFile: Map<number, { readonly name: string; readonly members: ReadonlyArray<string> }> | undefined

const groupEntry = (gid: number) => {
  if (groupFile === undefined) {
    groupFile = new Map()
    let text = ""
    try {
      text = fs.readFileSync("/etc/group", "utf8")
    } catch {
      // No group file: no group is known to be private.
    }
    for (const line of text.split("\n")) {
      const [name, , id, members] = line.split(":")
      if (name === undefined || id === undefined || !/^\d+$/.test(id)) continue
      groupFile.set(Number(id), { name, members: (members ?? "").split(",").filter((m) => m !== "") })
    }
  }
  return groupFile.get(gid)
}

/**
 * Whether `gid` is the user's private group (named after the user, with no other member), where group-writable
 * means writable by the user alone: Debian's and others' default (`USERGROUPS`, umask 002). Debian's ssh allows the
 * same.
 */
const isPrivateGroup = (me: Account, gid: number): boolean => {
  if (gid !== me.gid) return false
  const name = nameOf()
  const entry = name === undefined ? undefined : groupEntry(gid)
  return entry !== undefined && entry.name === name && entry.members.every((m) => m === name)
}

/** A setgid, group-writable directory of a group this user is in: shared with that group on purpose. */
const sharedOnPurpose = (me: Account, st: fs.Stats) =>
  (st.mode & SETGID) !== 0 && (st.mode & GROUP_WRITE) !== 0 && me.groups.includes(st.gid)

const finding = (p: string, st: fs.Stats, problem: string): Finding => ({
  path: p,
  owner: st.uid,
  mode: st.mode & 0o7777,
  problem
})

/** A directory above a root: nobody else may replace what it holds (rename the root away, put theirs there). */
const checkAbove = (me: Account, p: string, st: fs.Stats): Finding | undefined => {
  if (st.uid !== me.uid && st.uid !== 0) return finding(p, st, "is another user's, who can replace what it holds")
  // A sticky directory lets nobody but an entry's owner rename or remove it (/tmp, /dev/shm).
  if ((st.mode & STICKY) !== 0) return undefined
  if ((st.mode & OTHER_WRITE) !== 0) return finding(p, st, "is writable by every user, who can replace what it holds")
  if ((st.mode & GROUP_WRITE) !== 0 && !isPrivateGroup(me, st.gid) && !sharedOnPurpose(me, st)) {
    return finding(p, st, `is writable by group ${st.gid}, whose members can replace what it holds`)
  }
  return undefined
}

/** The root itself: this user's (or a group's on purpose, when `sharing` allows), and writable by nobody else. */
const checkRoot = (me: Account, p: string, st: fs.Stats, sharing: Sharing): Finding | undefined => {
  if ((st.mode & OTHER_WRITE) !== 0) return finding(p, st, "is writable by every user")
  if (sharing === "group" && sharedOnPurpose(me, st)) return undefined
  if ((st.mode & GROUP_WRITE) !== 0 && !isPrivateGroup(me, st.gid)) {
    return finding(
      p,
      st,
      sharing === "own"
        ? `is writable by group ${st.gid} (chmod g-w it)`
        : (st.mode & SETGID) !== 0
        ? `is writable by group ${st.gid}, which uid ${me.uid} is not in`
        : `is writable by group ${st.gid} but not setgid (chmod g-w it; one shared with the group on purpose is chmod 2770)`
    )
  }
  if (st.uid !== me.uid) return finding(p, st, `is another user's (kiln runs as uid ${me.uid})`)
  return undefined
}

const prefixesOf = (abs: string): Array<string> => {
  const out = ["/"]
  for (const part of abs.split("/").filter((s) => s !== "")) out.push(path.join(out[out.length - 1]!, part))
  return out
}

/**
 * What makes `dir` unsafe to keep kiln's state in, or undefined when nothing does. A directory that does not exist
 * yet is judged by the directories it would be made in. Symlinks on the way must be the user's or root's (their owner
 * can point them elsewhere), and what they lead to is judged.
 *
 * @internal
 */
export const inspect = (dir: string, sharing: Sharing): Finding | undefined => judge(dir, sharing).found

const judge = (dir: string, sharing: Sharing): { readonly found?: Finding; readonly exists: boolean } => {
  const me = account()
  if (me === undefined) return { exists: true }
  const abs = path.resolve(dir)
  let deepest = "/"
  for (const p of prefixesOf(abs).slice(1)) {
    let st: fs.Stats
    try {
      st = fs.lstatSync(p)
    } catch (e) {
      if (errnoOf(e) === "ENOENT") break
      throw e
    }
    if (st.isSymbolicLink() && st.uid !== me.uid && st.uid !== 0) {
      return { found: finding(p, st, "is a symlink of another user's, who can point it elsewhere"), exists: true }
    }
    deepest = p
  }
  const exists = deepest === abs
  const chain = prefixesOf(fs.realpathSync.native(deepest))
  const above = exists ? chain.slice(0, -1) : chain
  for (const p of above) {
    const found = checkAbove(me, p, fs.statSync(p))
    if (found !== undefined) return { found, exists }
  }
  if (!exists) return { exists }
  const real = chain[chain.length - 1]!
  const st = fs.statSync(real)
  // Not a directory: whoever makes something in it reports that.
  const found = st.isDirectory() ? checkRoot(me, real, st, sharing) : undefined
  return found === undefined ? { exists } : { found, exists }
}

/**
 * Makes `dir` (mode 0700, its missing parents too) unless it exists, and says what makes it unsafe, if anything. What
 * exists is judged before anything is made in it, and the result again, since it may be another's made meanwhile.
 *
 * @internal
 */
export const ensure = (dir: string, sharing: Sharing): Finding | undefined => {
  const before = judge(dir, sharing)
  if (before.found !== undefined || before.exists) return before.found
  mkdirp(dir, 0o700)
  return inspect(dir, sharing)
}

/** One line naming the root, the directory at fault with its owner and mode, and why. @internal */
export const describe = DirectoryFinding.describe

/** An unsafe directory, thrown by plain code (`describe` is its message). @internal */
export class UnsafeDirectoryError extends Error {
  constructor(readonly role: string, readonly root: string, readonly finding: Finding) {
    super(describe(role, root, finding))
  }
}

/** {@link ensure}, throwing {@link UnsafeDirectoryError}. @internal */
export const ensureOrThrow = (role: string, dir: string, sharing: Sharing): void => {
  const found = ensure(dir, sharing)
  if (found !== undefined) throw new UnsafeDirectoryError(role, dir, found)
}

// ---------------------------------------------------------------------------------------------------------------
// The runtime directory: where kiln's sockets go (the sandboxer's, the standby engine's)

/** `sockaddr_un.sun_path` is 108 bytes on Linux, NUL included. @internal */
export const MAX_SOCKET_PATH = 107

/**
 * The directory, made if missing: the first of `$XDG_RUNTIME_DIR/kiln` (the user's own by its definition, and
 * checked), `$KILN_RUNTIME_DIR`, `$XDG_CACHE_HOME/kiln/run` (`~/.cache/kiln/run`, beside the store and sandbox roots),
 * `/tmp/kiln-<uid>` that is or can be made so and whose socket paths fit in 107 bytes; else a fresh
 * `/tmp/kiln-<uid>-XXXXXX` of this process's own. A directory another user made first is passed over, never a reason
 * a socket cannot be made. Never under the workspace, whose path can be arbitrarily long.
 *
 * @internal
 */
export const socketDirectory = (env: NodeJS.ProcessEnv = process.env): string =>
  fixedSocketDirectory(env) ?? freshSocketDirectory(env)

/**
 * A fresh `/tmp/kiln-<uid>-XXXXXX` of this process's own, for sockets only it and its children meet at; its maker
 * removes it when done.
 *
 * @internal
 */
export const freshSocketDirectory = (env: NodeJS.ProcessEnv = process.env): string => {
  const uid = typeof process.getuid === "function" ? process.getuid() : 0
  try {
    return fs.mkdtempSync(`/tmp/kiln-${uid}-`)
  } catch {
    // Whatever makes a socket there says why it cannot.
    return socketCandidates(env)[0] ?? `/tmp/kiln-${uid}`
  }
}

const socketCandidates = (env: NodeJS.ProcessEnv): Array<string> => {
  const uid = typeof process.getuid === "function" ? process.getuid() : 0
  const xdg = env.XDG_RUNTIME_DIR
  return [
    ...(xdg !== undefined && path.isAbsolute(xdg) && isOwnPrivate(xdg) ? [path.join(xdg, "kiln")] : []),
    cacheDir("run", "KILN_RUNTIME_DIR", env),
    `/tmp/kiln-${uid}`
  ].filter((d) => d.length + 40 <= MAX_SOCKET_PATH)
}

/**
 * {@link socketDirectory} where it is the same for every process of this user (the first candidate that is or can be
 * made this user's own), else undefined: a socket two processes must meet at (a standby's) cannot be in a directory
 * of one process's own.
 *
 * @internal
 */
export const fixedSocketDirectory = (env: NodeJS.ProcessEnv = process.env): string | undefined =>
  socketCandidates(env).find((d) => {
    try {
      return ensure(d, "own") === undefined
    } catch {
      return false
    }
  })

const isOwnPrivate = (dir: string): boolean => {
  try {
    return fs.statSync(dir).isDirectory() && inspect(dir, "own") === undefined
  } catch {
    return false
  }
}
