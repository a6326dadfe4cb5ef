/**
 * Shared trees: large subtrees of input roots, each written once per digest into a read-only directory the store
 * owns (`immutable/trees/<hash>`), which sandboxes mount rather than copy. The layout:
 *
 * - `<hash>/`: the tree, read-only (directories 0555, files without write bits). It appears only by a rename of a
 *   complete temp directory, so nobody ever sees half of one; its mtime is its lease, as for large files.
 * - `<hash>.made`: `{ boot, sizeBytes }`, written after the rename. A tree without it, or made before the machine
 *   last booted (its files may not have reached the disk), is made again rather than trusted.
 * - `.tmp-<pid>-<start>-<random>/`: a tree being written, by the process named; one whose writer is dead (`kill -9`)
 *   is never used, and goes at the next `gc`.
 * - `.users/<pid>-<start>`: the hashes of the trees a live process uses, one per line; `gc` keeps those trees
 *   whatever their lease says.
 *
 * @internal
 */
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import { randomBytes } from "node:crypto"
import * as fs from "node:fs"
import * as path from "node:path"
import * as Digest from "../../../domain/Digest.js"
import * as Directory from "../../../domain/Directory.js"
import type { StoreError } from "../../../domain/StoreErrors.js"
import { bootIdText } from "../../../os/BootId.js"
import { errnoOf } from "../../../os/Errno.js"
import { ioError } from "../../../os/IoError.js"
import { mkdirp } from "../../../os/Mkdirp.js"
import * as Proc from "../../../os/Proc.js"
import { removeTree } from "../../../os/RemoveTree.js"
import type { Reserved, Shared, Split, WritablePath, Write } from "../SharedTrees.js"
import type * as Store from "../Store.js"
import * as Core from "./core.js"
import * as TreeBlobs from "./treeBlobs.js"

/** @internal */
export interface State {
  readonly store: Store.Service
  readonly leaseTimeMs: number
  readonly root: string
  /** Files and symlinks under each directory, by hash: a shared tree is counted once per process, not per use. */
  readonly counts: Map<string, number>
  /** Trees this process has placed (and registered as a user of), by hash. */
  readonly placed: Set<string>
  /** Trees being placed by a fiber of this process, for the others to wait on rather than write them again. */
  readonly placing: Map<string, Deferred.Deferred<string, unknown>>
  readonly owner: Proc.Owner
}

/** @internal */
export const rootOf = (storeRoot: string): string => path.join(storeRoot, "immutable", "trees")

/** @internal */
export const make = (store: Store.Service): State => ({
  store,
  leaseTimeMs: store.options.leaseTimeMs,
  root: rootOf(store.options.root),
  counts: new Map(),
  placed: new Set(),
  placing: new Map(),
  owner: Proc.self()
})

const COUNTS_MAX = 200_000

/** How many files and symlinks the tree `digest` holds. @internal */
export const countOf = (
  state: State,
  digest: Digest.Digest
): Effect.Effect<number, Digest.MissingDigest | StoreError> =>
  Effect.suspend(() => {
    if (Digest.isEmpty(digest)) return Effect.succeed(0)
    const known = state.counts.get(digest.hash)
    if (known !== undefined) return Effect.succeed(known)
    return Effect.gen(function*() {
      const dir = yield* state.store.getDirectory(digest)
      let n = dir.files.length + dir.symlinks.length
      for (const d of dir.directories) n += yield* countOf(state, d.digest)
      if (state.counts.size >= COUNTS_MAX) state.counts.clear()
      state.counts.set(digest.hash, n)
      return n
    })
  })

const holds = (subtree: string, reserved: Reserved) =>
  reserved.at.some((r) => r === subtree || r.startsWith(`${subtree}/`)) ||
  reserved.within.some((r) => r === subtree || r.startsWith(`${subtree}/`) || subtree.startsWith(`${r}/`)) ||
  (reserved.writable ?? []).some((r) => r === subtree || subtree.startsWith(`${r}/`))

/**
 * What `rel` is in the tree `digest`: a file, a directory, absent (a directory on the way to it may be absent too),
 * or something no writable path can be laid over (a symlink on the way or at it, a file on the way).
 */
const kindIn = (
  state: State,
  digest: Digest.Digest,
  rel: string
): Effect.Effect<"file" | "directory" | "absent" | "unusable", Digest.MissingDigest | StoreError> =>
  Effect.gen(function*() {
    const [name, ...more] = rel.split("/")
    const dir = yield* state.store.getDirectory(digest)
    const sub = dir.directories.find((d) => d.name === name)
    if (sub !== undefined) return more.length === 0 ? "directory" : yield* kindIn(state, sub.digest, more.join("/"))
    if (dir.symlinks.some((l) => l.name === name)) return "unusable"
    if (dir.files.some((f) => f.name === name)) return more.length === 0 ? "file" : "unusable"
    return "absent"
  })

