/**
 * The store's options, declared once for every program that opens the store: kiln's commands, and the sandboxer,
 * which its parent passes the same flags so that both open the store with identical settings. Plain data, like the
 * option table that includes it (the no-op check loads it).
 */
import type * as Duration from "effect/Duration"
import type * as Option from "effect/Option"
import type { OptionSpec } from "./optionSpec.js"

/** Options every command that opens the store takes (the sandboxer is passed its parent's). */
export const STORE_OPTIONS = {
  storeDir: {
    kind: "directory",
    flag: "store-dir",
    description:
      "the store's root (default: $KILN_STORE_DIR, else $XDG_CACHE_HOME/kiln/store, else ~/.cache/kiln/store)",
    fast: true
  },
  storeShards: {
    kind: "integer",
    flag: "store-shards",
    description:
      "shards per store, a power of two; fixed when the store is created (default: the store's own, 4 for a new one)",
    fast: false
  },
  storeMaxReaders: {
    kind: "integer",
    flag: "store-max-readers",
    description: "LMDB reader slots per shard; every process on a store must agree (default 4096)",
    fast: false
  },
  storeMaxSize: {
    kind: "size",
    flag: "store-max-size",
    description:
      "the store's cap: `gc` shrinks it to this, and kiln collects after a run that took it past (default: the store's own, `kiln store cap`, else the smaller of 20G and 10% of its disk)",
    fast: false
  },
  storeFilesMapSize: {
    kind: "size",
    flag: "store-files-map-size",
    description: "LMDB map size per file shard (address space, not disk)",
    fast: false
  },
  storeDirectoriesMapSize: {
    kind: "size",
    flag: "store-directories-map-size",
    description: "LMDB map size per directory shard",
    fast: false
  },
  storeActionsMapSize: {
    kind: "size",
    flag: "store-actions-map-size",
    description: "LMDB map size per action-cache shard",
    fast: false
  },
  storeLeaseTime: {
    kind: "duration",
    flag: "store-lease-time",
    description: "how long entries a run stores or uses are protected from gc (default 2h)",
    fast: false
  }
} as const satisfies Record<string, OptionSpec>

/** The store flags, parsed. */
export type StoreFlags = {
  readonly storeDir: Option.Option<string>
  readonly storeShards: Option.Option<number>
  readonly storeMaxReaders: Option.Option<number>
  readonly storeMaxSize: Option.Option<number>
  readonly storeFilesMapSize: Option.Option<number>
  readonly storeDirectoriesMapSize: Option.Option<number>
  readonly storeActionsMapSize: Option.Option<number>
  readonly storeLeaseTime: Option.Option<Duration.Duration>
}
