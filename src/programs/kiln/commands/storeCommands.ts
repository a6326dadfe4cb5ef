/**
 * `kiln store …`: inspect and maintain a store from the command line (Pants has `fs_util` for the same).
 */
import * as Args from "@effect/cli/Args"
import * as Command from "@effect/cli/Command"
import * as HelpDoc from "@effect/cli/HelpDoc"
import * as Console from "effect/Console"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as path from "node:path"
import * as ProcessName from "../../../domain/config/ProcessName.js"
import * as Digest from "../../../domain/Digest.js"
import * as Size from "../../../domain/Size.js"
import * as Store from "../../../layers/store/Store.js"
import * as StoreMaintenance from "../../../layers/store/StoreMaintenance.js"
import { cliOptions, storeLayer, storeOptions } from "../../common/cliOptions.js"
import { toStoreOptions } from "../../common/storeSettings.js"
import * as AutoGc from "../autoGc.js"
import { STORE_COMMAND_OPTIONS } from "../commandTable.js"
import { COMMANDS, STORE_COMMANDS } from "../help.js"

const digestArg = Args.text({ name: "digest" }).pipe(
  Args.withDescription("a digest, `<sha256 hex>/<size in bytes>`"),
  Args.mapEffect((s) => Either.mapLeft(Digest.parse(s), (e) => HelpDoc.p(e.message)))
)

const withStore = <A, E>(
  global: Parameters<typeof storeLayer>[0],
  f: (store: Store.Service) => Effect.Effect<A, E>
) => Effect.flatMap(Store.Store, f).pipe(Effect.provide(storeLayer(global)))

const withMaintenance = <A, E>(
  global: Parameters<typeof storeLayer>[0],
  f: (maintenance: StoreMaintenance.Service) => Effect.Effect<A, E>
) =>
  Effect.flatMap(StoreMaintenance.StoreMaintenance, f).pipe(
    Effect.provide(Layer.provide(StoreMaintenance.layer, storeLayer(global)))
  )

const snapshot = Command.make(
  "snapshot",
  {
    dir: Args.directory({ name: "dir", exists: "yes" }),
    ...cliOptions(STORE_COMMAND_OPTIONS.snapshot),
    ...storeOptions
  },
  ({ dir, globs, ...global }) =>
    withStore(global, (store) => Effect.flatMap(store.snapshot(dir, globs), (d) => Console.log(Digest.format(d))))
).pipe(Command.withDescription(STORE_COMMANDS.snapshot))

const materialize = Command.make(
  "materialize",
  {
    digest: digestArg,
    dir: Args.directory({ name: "dir", exists: "either" }),
    ...cliOptions(STORE_COMMAND_OPTIONS.materialize),
    ...storeOptions
  },
  ({ digest, dir, mutable, ...global }) =>
    withStore(global, (store) => store.materialize(digest, dir, { mutablePaths: mutable }))
).pipe(Command.withDescription(STORE_COMMANDS.materialize))

const cat = Command.make(
  "cat",
  { digest: digestArg, ...storeOptions },
  ({ digest, ...global }) =>
    withStore(global, (store) =>
      Effect.gen(function*() {
        if (yield* store.hasFile(digest)) {
          const bytes = yield* store.getFile(digest)
          yield* Effect.async<void>((resume) => {
            process.stdout.write(bytes, () => resume(Effect.void))
          })
          return
        }
        if (!(yield* store.hasDirectory(digest))) return yield* new Digest.MissingDigest({ digest, kind: "blob" })
        const dir = yield* store.getDirectory(digest)
        yield* Console.log(ProcessName.printableJson(
          {
            files: dir.files.map((f) => ({ ...f, digest: Digest.format(f.digest) })),
            directories: dir.directories.map((d) => ({ ...d, digest: Digest.format(d.digest) })),
            symlinks: dir.symlinks
          },
          2
        ))
      }))
).pipe(Command.withDescription(STORE_COMMANDS.cat))

