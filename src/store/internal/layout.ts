/**
 * The store's layout file, `kiln-store.json`: its format and shard count, fixed when the store is created.
 *
 * @internal
 */
import * as Effect from "effect/Effect"
import * as fs from "node:fs"
import * as path from "node:path"
import { StoreConfigConflict, StoreError } from "../../domain/StoreErrors.js"
import { errnoOf } from "../../os/Errno.js"
import { ioError } from "../../os/IoError.js"
import { mkdirp } from "../../os/Mkdirp.js"

const LAYOUT = "kiln-store.json"
const FORMAT = 1

interface Layout {
  readonly format: number
  readonly shardCount: number
}

/**
 * The store records its layout on creation; opening it with another shard count would look for every digest in
 * the wrong shard, so it is refused. Two creators racing agree through `link`, which never replaces.
 *
 * @internal
 */
export const ensureLayout = (root: string, shardCount: number): Effect.Effect<void, StoreError | StoreConfigConflict> =>
  Effect.suspend((): Effect.Effect<void, StoreError | StoreConfigConflict> => {
    const file = path.join(root, LAYOUT)
    const read = (): Layout | undefined => {
      try {
        return JSON.parse(fs.readFileSync(file, "utf8")) as Layout
      } catch (e) {
        if (errnoOf(e) === "ENOENT") return undefined
        throw e
      }
    }
    try {
      // Private to its user when kiln makes it (it holds every cached blob and log); a store shared by a group is
      // one its owner made so, and keeps its mode.
      mkdirp(root, 0o700)
      let layout = read()
      if (layout === undefined) {
        const tmp = `${file}.${process.pid}.${Date.now()}.tmp`
        fs.writeFileSync(tmp, JSON.stringify({ format: FORMAT, shardCount }) + "\n", { mode: 0o644 })
        try {
          fs.linkSync(tmp, file)
        } catch (e) {
          if (errnoOf(e) !== "EEXIST") throw e
        } finally {
          fs.unlinkSync(tmp)
        }
        layout = read()!
      }
      if (layout.format !== FORMAT) {
        return Effect.fail(
          new StoreError({ reason: "Unsupported", detail: `unknown store format ${layout.format}`, path: file })
        )
      }
      if (layout.shardCount !== shardCount) {
        return Effect.fail(
          new StoreConfigConflict({
            path: root,
            setting: "shardCount",
            existing: String(layout.shardCount),
            requested: String(shardCount)
          })
        )
      }
      return Effect.void
    } catch (e) {
      return Effect.fail(
        e instanceof SyntaxError
          ? new StoreError({ reason: "Corrupt", detail: "the layout file is not valid JSON", path: file })
          : ioError(root, "cannot open the store")(e)
      )
    }
  })
