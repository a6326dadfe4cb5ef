/**
 * The store kept under its cap without anyone running `kiln store gc`: after a run, when the store's record says a
 * collection is due (see `StoreMaintenance.collectionDue`), kiln starts `kiln store gc --auto` as a process of its
 * own, detached and at a lower priority, and exits: the run's exit waits for one spawn, never for the collection.
 * Collections take a lock, so that runs ending together start one between them; a collection never removes what a
 * live run leases (gc's rule). `KILN_STORE_GC=wait` waits for it instead (scripts, tests), `off` never starts one.
 */
import * as Console from "effect/Console"
import * as Effect from "effect/Effect"
import * as childProcess from "node:child_process"
import * as os from "node:os"
import * as path from "node:path"
import * as Size from "../../domain/Size.js"
import * as RunMemo from "../../layers/engine/RunMemo.js"
import * as Store from "../../layers/store/Store.js"
import * as StoreMaintenance from "../../layers/store/StoreMaintenance.js"
import * as GenerationLock from "../../os/GenerationLock.js"
import { ioError } from "../../os/IoError.js"
import * as Proc from "../../os/Proc.js"
import type { StoreFlags } from "../common/storeFlags.js"
import { toStoreOptions } from "../common/storeSettings.js"

type Mode = "background" | "wait" | "off"

const modeOf = (value: string | undefined): Mode => value === "wait" || value === "off" ? value : "background"

/** The store options this run was given, as flags: the collection opens the store exactly as the run did. */
const storeFlags = (o: Partial<Store.Options>): Array<string> => [
  ...(o.root !== undefined ? ["--store-dir", o.root] : []),
  ...(o.shardCount !== undefined ? ["--store-shards", String(o.shardCount)] : []),
  ...(o.maxReaders !== undefined ? ["--store-max-readers", String(o.maxReaders)] : []),
  ...(o.maxSizeBytes !== undefined ? ["--store-max-size", String(o.maxSizeBytes)] : []),
  ...(o.filesMapSize !== undefined ? ["--store-files-map-size", String(o.filesMapSize)] : []),
  ...(o.directoriesMapSize !== undefined ? ["--store-directories-map-size", String(o.directoriesMapSize)] : []),
  ...(o.actionsMapSize !== undefined ? ["--store-actions-map-size", String(o.actionsMapSize)] : []),
  ...(o.leaseTimeMs !== undefined ? ["--store-lease-time", `${o.leaseTimeMs}ms`] : [])
]

/** The store these flags name, its cap and its usage record (a few bytes read). */
const recordOf = (flags: StoreFlags) =>
  Effect.gen(function*() {
    const options = toStoreOptions(flags)
    const root = path.resolve(Store.defaultOptions(options).root)
    const cap = yield* StoreMaintenance.capOf(root, options.maxSizeBytes)
    const usage = yield* StoreMaintenance.usageOf(root)
    return { options, root, cap, usage }
  })

/**
 * Whether {@link startIfDue}, after a run that added `addedBytes` to the store these flags name, will say nothing and
 * wait for nothing: no `KILN_STORE_GC=wait`, and the store not over its cap then. A store whose record or cap cannot be
 * read counts as one that may be.
 */
export const staysQuiet = (flags: StoreFlags, addedBytes: number) =>
  Effect.gen(function*() {
    const mode = modeOf(process.env.KILN_STORE_GC)
    if (mode === "off" || process.env.KILN_CLI === undefined) return true
    if (mode === "wait") return false
    const { cap, usage } = yield* recordOf(flags)
    return usage.estimateBytes + addedBytes <= cap.bytes
  }).pipe(Effect.orElseSucceed(() => false))

/**
 * After a run on the store these flags name: starts a collection when one is due. Only the record is read (a few
 * bytes); nothing here can fail the run, whose result is already decided.
 */