/** The writable paths inside `subtree` laid over it, or undefined where one cannot be. */
const writableIn = (state: State, subtree: string, digest: Digest.Digest, reserved: Reserved) =>
  Effect.gen(function*() {
    const laid: Array<WritablePath> = []
    for (const r of reserved.writable ?? []) {
      if (!r.startsWith(`${subtree}/`)) continue
      const rel = r.slice(subtree.length + 1)
      const kind = yield* kindIn(state, digest, rel)
      if (kind === "unusable") return undefined
      laid.push({ path: rel, file: kind === "file" })
    }
    return laid.sort((a, b) => a.path.length - b.path.length)
  })

/**
 * Splits `root` into its largest subtrees of at least `threshold` files clear of `reserved`, and the rest. A shared
 * subtree at or under a directory of `anchors` (path → hash) that the root holds exactly names it (`within`).
 *
 * @internal
 */
export const split = (
  state: State,
  root: Digest.Digest,
  reserved: Reserved,
  threshold: number,
  known: ReadonlyMap<string, number> = new Map(),
  anchors: ReadonlyMap<string, string> = new Map()
): Effect.Effect<Split, Digest.MissingDigest | StoreError> =>
  Effect.gen(function*() {
    for (const [hash, n] of known) state.counts.set(hash, n)
    const shared: Array<Shared> = []
    const made: Array<Directory.Directory> = []
    const visit = (
      dir: Directory.Directory,
      rel: string,
      anchor: string | undefined
    ): Effect.Effect<Directory.Directory | undefined, Digest.MissingDigest | StoreError> =>
      Effect.gen(function*() {
        let changed = false
        const directories: Array<Directory.DirectoryNode> = []
        for (const d of dir.directories) {
          const p = rel === "" ? d.name : `${rel}/${d.name}`
          if ((yield* countOf(state, d.digest)) < threshold) {
            directories.push(d)
            continue
          }
          const within = anchor ?? (anchors.get(p) === d.digest.hash ? p : undefined)
          const writable = holds(p, reserved) ? undefined : yield* writableIn(state, p, d.digest, reserved)
          if (writable !== undefined) {
            shared.push({
              path: p,
              digest: d.digest,
              ...(within === undefined ? {} : { within }),
              ...(writable.length === 0 ? {} : { writable })
            })
            directories.push({ name: d.name, digest: Digest.empty })
            changed = true
            continue
          }
          const inner = yield* visit(yield* state.store.getDirectory(d.digest), p, within)
          if (inner === undefined) {
            directories.push(d)
            continue
          }
          made.push(inner)
          directories.push({ name: d.name, digest: Directory.digestOf(inner) })
          changed = true
        }
        return changed ? { ...dir, directories } : undefined
      })
    const top = yield* visit(yield* state.store.getDirectory(root), "", undefined)
    if (top === undefined || shared.length === 0) return { rest: root, shared: [] }
    made.push(top)
    // Children first: a directory is stored after those it names.
    let rest = root
    for (const d of made) rest = yield* state.store.putDirectory(d)
    return { rest, shared }
  })

/** The boot a tree was made in: one made before the machine last booted may not have all of its bytes on disk. */
const bootId = () => (bootIdText() ?? "unknown").trim()

const finalPath = (state: State, hash: string) => path.join(state.root, hash)
const madePath = (state: State, hash: string) => path.join(state.root, `${hash}.made`)
const usersDir = (state: State) => path.join(state.root, ".users")
const userFile = (state: State) => path.join(usersDir(state), `${state.owner.pid}-${state.owner.startTime}`)

interface Made {
  readonly boot: string
  readonly sizeBytes: number
}

/** @internal */
export const readMade = (file: string): Made | undefined => {
  try {
    const v = JSON.parse(fs.readFileSync(file, "utf8")) as Partial<Made>
    return typeof v.boot === "string" && typeof v.sizeBytes === "number"
      ? { boot: v.boot, sizeBytes: v.sizeBytes }
      : undefined
  } catch (e) {
    if (errnoOf(e) === "ENOENT" || e instanceof SyntaxError) return undefined
    throw e
  }
}

/** Whether the tree of `digest` stands complete, made in this boot. */
const trusted = (state: State, digest: Digest.Digest): boolean => {
  const made = readMade(madePath(state, digest.hash))
  if (made === undefined || made.boot !== bootId() || made.sizeBytes !== digest.sizeBytes) return false
  const st = fs.statSync(finalPath(state, digest.hash), { throwIfNoEntry: false })
  return st !== undefined && st.isDirectory()
}

const leaseTree = (state: State, hash: string) => {
  const dir = finalPath(state, hash)
  const st = fs.statSync(dir)
  const until = Date.now() + state.leaseTimeMs
  if (st.mtimeMs - Date.now() < state.leaseTimeMs / 2) fs.utimesSync(dir, st.atime, new Date(until))
}

/** Records this process as a user of `hash`, before anything else: `gc` keeps what a live process lists. */
const register = (state: State, hash: string) => {
  if (state.placed.has(hash)) return
  mkdirp(usersDir(state))
  fs.appendFileSync(userFile(state), `${hash}\n`)
  state.placed.add(hash)
}

