/**
 * Store settings every command accepts. The sandboxer gets the same flags from its parent, so that both open the
 * store with identical settings (Pants's sandboxer silently opened defaults).
 */
import * as HelpDoc from "@effect/cli/HelpDoc"
import * as Options from "@effect/cli/Options"
import * as ValidationError from "@effect/cli/ValidationError"
import * as Either from "effect/Either"
import * as DurationText from "../domain/DurationText.js"
import * as Size from "../domain/Size.js"
import * as Store from "../store/Store.js"
import { type StoreFlags, toStoreOptions } from "./storeSettings.js"

const size = (name: string, description: string) =>
  Options.text(name).pipe(
    Options.withDescription(description),
    Options.mapEffect((s) =>
      Either.mapLeft(Size.parse(s), (m) => ValidationError.invalidValue(HelpDoc.p(`--${name}: ${m}`)))
    ),
    Options.optional
  )

/** @since 0.1.0 */
export const sizeOption = size

/** A duration flag (`90s`, `5m`); a bad value is a usage error naming the flag. */
export const durationOption = (name: string, description: string) =>
  Options.text(name).pipe(
    Options.withDescription(description),
    Options.mapEffect((s) =>
      Either.mapLeft(DurationText.parse(s), (m) => ValidationError.invalidValue(HelpDoc.p(`--${name}: ${m}`)))
    ),
    Options.optional
  )

/** @since 0.1.0 */
export const storeOptions = {
  storeDir: Options.directory("store-dir").pipe(
    Options.withDescription("the store's root (default: $KILN_STORE_DIR, else $XDG_CACHE_HOME/kiln/store)"),
    Options.optional
  ),
  storeShards: Options.integer("store-shards").pipe(
    Options.withDescription("shards per store, a power of two; fixed when the store is created (default 16)"),
    Options.optional
  ),
  storeMaxReaders: Options.integer("store-max-readers").pipe(
    Options.withDescription("LMDB reader slots per shard; every process on a store must agree (default 4096)"),
    Options.optional
  ),
  storeMaxSize: size("store-max-size", "the size `gc` shrinks the store to by default (default 20G)"),
  storeFilesMapSize: size("store-files-map-size", "LMDB map size per file shard (address space, not disk)"),
  storeDirectoriesMapSize: size("store-directories-map-size", "LMDB map size per directory shard"),
  storeActionsMapSize: size("store-actions-map-size", "LMDB map size per action-cache shard"),
  storeLeaseTime: durationOption(
    "store-lease-time",
    "how long entries a run stores or uses are protected from gc (default 2h)"
  )
}

/** @since 0.1.0 */
export const storeLayer = (o: StoreFlags) => Store.layer(toStoreOptions(o))