/** A name or link target of a tree (a workspace's, a remote's), its control characters escaped for the terminal. */
const shown = (s: string) => ProcessName.printable(s)

const ls = Command.make(
  "ls",
  { digest: digestArg, ...storeOptions },
  ({ digest, ...global }) =>
    withStore(global, (store) =>
      Effect.flatMap(store.listTree(digest), (entries) =>
        Console.log(
          entries.map((e) =>
            e.type === "symlink"
              ? `symlink    ${"".padEnd(10)} ${shown(e.path)} -> ${shown(e.target!)}`
              : e.type === "directory"
              ? `directory  ${"".padEnd(10)} ${shown(e.path)}/  ${Digest.format(e.digest!)}`
              : `file ${e.isExecutable ? "755" : "644"}   ${String(e.digest!.sizeBytes).padStart(10)} ${
                shown(e.path)
              }  ${Digest.format(e.digest!)}`
          ).join("\n")
        )))
).pipe(Command.withDescription(STORE_COMMANDS.ls))

const rm = Command.make(
  "rm",
  { digest: digestArg, ...storeOptions },
  ({ digest, ...global }) =>
    withMaintenance(global, (maintenance) =>
      Effect.flatMap(maintenance.remove(digest), (removed) =>
        removed
          ? Console.log(`removed ${Digest.format(digest)}`)
          : Effect.fail(new Digest.MissingDigest({ digest, kind: "blob" }))))
).pipe(
  Command.withDescription(STORE_COMMANDS.rm)
)

const check = Command.make(
  "check",
  {
    ...cliOptions(STORE_COMMAND_OPTIONS.check),
    ...storeOptions
  },
  ({ json, repair, ...global }) =>
    Effect.gen(function*() {
      // A shard whose LMDB file is unsafe to open (truncated) cannot be checked entry by entry: --repair moves it
      // out of the store first, so that the store opens, and says where it went.
      const setAside = repair
        ? yield* StoreMaintenance.setAsideUnsafe(path.resolve(Store.defaultOptions(toStoreOptions(global)).root))
        : []
      if (!json) {
        for (const s of setAside) {
          yield* Console.log(`set aside ${s.file}, ${s.problem}: moved to ${s.movedTo}`)
        }
      }
      yield* withMaintenance(global, (maintenance) =>
        Effect.gen(function*() {
          const report = yield* maintenance.check({ repair })
          if (json) {
            yield* Console.log(JSON.stringify({ ...report, setAside }, null, 2))
          } else {
            for (const p of report.problems) yield* Console.log(`corrupt ${p.store} entry ${p.key}: ${p.problem}`)
            const verdict = report.problems.length === 0
              ? "clean"
              : `${report.problems.length} corrupt` + (repair ? `, ${report.repaired} removed` : " (run with --repair)")
            yield* Console.log(`checked ${report.checked} entries: ${verdict}`)
          }
          if (report.problems.length > 0 || setAside.length > 0) process.exitCode = 1
        }))
    })
).pipe(Command.withDescription(STORE_COMMANDS.check))

const gc = Command.make(
  "gc",
  {
    ...cliOptions(STORE_COMMAND_OPTIONS.gc),
    ...storeOptions
  },
  ({ auto, json, targetSize, ...global }) =>
    withMaintenance(global, (maintenance) =>
      Effect.gen(function*() {
        if (auto) {
          const report = yield* AutoGc.collect(maintenance, global)
          if (json && report !== undefined) yield* Console.log(JSON.stringify(report, null, 2))
          return
        }
        const report = yield* AutoGc.collectWithMemos(
          maintenance,
          global,
          Option.isSome(targetSize) ? { targetSizeBytes: targetSize.value } : {}
        )
        if (json) return yield* Console.log(JSON.stringify(report, null, 2))
        yield* Console.log(
          `removed ${report.removedEntries} entries (${Size.format(report.removedBytes)}), ` +
            `${report.sharedTreesRemoved} shared trees, ${report.strayFilesRemoved} stray files and ` +
            `${report.goneDirectoryFiles} records of directories that are gone ` +
            `(${Size.format(report.goneDirectoryBytes)}): ${Size.format(report.beforeBytes)} -> ` +
            `${Size.format(report.afterBytes)} (target ${Size.format(report.targetBytes)})`
        )
        if (!report.reachedTarget) {
          yield* Console.log(
            `the target was not reached: ${Size.format(report.leasedBytes)} are leased by recent runs`
          )
        }
      }))
).pipe(Command.withDescription(STORE_COMMANDS.gc))

