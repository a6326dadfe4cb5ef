/**
 * What changed inside a directory taken whole (`node_modules/`), between the tree its last run recorded and the one it
 * has now: `kiln explain` names those paths rather than the directory alone. Both trees are read from the store, and
 * a subtree whose digest is the same on both sides is not read at all, so that the cost is that of what changed, not
 * of the tree (tens of thousands of paths).
 *
 * @internal
 */
import * as Effect from "effect/Effect"
import * as Digest from "../../../domain/Digest.js"
import type * as Directory from "../../../domain/Directory.js"
import type { StoreError } from "../../../domain/StoreErrors.js"
import type { Store } from "../../store/Store.js"

/** Paths named per directory taken whole; the rest are counted. */
export const NAMED_AT_MOST = 20

interface Change {
  readonly what: "added  " | "removed" | "changed"
  readonly path: string
}

type Entry =
  | { readonly kind: "file"; readonly digest: Digest.Digest; readonly isExecutable: boolean }
  | { readonly kind: "symlink"; readonly target: string }
  | { readonly kind: "dir"; readonly digest: Digest.Digest }

const entriesOf = (dir: Directory.Directory): Map<string, Entry> => {
  const out = new Map<string, Entry>()
  for (const f of dir.files) out.set(f.name, { kind: "file", digest: f.digest, isExecutable: f.isExecutable })
  for (const s of dir.symlinks) out.set(s.name, { kind: "symlink", target: s.target })
  for (const d of dir.directories) out.set(d.name, { kind: "dir", digest: d.digest })
  return out
}

const same = (a: Entry, b: Entry): boolean =>
  a.kind === "file"
    ? b.kind === "file" && Digest.equals(a.digest, b.digest) && a.isExecutable === b.isExecutable
    : a.kind === "symlink"
    ? b.kind === "symlink" && a.target === b.target
    : b.kind === "dir" && Digest.equals(a.digest, b.digest)

/**
 * The lines naming what changed under `rel` (a workspace path ending in `/`) from the tree `before` to `now`: at most
 * {@link NAMED_AT_MOST} paths, sorted, then how many more changed. A tree the store no longer holds (collected since
 * the last run) leaves the directory named alone.
 *
 * @internal
 */
export const treeChanges = (
  store: Store["Type"],
  rel: string,
  before: Digest.Digest,
  now: Digest.Digest
): Effect.Effect<Array<string>, StoreError> => {
  const changes: Array<Change> = []
  /** Every file, symlink and empty directory of a tree only one side has. */
  const all = (
    what: Change["what"],
    at: string,
    digest: Digest.Digest
  ): Effect.Effect<void, StoreError | Digest.MissingDigest> =>
    Effect.gen(function*() {
      const dir = yield* store.getDirectory(digest)
      const entries = entriesOf(dir)
      if (entries.size === 0) changes.push({ what, path: at })
      for (const [name, e] of entries) {
        if (e.kind === "dir") yield* all(what, `${at}${name}/`, e.digest)
        else changes.push({ what, path: `${at}${name}` })
      }
    })
  const compare = (
    at: string,
    a: Digest.Digest,
    b: Digest.Digest
  ): Effect.Effect<void, StoreError | Digest.MissingDigest> =>
    Effect.gen(function*() {
      const [was, is] = [entriesOf(yield* store.getDirectory(a)), entriesOf(yield* store.getDirectory(b))]
      for (const name of [...new Set([...was.keys(), ...is.keys()])]) {
        const x = was.get(name)
        const y = is.get(name)
        if (x !== undefined && y !== undefined && same(x, y)) continue
        if (x?.kind === "dir" && y?.kind === "dir") yield* compare(`${at}${name}/`, x.digest, y.digest)
        else {
          if (x !== undefined) {
            if (x.kind === "dir") yield* all("removed", `${at}${name}/`, x.digest)
            else if (y === undefined || y.kind === "dir") changes.push({ what: "removed", path: `${at}${name}` })
          }
          if (y !== undefined) {
            if (y.kind === "dir") yield* all("added  ", `${at}${name}/`, y.digest)
            else if (x === undefined || x.kind === "dir") changes.push({ what: "added  ", path: `${at}${name}` })
            else changes.push({ what: "changed", path: `${at}${name}` })
          }
        }
      }
    })
  return compare(rel, before, now).pipe(
    Effect.map(() => {
      const sorted = changes.sort((x, y) => (x.path < y.path ? -1 : x.path > y.path ? 1 : 0))
      const named = sorted.slice(0, NAMED_AT_MOST).map((c) => `${c.what} ${c.path}`)
      const rest = sorted.length - named.length
      return rest > 0 ? [...named, `… and ${rest} more paths changed under ${rel}`] : named
    }),
    Effect.catchTag(
      "MissingDigest",
      () =>
        Effect.succeed([
          `changed ${rel} (its tree of the last run is no longer in the store: what changed in it is unknown)`
        ])
    )
  )
}