/** Makes every entry of a tree written into `dir` read-only (write bits off), directories last. */
const makeReadOnly = (dir: string) => {
  for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
    const p = path.join(dir, entry.name)
    if (entry.isDirectory()) makeReadOnly(p)
    else if (entry.isFile()) {
      const mode = fs.lstatSync(p).mode & 0o7777
      if ((mode & 0o222) !== 0) fs.chmodSync(p, mode & ~0o222)
    }
  }
  fs.chmodSync(dir, 0o555)
}

/** A temp directory named after its writer, so that `gc` can tell a dead writer's from a live one's. */
const tempPath = (state: State) =>
  path.join(state.root, `.tmp-${state.owner.pid}-${state.owner.startTime}-${randomBytes(4).toString("hex")}`)

/**
 * The directory holding the tree `digest`, read-only: made by `write` into a temp directory and renamed into place
 * unless a trusted one stands there. Several processes racing to make one each write their own and the first rename
 * wins; the others remove theirs.
 */
const makeTree = <E>(state: State, digest: Digest.Digest, write: Write<E>) =>
  Effect.gen(function*() {
    const final = finalPath(state, digest.hash)
    yield* Effect.try({
      try: () => {
        register(state, digest.hash)
        if (fs.existsSync(final) && !trusted(state, digest)) removeTree(final)
      },
      catch: ioError(final, "cannot prepare the shared tree")
    })
    if (trusted(state, digest)) return final
    // Its files a snapshot left in the workspace are in the store before the writer (perhaps the sandboxer) reads them.
    const core = Core.findCore(state.store)
    if (core !== undefined) yield* TreeBlobs.fillTree(core, digest)
    const tmp = tempPath(state)
    yield* Effect.try({ try: () => mkdirp(tmp), catch: ioError(tmp, "cannot create") })
    const written = yield* Effect.exit(write(digest, tmp))
    if (Exit.isFailure(written)) {
      yield* Effect.try({ try: () => removeTree(tmp), catch: ioError(tmp, "cannot remove") }).pipe(Effect.ignoreLogged)
      return yield* Effect.failCause(written.cause)
    }
    return yield* Effect.try({
      try: () => {
        makeReadOnly(tmp)
        const until = new Date(Date.now() + state.leaseTimeMs)
        fs.utimesSync(tmp, new Date(), until)
        try {
          fs.renameSync(tmp, final)
        } catch (e) {
          const code = errnoOf(e)
          if (code !== "ENOTEMPTY" && code !== "EEXIST") throw e
          // Another process made it first: its tree is the same bytes.
          removeTree(tmp)
          return final
        }
        const made = path.join(state.root, `.made-${path.basename(tmp)}`)
        fs.writeFileSync(made, JSON.stringify({ boot: bootId(), sizeBytes: digest.sizeBytes }) + "\n")
        fs.renameSync(made, madePath(state, digest.hash))
        return final
      },
      catch: ioError(final, "cannot make the shared tree")
    })
  })

/**
 * The read-only directory of the tree `digest`, made once (see {@link makeTree}) and leased: `gc` leaves it while
 * this process lives.
 *
 * @internal
 */
export const place = <E>(
  state: State,
  digest: Digest.Digest,
  write: Write<E>
): Effect.Effect<string, E | StoreError> =>
  Effect.suspend(() => {
    const final = finalPath(state, digest.hash)
    if (state.placed.has(digest.hash)) {
      const ready = Effect.try({
        try: () => {
          if (!trusted(state, digest)) return undefined
          leaseTree(state, digest.hash)
          return final
        },
        catch: ioError(final, "cannot lease the shared tree")
      })
      const inFlight = state.placing.get(digest.hash)
      if (inFlight !== undefined) return Deferred.await(inFlight) as Effect.Effect<string, E | StoreError>
      return Effect.flatMap(ready, (p) => p !== undefined ? Effect.succeed(p) : placeAfresh(state, digest, write))
    }
    const inFlight = state.placing.get(digest.hash)
    // A fiber waiting on another's placement gets its error, of the same writer's kind.
    return inFlight !== undefined
      ? Deferred.await(inFlight) as Effect.Effect<string, E | StoreError>
      : placeAfresh(state, digest, write)
  })

const placeAfresh = <E>(state: State, digest: Digest.Digest, write: Write<E>) =>
  Effect.gen(function*() {
    const done = yield* Deferred.make<string, unknown>()
    state.placing.set(digest.hash, done)
    const made = yield* Effect.exit(
      Effect.tap(makeTree(state, digest, write), () =>
        Effect.try({
          try: () => leaseTree(state, digest.hash),
          catch: ioError(finalPath(state, digest.hash), "cannot lease the shared tree")
        }))
    )
    state.placing.delete(digest.hash)
    yield* Deferred.done(done, made)
    return yield* made
  })

/** Forgets this process's uses: its trees may be collected once their leases end. @internal */
export const release = (state: State): void => {
  if (state.placed.size === 0) return
  try {
    fs.unlinkSync(userFile(state))
  } catch (e) {
    if (errnoOf(e) !== "ENOENT") throw e
  }
  state.placed.clear()
}
