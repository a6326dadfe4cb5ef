/**
 * A run taken on by a standby ends for its user once its outcome is decided and said: the processes ran, their
 * outputs are in the workspace, the run memo is written, the workspace lock is given back, and every line of the
 * report is out. What the engine's stack then closes (the store's background writes, its LMDB environments synced and
 * closed, the spawner and sandboxer ended) makes the results durable and tidies up, but cannot change them: the
 * standby starts the next one and sends the client its exit code at once (`standby/serve.ts`), while this process
 * does that.
 *
 * A machine that goes down in between is the case the store's unsynced marker is for (`lmdb/unsynced.ts`): the next
 * run refuses the shards that may be torn, naming `kiln store check --repair`, as after any crash during a run. A run
 * whose closing would still have something to say or wait for (a collection to start over the store's cap, or
 * `KILN_STORE_GC=wait`) is released at its very end, as before.
 */
import * as Effect from "effect/Effect"
import * as Store from "../../../layers/store/Store.js"
import * as StoreMaintenance from "../../../layers/store/StoreMaintenance.js"
import type { StoreFlags } from "../../common/storeFlags.js"
import * as AutoGc from "../autoGc.js"
import * as Protocol from "../standby/protocol.js"

/** Sends the client of a standby's run its exit code now, if this run is one and its closing will stay quiet. */
export const releaseEarly = (flags: StoreFlags) =>
  Effect.gen(function*() {
    const release = (globalThis as Record<symbol, unknown>)[Protocol.RELEASE] as Protocol.Release | undefined
    if (release === undefined) return
    const store = yield* Store.Store
    if (!(yield* AutoGc.staysQuiet(flags, StoreMaintenance.addedSoFar(store)))) return
    release(Number(process.exitCode ?? 0) || 0)
  })