const stats = Command.make(
  "stats",
  { ...cliOptions(STORE_COMMAND_OPTIONS.stats), ...storeOptions },
  ({ json, ...global }) =>
    withMaintenance(global, (maintenance) =>
      Effect.gen(function*() {
        const s = yield* maintenance.stats
        const line = (name: string, k: StoreMaintenance.KindStats) =>
          `${name.padEnd(12)} ${String(k.entries).padStart(9)} entries ${
            Size.format(k.bytes).padStart(10)
          }  ${k.leased} leased`
        const cap = yield* StoreMaintenance.capOf(s.root, Option.getOrUndefined(global.storeMaxSize))
        const usage = yield* StoreMaintenance.usageOf(s.root)
        if (json) return yield* Console.log(JSON.stringify({ ...s, cap, usage }, null, 2))
        yield* Console.log([
          `store        ${s.root} (${s.shardCount} shards)`,
          `cap          ${Size.format(cap.bytes)} (${CAP_SOURCES[cap.source]}); ` +
          `holds about ${Size.format(s.files.bytes + s.largeFiles.bytes + s.directories.bytes + s.actions.bytes)}`,
          line("files", s.files),
          line("large files", s.largeFiles),
          line("directories", s.directories),
          line("actions", s.actions),
          `on disk      ${Size.format(s.diskBytes)}`,
          `readers      ${s.readers.inUse} held by other processes, ${s.readers.stale} of them stale (${s.readers.maxPerEnvironment} per environment)`
        ].join("\n"))
      }))
).pipe(Command.withDescription(STORE_COMMANDS.stats))

const CAP_SOURCES: Record<StoreMaintenance.Cap["source"], string> = {
  option: "--store-max-size",
  store: "the store's own, `kiln store cap`",
  default: "the default: the smaller of 20G and 10% of its disk"
}

const cap = Command.make(
  "cap",
  {
    size: Args.text({ name: "size" }).pipe(
      Args.withDescription("the new cap, e.g. 50G, or `default`"),
      Args.optional
    ),
    ...storeOptions
  },
  ({ size, ...global }) =>
    Effect.gen(function*() {
      const root = path.resolve(Store.defaultOptions(toStoreOptions(global)).root)
      if (Option.isSome(size)) {
        const bytes = size.value === "default" ? undefined : Size.parse(size.value)
        if (bytes !== undefined && Either.isLeft(bytes)) {
          yield* Console.error(`kiln store cap: ${bytes.left} (a size such as 50G, or \`default\`)`)
          process.exitCode = 2
          return
        }
        // The store is opened first: its root is then one kiln made (or checked), before anything is written there.
        yield* withStore(global, () => StoreMaintenance.setCap(root, bytes === undefined ? undefined : bytes.right))
      }
      const now = yield* StoreMaintenance.capOf(root)
      yield* Console.log(`${Size.format(now.bytes)} (${CAP_SOURCES[now.source]})`)
    })
).pipe(Command.withDescription(STORE_COMMANDS.cap))

/** `kiln store`'s commands, by name. */
export const storeCommands = { snapshot, materialize, cat, ls, rm, check, gc, stats, cap }

/** `kiln store`. */
export const store = Command.make("store").pipe(
  Command.withDescription(COMMANDS.store),
  Command.withSubcommands([snapshot, materialize, cat, ls, rm, check, gc, stats, cap])
)
