/**
 * Where other concerns keep files of their own under a store's root: the store owns its root and says where each may
 * write, instead of each building paths into it. Plain code without Effect: the no-op check reads the engine's
 * directory before anything else is loaded. The store's own maintenance (gc, check, rm) leaves these alone.
 */
import * as fs from "node:fs"
import * as path from "node:path"

/**
 * Who keeps files of their own in a store: the engine (its run memo and run records) and the remote cache (its
 * upload journal).
 */
export type Owner = "engine" | "remote"

/**
 * The directory under `storeRoot` that `owner` keeps its files in (it may not exist yet: its owner makes it).
 */
export const ownedDirectory = (storeRoot: string, owner: Owner): string => path.join(storeRoot, owner)

/**
 * Where the store keeps large files (one file per blob, named by its hash): a blob another concern streams in (a
 * remote download) is written to a temporary file here first, on the same file system, so that the store can take
 * it by a rename.
 */
export const largeFilesDirectory = (storeRoot: string): string => path.join(storeRoot, "immutable", "files")

/** The store's layout file (its format and shard count), written when the store is created. */
export const LAYOUT_FILE = "kiln-store.json"

/**
 * Whether a store was made at `storeRoot` (its layout file is there). Whoever only cleans up after a store (a
 * post-mortem, a watchdog) asks first: opening a store that is gone makes a new, empty one.
 */
export const isMade = (storeRoot: string): boolean => fs.existsSync(path.join(storeRoot, LAYOUT_FILE))
