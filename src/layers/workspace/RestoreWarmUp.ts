/**
 * A restore done once on a throwaway store and workspace, so that the next real one meets code V8 has already run. A
 * standby engine does it while it waits (`programs/kiln/standby/`): a restore's store, snapshot and write-back were
 * otherwise the interpreter's first run of that code, inside the client's wait (a write-back of 58 paths and their
 * tree's listing took ~14 ms the first time in a process and ~3 ms the next: bench-log, session 51).
 *
 * Nothing of the user's is read or written: the store, the files snapshotted and the workspaces written are made in
 * a directory of its own under `parent` and removed with it, and the store's environments are not among those a
 * standby is told to open ahead (`store/OpenedEnvs.ts`). A warm-up whose process was killed midway (a standby
 * stopped while it warmed up) is removed by the next one under the same parent.
 */
import * as Effect from "effect/Effect"
import * as fs from "node:fs"
import * as path from "node:path"
import type * as Digest from "../../domain/Digest.js"
import type { StoreConfigConflict, StoreError } from "../../domain/StoreErrors.js"
import type { InvalidOutput } from "../../domain/TreeErrors.js"
import type { UnsafeDirectory } from "../../domain/UnsafeDirectory.js"
import { ioError } from "../../os/IoError.js"
import * as Proc from "../../os/Proc.js"
import * as OpenedEnvs from "../store/OpenedEnvs.js"
import * as Store from "../store/Store.js"
import * as WriteBack from "./internal/writeBack.js"

/** The directories of warm-ups under their parent: `warm-up-<pid>-<start time>-<random>`. */
const PREFIX = "warm-up-"

/**
 * What a build's output looks like to a write-back: a declared `dist/` of a few directories of small modules and their
 * maps, one larger file, an executable, a symlink.
 */
const writeOutputs = (dir: string) => {
  for (let d = 0; d < 4; d++) {
    const sub = path.join(dir, "dist", d === 0 ? "" : `chunk-${d}`)
    fs.mkdirSync(sub, { recursive: true })
    for (let f = 0; f < 12; f++) {
      const text = `export const value${f} = ${JSON.stringify(`${d}:${f}`)}\n`.repeat(f + 1)
      fs.writeFileSync(path.join(sub, `module-${f}.js`), text)
      fs.writeFileSync(path.join(sub, `module-${f}.js.map`), JSON.stringify({ version: 3, sources: [`${f}.ts`] }))
    }
  }
  fs.writeFileSync(path.join(dir, "dist", "bundle.js"), "// a bundle\n".repeat(4096))
  fs.writeFileSync(path.join(dir, "dist", "cli.js"), "#!/usr/bin/env node\n", { mode: 0o755 })
  fs.symlinkSync("bundle.js", path.join(dir, "dist", "index.js"))
}

/**
 * Removes the warm-ups that processes which have ended left under `parent` (killed while they ran): the pid and its
 * start time in the name, so that a pid given to another process since does not keep one.
 */
const removeAbandoned = (parent: string) => {
  for (const name of fs.readdirSync(parent)) {
    if (!name.startsWith(PREFIX)) continue
    const [pid, startTime] = name.slice(PREFIX.length).split("-")
    const owner = { pid: Number(pid), startTime: startTime ?? "" }
    if (Number.isSafeInteger(owner.pid) && owner.pid > 0 && !Proc.ownerAlive(owner)) {
      fs.rmSync(path.join(parent, name), { recursive: true, force: true })
    }
  }
}

const restoreInto = (store: Store.Service, outputs: Digest.Digest, workspace: string) =>
  Effect.zipRight(
    Effect.try({ try: () => fs.mkdirSync(workspace), catch: ioError(workspace, "cannot make a workspace") }),
    WriteBack.writeBack(store, outputs, { workspace, workingDirectory: "", declaredDirectories: ["dist"] })
  )

/**
 * Snapshots a made-up build output into a new store in a directory of its own under `parent` (a private directory:
 * the standby's runtime directory), writes it back three times (twice into empty workspaces, once over itself, as a
 * restore of outputs partly there does), then removes the directory, whatever happened. Gives how many paths each
 * write-back left in place.
 */
export const run = (
  parent: string
): Effect.Effect<
  ReadonlyArray<number>,
  StoreError | StoreConfigConflict | UnsafeDirectory | InvalidOutput | Digest.MissingDigest
> =>
  Effect.acquireUseRelease(
    Effect.try({
      try: () => {
        removeAbandoned(parent)
        const me = Proc.self()
        return fs.mkdtempSync(path.join(parent, `${PREFIX}${me.pid}-${me.startTime}-`))
      },
      catch: ioError(parent, "cannot make a directory for the warm-up")
    }),
    (dir) =>
      Effect.scoped(Effect.gen(function*() {
        const store = yield* Store.make({ root: path.join(dir, "store") })
        const made = path.join(dir, "made")
        yield* Effect.try({ try: () => writeOutputs(made), catch: ioError(made, "cannot write the warm-up's files") })
        const outputs = yield* store.snapshot(made)
        const first = yield* restoreInto(store, outputs, path.join(dir, "first"))
        const second = yield* restoreInto(store, outputs, path.join(dir, "second"))
        const over = yield* WriteBack.writeBack(store, outputs, {
          workspace: path.join(dir, "second"),
          workingDirectory: "",
          declaredDirectories: ["dist"]
        })
        return [first, second, over].map((observed) => observed.length)
      })),
    (dir) =>
      Effect.sync(() => {
        OpenedEnvs.forgetUnder(dir)
        try {
          fs.rmSync(dir, { recursive: true, force: true })
        } catch {
          // Left for the next warm-up under `parent`, which removes what a process that has ended left.
        }
      })
  )
