/**
 * The store's generation: a token that changes before anything is taken out of the store (GC, `store rm`, a corrupt
 * entry removed, a shard set aside). A store only grows between two changes of it, so what a run found in the store
 * under one generation is still there while the token is the same: the run memo relies on that to skip every store
 * read of a run where nothing changed. (An action-cache entry replaced by a re-run does not move it: the result it
 * replaces is as valid a run of the same action, and its bytes are still there.)
 *
 * A plain file, so that it can be read without opening LMDB (the no-op check runs before the engine is loaded).
 *
 * The no-op check also needs to know that the store's LMDB files are the ones it saw, which `fingerprint` and `holds`
 * say, so that the engine does not know how the store lays them out.
 */
import * as fs from "node:fs"
import * as path from "node:path"
import * as AtomicFile from "../../os/AtomicFile.js"
import { randomHex } from "../../os/LazyCrypto.js"
import { readOwnFile } from "../../os/TextFile.js"

const fileOf = (storeRoot: string) => path.join(storeRoot, "generation")

/**
 * The current token; "" when the store has none yet (nothing was ever removed), or it cannot be read.
 */
export const read = (storeRoot: string): string => {
  try {
    return readOwnFile(fileOf(storeRoot), 4096) ?? ""
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
  AtomicFile.write(fileOf(storeRoot), randomHex(12))
}

const KINDS = ["files", "directories", "actions"] as const

/**
 * The store's LMDB data files, each as `[path under the root, dev, ino, size]`: what `holds` compares later.
 */
export type Fingerprint = Array<[string, string, string, number]>

export const fingerprint = (storeRoot: string): Fingerprint => {
  const out: Fingerprint = []
  for (const kind of KINDS) {
    let shards: Array<string>
    try {
      shards = fs.readdirSync(path.join(storeRoot, kind))
    } catch {
      continue
    }
    for (const shard of shards) {
      const rel = `${kind}/${shard}/data.mdb`
      const st = fs.statSync(path.join(storeRoot, rel), { bigint: true, throwIfNoEntry: false })
      if (st !== undefined) out.push([rel, String(st.dev), String(st.ino), Number(st.size)])
    }
  }
  return out
}

/**
 * Whether the store is the one seen under `seen.generation` with `seen.files`: the same generation, and the same
 * LMDB files, none shorter (LMDB files only grow; a truncated or replaced one is damage a full run must see and
 * report), all writable. Undefined when it holds, else why not.
 */
export const holds = (
  storeRoot: string,
  seen: { readonly generation: string; readonly files: ReadonlyArray<readonly [string, string, string, number]> }
): string | undefined => {
  if (read(storeRoot) !== seen.generation) return "the store has changed (something was removed from it)"
  for (const [rel, dev, ino, size] of seen.files) {
    const file = path.join(storeRoot, rel)
    const st = fs.statSync(file, { bigint: true, throwIfNoEntry: false })
    if (st === undefined || String(st.dev) !== dev || String(st.ino) !== ino || Number(st.size) < size) {
      return `the store file ${rel} has changed`
    }
    // A store this user cannot open for writing fails the full run: the answer must be the same.
    try {
      fs.accessSync(file, fs.constants.W_OK)
    } catch {
      return `cannot write the store file ${rel}`
    }
  }
  return undefined
}
