/**
 * Shared trees: a large subtree of an input root (a `node_modules`, a Go module cache, a virtualenv) is written once
 * per digest into a read-only directory the store owns, and every sandbox that needs it mounts that directory
 * instead of receiving a copy of each file. A sandbox then costs O(1) in the size of the trees it shares.
 *
 * A subtree is shared when it holds at least {@link DEFAULT_MIN_FILES} files and symlinks and none of the paths the
 * process writes into (its working directory and outputs) but its writable inputs and named caches, which are laid
 * over it writable. Below that, writing the files costs about as much as the mount, and a source tree stays writable as
 * tools expect.
 *
 * The directories live under `<store>/immutable/trees/`: each appears complete by a rename (several engines racing
 * to make one agree on the first), is leased like a large file and recorded as used by every live process using it,
 * so `kiln store gc` never takes one a sandbox mounts, and `kiln store check` hashes each against its name.
 */
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import type * as Scope from "effect/Scope"
import type * as Digest from "../../domain/Digest.js"
import type { StoreError } from "../../domain/StoreErrors.js"
import * as Internal from "./internal/sharedTrees.js"
import * as ShimDirs from "./internal/shimDirs.js"
import { Store } from "./Store.js"
import type * as StoreModule from "./Store.js"

/**
 * Subtrees of at least this many files and symlinks are shared (`KILN_SHARED_TREE_MIN_FILES` overrides it).
 */
export const DEFAULT_MIN_FILES = 1000

/**
 * An input root split into its shared subtrees and the rest.
 */
export interface Split {
  /** The input root with each shared subtree replaced by an empty directory, where it is mounted. */
  readonly rest: Digest.Digest
  /** Each shared subtree, by its path in the input root. */
  readonly shared: ReadonlyArray<Shared>
}

/**
 * A shared subtree of an input root.
 */
export interface Shared {
  readonly path: string
  readonly digest: Digest.Digest
  /**
   * The path of the anchor it lies in or is (see `Service.split`): a directory whose tree is exactly what it is at
   * that path in the input root, so that the same path under it holds this subtree.
   */
  readonly within?: string
  /**
   * The writable paths laid over it (see `Reserved.writable`), relative to it, shortest first: each a file in it, or
   * a directory in it or not (then made, empty).
   */
  readonly writable?: ReadonlyArray<WritablePath>
}

/** A writable path inside a shared subtree: whether it is a file there (else a directory, or absent). */
export interface WritablePath {
  readonly path: string
  readonly file: boolean
}

/**
 * A `.bin` directory of a tree that may hold shims (see `Shims.ts`), by its path in the tree.
 */
export interface ShimDir {
  readonly path: string
  readonly digest: Digest.Digest
}

/**
 * Where a sandbox writes, relative to its root.
 */
export interface Reserved {
  /** No shared subtree may hold one of these (the working directory: its parents and children may be shared). */
  readonly at: ReadonlyArray<string>
  /** No shared subtree may hold one of these or lie inside one (outputs). */
  readonly within: ReadonlyArray<string>
  /**
   * Writable inputs and named caches: none may be a shared subtree or lie inside one, but a shared subtree may hold
   * one, laid over it writable (`Shared.writable`), where it is a file or a directory of the subtree or absent from
   * it (not under a symlink or a file). Without this field, they are in `within`.
   */
  readonly writable?: ReadonlyArray<string>
}

/**
 * Writes the tree `digest` into the empty directory `into` (the sandboxer's `materialize`, or the store's).
 */
export type Write<E> = (digest: Digest.Digest, into: string) => Effect.Effect<void, E>

export interface Service {
  /** Subtrees of at least this many files and symlinks are shared. */
  readonly minFiles: number
  /**
   * Splits `root` at its large subtrees clear of `reserved` (paths relative to the root that the sandbox writes
   * into). Counting is memoized by digest: a tree shared by every process is walked once per engine.
   */
  readonly split: (
    root: Digest.Digest,
    reserved: Reserved,
    /** Trees whose sizes the caller knows (by hash: files and symlinks), which the split then need not read. */
    known?: ReadonlyMap<string, number>,
    /**
     * Directories the caller has whose trees it knows (hash by path in the input root): each shared subtree at or
     * under one the input root holds exactly says so (`Shared.within`), for the caller to mount from there.
     */
    anchors?: ReadonlyMap<string, string>
  ) => Effect.Effect<Split, Digest.MissingDigest | StoreError>
  /**
   * The read-only directory holding the tree `digest`, made with `write` unless one stands complete already, and
   * leased while this process lives. MissingDigest when the store lacks some of its bytes.
   */
  readonly place: <E>(digest: Digest.Digest, write: Write<E>) => Effect.Effect<string, E | StoreError>
  /**
   * The `.bin` directories that may hold shims in the tree `digest` of a directory named `name` (a file directly in a
   * `.bin` directly in a `node_modules`): where the tree is mounted from a workspace, whose shims name its own path,
   * each is mounted from the store over it, as the sandbox reads them (see `Shims.ts`). Memoized by digest.
   */
  readonly shimDirs: (
    digest: Digest.Digest,
    name: string
  ) => Effect.Effect<ReadonlyArray<ShimDir>, Digest.MissingDigest | StoreError>
}

export class SharedTrees extends Context.Tag("kiln/SharedTrees")<SharedTrees, Service>() {}

/**
 * The threshold from `KILN_SHARED_TREE_MIN_FILES` (0: share nothing), else the default.
 */
export const minFilesFrom = (env: NodeJS.ProcessEnv = process.env): number => {
  const text = env.KILN_SHARED_TREE_MIN_FILES
  const n = Number(text)
  return text !== undefined && text !== "" && Number.isInteger(n) && n >= 0 ? n : DEFAULT_MIN_FILES
}

/**
 * Shared trees of an open store. Its uses are forgotten when the scope closes, so the
 * trees may be collected once their leases end.
 */
export const make = (
  store: StoreModule.Service,
  options: { readonly minFiles?: number } = {}
): Effect.Effect<Service, never, Scope.Scope> =>
  Effect.gen(function*() {
    const state = Internal.make(store)
    const minFiles = options.minFiles ?? minFilesFrom()
    const shimMemo: ShimDirs.Memo = new Map()
    yield* Effect.addFinalizer(() =>
      Effect.try(() => Internal.release(state)).pipe(
        Effect.catchAll((e) => Effect.logWarning(`could not release this process's shared trees: ${String(e.error)}`))
      )
    )
    return {
      minFiles,
      split: (root, reserved, known, anchors) => Internal.split(state, root, reserved, minFiles, known, anchors),
      place: (digest, write) => Internal.place(state, digest, write),
      shimDirs: (digest, name) => ShimDirs.shimDirsOf(store, shimMemo, digest, name)
    }
  })

export const layer = (options: { readonly minFiles?: number } = {}): Layer.Layer<SharedTrees, never, Store> =>
  Layer.scoped(SharedTrees, Effect.flatMap(Store, (store) => make(store, options)))
