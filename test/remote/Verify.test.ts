/**
 * `kiln verify --remote-cache` against Bazel's worker (`scripts/remote/servers.sh`): one machine fills the cache,
 * another verifies the server's entries, re-running each process here, without writing anything into its own cache
 * or the server's.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"
import { hostileWorkspace } from "../utils/hostile/workspace.js"
import { remoteServers } from "../utils/remote.js"
import { namespace } from "./workspace.js"

const configOf = (ns: string) => ({
  cacheNamespace: ns,
  processes: {
    time: {
      argv: ["/bin/sh", "-c", "date +%s%N > time.txt"],
      outputs: ["time.txt"],
      env: { PATH: "/usr/bin:/bin" }
    },
    same: {
      argv: ["/bin/sh", "-c", "echo same > same.txt"],
      outputs: ["same.txt"],
      env: { PATH: "/usr/bin:/bin" }
    }
  }
})

interface Verified {
  readonly processes: ReadonlyArray<{ readonly name: string; readonly status: string }>
}

const statuses = (stdout: string) => (JSON.parse(stdout) as Verified).processes.map((p) => [p.name, p.status] as const)

describe("kiln verify --remote-cache", () => {
  it.scoped(
    "verifies the server's entries on another machine; nothing is written into either cache",
    () =>
      Effect.gen(function*() {
        const url = remoteServers().reapiUrl
        const config = configOf(namespace())
        const ci = yield* hostileWorkspace(config)
        const filled = yield* ci.kiln(["run", "--remote-cache", url])
        assert.strictEqual(filled.code, 0, filled.stderr)
        assert.strictEqual(filled.summary!.pendingUploads, 0, filled.stderr)

        const laptop = yield* hostileWorkspace(config)
        const v = yield* laptop.kiln(["verify", "--remote-cache", url, "--json"])
        assert.strictEqual(v.code, 1, v.stderr)
        assert.deepStrictEqual(statuses(v.stdout), [["time", "differs"], ["same", "reproduced"]])
        // The remote's entries were compared, not copied: the laptop's own cache is as empty as before.
        const local = yield* laptop.kiln(["verify", "--json"])
        assert.strictEqual(local.code, 0, local.stderr)
        assert.deepStrictEqual(statuses(local.stdout), [["time", "not-cached"], ["same", "not-cached"]])
        // Nor did verifying replace the server's entry: `time` is still the CI machine's result there.
        const evict = yield* laptop.kiln(["verify", "time", "--remote-cache", url, "--evict"])
        assert.strictEqual(evict.code, 1, evict.stderr)
        assert.match(evict.stderr, /the entries on grpc:\/\/127\.0\.0\.1:\d+ stay/)
        const hit = yield* hostileWorkspace(config)
        const again = yield* hit.kiln(["run", "--remote-cache", url])
        assert.strictEqual(again.summary!.remoteCacheHits, 2, again.stderr)
        const timeOf = (ws: string) => fs.readFileSync(path.join(ws, "time.txt"), "utf8")
        assert.strictEqual(timeOf(hit.ws), timeOf(ci.ws))
      }),
    { timeout: 120_000 }
  )
})
