/**
 * A process with a pass-through variable under a remote executor: it runs here (its value would travel in the
 * command), the rest still run remotely, and nothing sent to the remote (its call log) holds the value. Needs the
 * remote servers (`scripts/remote/servers.sh`).
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"
import { remoteServers } from "../utils/remote.js"
import { machine, namespace } from "./workspace.js"

const PATH = { PATH: "/usr/local/bin:/usr/bin:/bin" }

describe("remote execution and passThroughEnv", () => {
  it.scoped("a process with a pass-through variable runs locally; its value reaches nothing remote", () =>
    Effect.gen(function*() {
      const secret = `pass-through-${namespace()}`
      const m = yield* machine(namespace(), {
        extra: {
          token: {
            argv: ["/bin/sh", "-c", "printf %s \"$TOKEN\" | wc -c > token-length.txt"],
            outputs: ["token-length.txt"],
            passThroughEnv: ["TOKEN"],
            env: PATH
          }
        }
      })
      const log = path.join(m.root, "remote.jsonl")
      const r = yield* m.run(["--remote-executor", remoteServers().reapiUrl, "--remote-log", log], { TOKEN: secret })
      assert.strictEqual(r.code, 0, r.stderr)
      const byName = Object.fromEntries(r.summary!.processes.map((p) => [p.name, p.source]))
      assert.strictEqual(byName.token, "ran")
      assert.strictEqual(byName.gen, "remote")
      assert.strictEqual(fs.readFileSync(path.join(m.ws, "token-length.txt"), "utf8").trim(), String(secret.length))
      assert.isTrue(fs.existsSync(log))
      assert.notInclude(fs.readFileSync(log, "utf8"), secret)
      assert.notInclude(r.stderr, secret)
    }))
})
