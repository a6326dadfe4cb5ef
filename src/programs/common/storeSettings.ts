/**
 * The store flags turned into the store's options: the same for kiln's commands and the sandboxer it starts.
 */
import * as Duration from "effect/Duration"
import * as Option from "effect/Option"
import type * as Store from "../../layers/store/Store.js"
import type { StoreFlags } from "./storeFlags.js"

/** The parsed store flags as `Store.layer`'s options: only those given, so the store's defaults stay its own. */
export const toStoreOptions = (o: StoreFlags): Partial<Store.Options> => ({
  ...Option.match(o.storeDir, { onNone: () => ({}), onSome: (root) => ({ root }) }),
  ...Option.match(o.storeShards, { onNone: () => ({}), onSome: (shardCount) => ({ shardCount }) }),
  ...Option.match(o.storeMaxReaders, { onNone: () => ({}), onSome: (maxReaders) => ({ maxReaders }) }),
  ...Option.match(o.storeMaxSize, { onNone: () => ({}), onSome: (maxSizeBytes) => ({ maxSizeBytes }) }),
  ...Option.match(o.storeFilesMapSize, { onNone: () => ({}), onSome: (filesMapSize) => ({ filesMapSize }) }),
  ...Option.match(o.storeDirectoriesMapSize, {
    onNone: () => ({}),
    onSome: (directoriesMapSize) => ({ directoriesMapSize })
  }),
  ...Option.match(o.storeActionsMapSize, { onNone: () => ({}), onSome: (actionsMapSize) => ({ actionsMapSize }) }),
  ...Option.match(o.storeLeaseTime, { onNone: () => ({}), onSome: (d) => ({ leaseTimeMs: Duration.toMillis(d) }) })
})
