/**
 * The `.bin` directories of a tree that may hold shims (see `Shims.ts`): those directly inside a `node_modules` with
 * a file of their own (npm's and yarn's hold only symlinks, which are what they are anywhere).
 *
 * @internal
 */
import * as Effect from "effect/Effect"
import type * as Digest from "../../../domain/Digest.js"
import type { StoreError } from "../../../domain/StoreErrors.js"
import type { ShimDir } from "../SharedTrees.js"
import type * as Store from "../Store.js"

/** Past this many directories remembered, the memo starts again (a tree of a workspace has a few thousand). */
const MEMO_MAX = 200_000

const NONE: ReadonlyArray<ShimDir> = []

/** What a tree holds under it, by the hash of each directory: a shared tree is walked once per engine. @internal */
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
 * The `.bin` directories that may hold shims in the tree `digest` of a directory named `name`, by their paths in it.
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
    const inner = yield* under(store, memo, digest)
    const own = name === "node_modules" ? yield* ownBin(store, digest) : undefined
    return own === undefined ? inner : [{ path: ".bin", digest: own }, ...inner]
  })
