/**
 * The store's layout file, `kiln-store.json`: its format and shard count, fixed when the store is created.
 *
 * @internal
 */
import * as Effect from "effect/Effect"
import * as fs from "node:fs"
import * as path from "node:path"
import { StoreConfigConflict, StoreError } from "../../../domain/StoreErrors.js"
import { UnsafeDirectory } from "../../../domain/UnsafeDirectory.js"
import { errnoOf } from "../../../os/Errno.js"
import { ioError } from "../../../os/IoError.js"
import * as PrivateDir from "../../../os/PrivateDir.js"
import { readOwnFile } from "../../../os/TextFile.js"
import { LAYOUT_FILE } from "../Layout.js"
import * as Usage from "./usage.js"

const FORMAT = 1

interface Layout {
  readonly format: number
  readonly shardCount: number
}

/**
 * The shard count of a store made without one. Fewer shards mean fewer commits per process (one per shard its
 * writes touch) and fewer environments to create and open; more mean more writers at once. Four keep four writers
 * per kind and 4 × 16 GiB of small files (see report.md, "Issue #25, session 19", for the measurements).
 *
 * @internal
 */
export const DEFAULT_SHARD_COUNT = 4

/**
 * The store records its layout on creation, and returns its shard count: the one asked for, or when none is, the
 * store's own (else {@link DEFAULT_SHARD_COUNT} for a new store), so that a store keeps whatever count it was made
 * with. Opening it with another count would look for every digest in the wrong shard, so it is refused. Two
 * creators racing agree through `link`, which never replaces. A root another user owns or can write (or could swap)
 * is refused before anything in it is read: whoever can write it can put any result in the action cache.
 *
 * @internal
 */
/** The layout file is one line of JSON: anything larger is not one. */
const LARGEST_LAYOUT = 64 * 1024

export const ensureLayout = (
  root: string,
  shardCount: number | undefined
): Effect.Effect<number, StoreError | StoreConfigConflict | UnsafeDirectory> =>
  Effect.suspend((): Effect.Effect<number, StoreError | StoreConfigConflict | UnsafeDirectory> => {
    const file = path.join(root, LAYOUT_FILE)
    const read = (): Layout | undefined => {
      const text = readOwnFile(file, LARGEST_LAYOUT)
      return text === undefined ? undefined : JSON.parse(text) as Layout
    }
    try {
      // Private to its user when kiln makes it (it holds every cached blob and log); a store shared by a group is
      // one its owner made so (setgid, group-writable), and keeps its mode.
      const unsafe = PrivateDir.ensure(root, "group")
      if (unsafe !== undefined) return Effect.fail(new UnsafeDirectory({ role: "store root", root, ...unsafe }))
      let layout = read()
      if (layout === undefined) {
        const tmp = `${file}.${process.pid}.${Date.now()}.tmp`
        const made = shardCount ?? DEFAULT_SHARD_COUNT
        fs.writeFileSync(tmp, JSON.stringify({ format: FORMAT, shardCount: made }) + "\n", { mode: 0o644 })
        let created = false
        try {
          fs.linkSync(tmp, file)
          created = true
        } catch (e) {
          if (errnoOf(e) !== "EEXIST") throw e
        } finally {
          fs.unlinkSync(tmp)
        }
        // A new store holds nothing: its record of what it holds starts from that measure (see `usage.ts`).
        if (created) Usage.startRecord(root)
        layout = read()!
      }
      if (layout.format !== FORMAT) {
        return Effect.fail(
          new StoreError({ reason: "Unsupported", detail: `unknown store format ${layout.format}`, path: file })
        )
      }
      if (!Number.isInteger(layout.shardCount)) {
        return Effect.fail(
          new StoreError({ reason: "Corrupt", detail: "the layout file has no shard count", path: file })
        )
      }
      if (shardCount !== undefined && layout.shardCount !== shardCount) {
        return Effect.fail(
          new StoreConfigConflict({
            path: root,
            setting: "shardCount",
            existing: String(layout.shardCount),
            requested: String(shardCount)
          })
        )
      }
      return Effect.succeed(layout.shardCount)
    } catch (e) {
      return Effect.fail(
        e instanceof SyntaxError
          ? new StoreError({ reason: "Corrupt", detail: "the layout file is not valid JSON", path: file })
          : ioError(root, "cannot open the store")(e)
      )
    }
  })
