/**
 * The store's generation: a token that changes before anything is taken out of the store (GC, `store rm`, a corrupt
 * entry removed, a shard set aside). A store only grows between two changes of it, so what a run found in the store
 * under one generation is still there while the token is the same: the run memo relies on that to skip every store
 * read of a run where nothing changed. (An action-cache entry replaced by a re-run does not move it: the result it
 * replaces is as valid a run of the same action, and its bytes are still there.)
 *
 * A plain file, so that it can be read without opening LMDB (the no-op check runs before the engine is loaded).
 *
 * @internal
 */
import { randomBytes } from "node:crypto"
import * as fs from "node:fs"
import * as path from "node:path"
import * as AtomicFile from "../os/AtomicFile.js"

const fileOf = (storeRoot: string) => path.join(storeRoot, "generation")

/** The current token; "" when the store has none yet (nothing was ever removed), or it cannot be read. @internal */
export const read = (storeRoot: string): string => {
  try {
    return fs.readFileSync(fileOf(storeRoot), "utf8")
  } catch {
    return ""
  }
}

/**
 * Moves the store to a new generation. Called before a removal: a run that read the old token before it may have
 * seen the removed bytes, and its memo then carries the old token, which no longer matches. A failure to write it
 * is thrown, and the removal must not go ahead (a memo would keep trusting bytes that are gone).
 *
 * @internal
 */
export const bump = (storeRoot: string): void => {
  AtomicFile.write(fileOf(storeRoot), randomBytes(12).toString("hex"))
}
