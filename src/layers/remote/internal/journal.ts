/**
 * The upload journal: what must go up to a remote, kept in the local store until it is there, so that uploads never
 * hold a build up and a killed run loses none of them (the next run, or `kiln remote flush`, takes them up). One
 * file per action under `<store>/remote/<endpoint>/pending/`, written whole by a rename once the result is in the
 * local store, and removed only after the server has the action's blobs and then its `ActionResult`.
 *
 * @internal
 */
import * as Effect from "effect/Effect"
import { createHash } from "node:crypto"
import * as fs from "node:fs"
import * as path from "node:path"
import type * as Digest from "../../../domain/Digest.js"
import * as AtomicFile from "../../../os/AtomicFile.js"
import { mkdirp } from "../../../os/Mkdirp.js"
import * as Layout from "../../store/Layout.js"
import type { Entry, Outputs } from "./results.js"

export interface Pending {
  readonly action: Digest.Digest
  /** The serialized `Action` and `Command`: uploaded with the outputs, as Bazel does, so the entry can be explained. */
  readonly actionBytes: Uint8Array
  readonly commandBytes: Uint8Array
  readonly outputs: Outputs
  readonly entry: Entry
}

/** The journal of one endpoint (and instance name) in one store. */
export const directoryOf = (storeRoot: string, endpoint: string, instanceName: string): string =>
  path.join(
    Layout.ownedDirectory(storeRoot, "remote"),
    createHash("sha256").update(`${endpoint}\n${instanceName}`).digest("hex").slice(0, 16),
    "pending"
  )

const fileOf = (dir: string, action: Digest.Digest) => path.join(dir, `${action.hash}-${action.sizeBytes}.json`)

export const write = (dir: string, pending: Pending): Effect.Effect<void, Error> =>
  Effect.try({
    try: () => {
      mkdirp(dir, 0o700)
      AtomicFile.write(
        fileOf(dir, pending.action),
        JSON.stringify({
          action: pending.action,
          actionBytes: Buffer.from(pending.actionBytes).toString("base64"),
          commandBytes: Buffer.from(pending.commandBytes).toString("base64"),
          outputs: pending.outputs,
          entry: pending.entry
        })
      )
    },
    catch: (e) => e as Error
  })

/** The actions waiting, oldest first. */
export const list = (dir: string): Array<Digest.Digest> => {
  let names: Array<string>
  try {
    names = fs.readdirSync(dir)
  } catch {
    return []
  }
  const out: Array<{ digest: Digest.Digest; mtime: number }> = []
  for (const name of names) {
    const m = /^([0-9a-f]{64})-(\d+)\.json$/.exec(name)
    if (m === null) continue
    let mtime = 0
    try {
      mtime = fs.statSync(path.join(dir, name)).mtimeMs
    } catch {
      continue // Taken up by another process meanwhile.
    }
    out.push({ digest: { hash: m[1]!, sizeBytes: Number(m[2]) }, mtime })
  }
  return out.sort((a, b) => a.mtime - b.mtime).map((x) => x.digest)
}

export const count = (dir: string): number => list(dir).length

/** One pending upload; undefined when it is gone (another process took it up) or unreadable (then removed). */
export const read = (dir: string, action: Digest.Digest): Pending | undefined => {
  const file = fileOf(dir, action)
  let json: any
  try {
    json = JSON.parse(fs.readFileSync(file, "utf8"))
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== "ENOENT") fs.rmSync(file, { force: true })
    return undefined
  }
  return {
    action: json.action,
    actionBytes: Buffer.from(json.actionBytes, "base64"),
    commandBytes: Buffer.from(json.commandBytes, "base64"),
    outputs: json.outputs,
    entry: json.entry
  }
}

export const remove = (dir: string, action: Digest.Digest): void => fs.rmSync(fileOf(dir, action), { force: true })
