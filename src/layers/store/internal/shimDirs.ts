/**
 * The `.bin` directories of a tree that may hold shims (see `Shims.ts`): those directly inside a `node_modules` with
 * a file of their own (npm's and yarn's hold only symlinks, which are what they are anywhere).
 *
 * @internal
 */
import * as Effect from "effect/Effect"
import * as fs from "node:fs"
import * as path from "node:path"
import * as Digest from "../../../domain/Digest.js"
import type { StoreError } from "../../../domain/StoreErrors.js"
import * as AtomicFile from "../../../os/AtomicFile.js"
import { mkdirp } from "../../../os/Mkdirp.js"
import type { ShimDir } from "../SharedTrees.js"
import type * as Store from "../Store.js"

/** Past this many directories remembered, the memo starts again (a tree of a workspace has a few thousand). */
const MEMO_MAX = 200_000

const NONE: ReadonlyArray<ShimDir> = []

/**
 * What a tree holds under it, by the hash of each directory, and each answer asked for (`kept:` and its kept file's
 * name): a shared tree is walked, or its kept answer read, once per engine. @internal
 */
export type Memo = Map<string, ReadonlyArray<ShimDir>>

/** The digest of the `.bin` directly in the directory `digest`, if it has a file of its own. */
const ownBin = (store: Store.Service, digest: Digest.Digest) =>
  Effect.gen(function*() {
    const bin = (yield* store.getDirectory(digest)).directories.find((d) => d.name === ".bin")
    if (bin === undefined) return undefined
    return (yield* store.getDirectory(bin.digest)).files.length > 0 ? bin.digest : undefined
  })

const under = (
  store: Store.Service,
  memo: Memo,
  digest: Digest.Digest
): Effect.Effect<ReadonlyArray<ShimDir>, Digest.MissingDigest | StoreError> =>
  Effect.suspend(() => {
    const known = memo.get(digest.hash)
    if (known !== undefined) return Effect.succeed(known)
    return Effect.gen(function*() {
      const out: Array<ShimDir> = []
      for (const d of (yield* store.getDirectory(digest)).directories) {
        if (d.name === "node_modules") {
          const bin = yield* ownBin(store, d.digest)
          if (bin !== undefined) out.push({ path: "node_modules/.bin", digest: bin })
        }
        for (const s of yield* under(store, memo, d.digest)) out.push({ path: `${d.name}/${s.path}`, digest: s.digest })
      }
      const found = out.length === 0 ? NONE : out
      if (memo.size >= MEMO_MAX) memo.clear()
      memo.set(digest.hash, found)
      return found
    })
  })

/**
 * Where the answer for a tree is kept between runs: a tree is its digest, so the answer never changes, and finding it
 * decodes every directory of the tree (thousands for a `node_modules`), once per engine.
 */
const keptAt = (storeRoot: string, digest: Digest.Digest, name: string) =>
  path.join(
    storeRoot,
    "immutable",
    "shim-dirs",
    `${digest.hash}-${digest.sizeBytes}${name === "node_modules" ? "-nm" : ""}.json`
  )

/** At most this many `.bin` directories in a kept answer: more is a damaged file, not a tree. */
const KEPT_MAX = 100_000

/** A kept answer, if it is one: relative paths ending in `.bin`, no `..`, well-formed digests. Else undefined. */
const readKept = (file: string): ReadonlyArray<ShimDir> | undefined => {
  let json: unknown
  try {
    json = JSON.parse(fs.readFileSync(file, "utf8"))
  } catch {
    return undefined
  }
  if (!Array.isArray(json) || json.length > KEPT_MAX) return undefined
  const out: Array<ShimDir> = []
  for (const entry of json as Array<unknown>) {
    if (typeof entry !== "object" || entry === null) return undefined
    const { digest, path: p } = entry as { path?: unknown; digest?: unknown }
    if (typeof p !== "string" || typeof digest !== "string") return undefined
    const segments = p.split("/")
    if (segments[segments.length - 1] !== ".bin" || segments.some((x) => x === "" || x === "." || x === "..")) {
      return undefined
    }
    const parsed = Digest.parse(digest)
    if (parsed._tag === "Left") return undefined
    out.push({ path: p, digest: parsed.right })
  }
  return out
}

const keep = (file: string, dirs: ReadonlyArray<ShimDir>): void => {
  try {
    mkdirp(path.dirname(file))
    AtomicFile.write(file, JSON.stringify(dirs.map((d) => ({ path: d.path, digest: Digest.format(d.digest) }))))
  } catch {
    // Not kept: the next engine finds it again, which is all keeping it saves.
  }
}

/**
 * The `.bin` directories that may hold shims in the tree `digest` of a directory named `name`, by their paths in it:
 * as an earlier engine kept it in the store, else found and kept.
 *
 * @internal
 */
export const shimDirsOf = (
  store: Store.Service,
  memo: Memo,
  digest: Digest.Digest,
  name: string
): Effect.Effect<ReadonlyArray<ShimDir>, Digest.MissingDigest | StoreError> =>
  Effect.gen(function*() {
    const file = keptAt(store.options.root, digest, name)
    // Every process that mounts the tree asks: the kept file is read once per engine.
    const asked = `kept:${path.basename(file)}`
    const known = memo.get(asked)
    if (known !== undefined) return known
    const kept = readKept(file)
    if (kept !== undefined) {
      memo.set(asked, kept)
      return kept
    }
    const inner = yield* under(store, memo, digest)
    const own = name === "node_modules" ? yield* ownBin(store, digest) : undefined
    const found = own === undefined ? inner : [{ path: ".bin", digest: own }, ...inner]
    keep(file, found)
    memo.set(asked, found)
    return found
  })
