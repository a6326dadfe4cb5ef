/**
 * The store flags every command accepts, as parsed values, turned into `Store.Options`. Apart from the flags' own
 * definitions (`globalOptions.ts`), so that a plain `kiln run`, which parses its arguments without @effect/cli, does
 * not load @effect/cli at all.
 */
import * as Duration from "effect/Duration"
import * as Option from "effect/Option"
import type * as Store from "../store/Store.js"

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

/** @since 0.1.0 */
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
