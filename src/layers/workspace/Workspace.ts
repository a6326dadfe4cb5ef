/**
 * The user's workspace as a place outputs are written: the one owner of write-back. It writes a process's declared
 * outputs and nothing else, never through a symlink, and takes each file a sandbox just made from the sandbox
 * concern's hand-off (renamed into place, not written again) rather than from the store.
 *
 * Its own concern, not the engine's or the sandbox's: its rules are the workspace's (what may be written, made,
 * listed or removed there), the engine only says what to write, and the sandboxes only lend the files they made.
 *
 * @since 0.1.0
 */
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import type * as Digest from "../../domain/Digest.js"
import type { StoreError } from "../../domain/StoreErrors.js"
import type { InvalidOutput } from "../../domain/TreeErrors.js"
import { Sandboxes } from "../sandbox/Sandboxes.js"
import type { SnapshotObservation } from "../store/SnapshotObservation.js"
import type { SnapshotSession } from "../store/SnapshotSession.js"
import { Store } from "../store/Store.js"
import * as WriteBack from "./internal/writeBack.js"

/**
 * Where a write-back writes, and what it may do there.
 *
 * @since 0.1.0
 * @category models
 */
export interface Destination {
  /** The workspace: the user's, trusted as a path. */
  readonly workspace: string
  /** The process's working directory in it, which the output tree's paths are relative to ("" for the top). */
  readonly workingDirectory: string
  /** The declared output directories (relative to the working directory): each made to hold exactly the output's. */
  readonly declaredDirectories: ReadonlyArray<string>
  /**
   * Directories to rid of the temp files of dead kilns beside outputs (a kiln died during its write-back): each is
   * listed once, then added here. Absent: none is listed (declared directories are rid of them by their prune).
   */
  readonly sweep?: Set<string>
}

/**
 * @since 0.1.0
 * @category models
 */
export interface Service {
  /**
   * Writes the output tree `outputs` (in the store) into the workspace. Nothing outside the output's own paths is
   * written, made, listed or removed, whatever the workspace or the tree holds; a file already holding the bytes is
   * left alone (the session's stat index answers without reading it, and learns what was written). Says each output
   * it left in the workspace with its stat, and each declared directory's listing.
   */
  readonly writeBack: (
    outputs: Digest.Digest,
    destination: Destination,
    session?: SnapshotSession
  ) => Effect.Effect<Array<SnapshotObservation>, StoreError | Digest.MissingDigest | InvalidOutput>
}

/**
 * @since 0.1.0
 * @category tags
 */
export class Workspace extends Context.Tag("kiln/Workspace")<Workspace, Service>() {}

/**
 * @since 0.1.0
 * @category constructors
 */
export const make: Effect.Effect<Service, never, Store | Sandboxes> = Effect.gen(function*() {
  const store = yield* Store
  const { handoff } = yield* Sandboxes
  return {
    writeBack: (outputs, destination, session) => WriteBack.writeBack(store, outputs, destination, session, handoff)
  }
})

/**
 * @since 0.1.0
 * @category layers
 */
export const layer: Layer.Layer<Workspace, never, Store | Sandboxes> = Layer.effect(Workspace, make)