export const startIfDue = (flags: StoreFlags) =>
  Effect.gen(function*() {
    const mode = modeOf(process.env.KILN_STORE_GC)
    const cli = process.env.KILN_CLI
    if (mode === "off" || cli === undefined) return
    const { cap, options, root, usage } = yield* recordOf(flags)
    if (!StoreMaintenance.collectionDue(usage, cap)) return
    if (usage.estimateBytes > cap.bytes) {
      yield* Console.error(
        `kiln: the store holds about ${Size.format(usage.estimateBytes)}, over its cap of ${Size.format(cap.bytes)}: ` +
          (mode === "wait" ? "collecting" : "collecting in the background") +
          " (`kiln store cap` to change it)"
      )
    }
    const args = [cli, "store", "gc", "--auto", ...storeFlags({ ...options, root })]
    if (mode === "background") {
      yield* Effect.sync(() => {
        const child = childProcess.spawn(process.execPath, args, { detached: true, stdio: "ignore" })
        // Nothing to tell once detached: a collection that could not start leaves the store as the run left it.
        child.on("error", () => {})
        if (child.pid !== undefined) {
          try {
            os.setPriority(child.pid, 10)
          } catch {
            // A collection at the run's own priority is still a collection.
          }
        }
        child.unref()
      })
      return
    }
    yield* Effect.async<void>((resume) => {
      const child = childProcess.spawn(process.execPath, args, { stdio: ["ignore", "ignore", "inherit"] })
      child.on("error", () => resume(Effect.void))
      child.on("exit", () => resume(Effect.void))
    })
  }).pipe(
    // The run's outcome stands whatever happens here: a store whose record cannot be read is collected by hand.
    Effect.catchAll((e) => Effect.logDebug(`no collection started: ${e.message}`))
  )

/**
 * A collection of the store these flags name, and of the run memos of workspaces that are gone: the engine's records
 * of them, beside the store's own (its stat indexes and saved walks), counted with them.
 */
export const collectWithMemos = (
  maintenance: StoreMaintenance.Service,
  flags: StoreFlags,
  options: { readonly targetSizeBytes?: number } = {}
) =>
  Effect.gen(function*() {
    const report = yield* maintenance.gc(options)
    const root = path.resolve(Store.defaultOptions(toStoreOptions(flags)).root)
    const memos = yield* Effect.try({
      try: () => RunMemo.pruneGone(root),
      catch: ioError(root, "cannot remove the run memos of workspaces that are gone")
    })
    return {
      ...report,
      goneDirectoryFiles: report.goneDirectoryFiles + memos.files,
      goneDirectoryBytes: report.goneDirectoryBytes + memos.bytes
    }
  })

/** What `kiln store gc --auto` reports, or undefined when another collection holds the lock. */
export const collect = (maintenance: StoreMaintenance.Service, flags: StoreFlags) =>
  Effect.gen(function*() {
    const options = toStoreOptions(flags)
    const root = path.resolve(Store.defaultOptions(options).root)
    const lockDir = path.join(root, "gc-lock")
    const me = Proc.self()
    const taken = yield* Effect.acquireRelease(
      Effect.try({
        try: () => GenerationLock.tryTake(lockDir, me, "kiln store gc --auto"),
        catch: ioError(lockDir, "cannot take the collection's lock")
      }),
      (attempt) =>
        attempt._tag === "Taken"
          ? Effect.sync(() => GenerationLock.release(lockDir, attempt.generation, me))
          : Effect.void
    )
    if (taken._tag !== "Taken") return undefined
    const cap = yield* StoreMaintenance.capOf(root, options.maxSizeBytes)
    const usage = yield* StoreMaintenance.usageOf(root)
    // Over its cap by the estimate: down to below it, so that the next runs do not each start a collection. Else
    // (a long record, a store never measured) the collection only measures, unless the store is over its cap after all.
    const target = usage.estimateBytes > cap.bytes ? StoreMaintenance.collectionTarget(cap) : cap.bytes
    return yield* collectWithMemos(maintenance, flags, { targetSizeBytes: target })
  }).pipe(Effect.scoped)
