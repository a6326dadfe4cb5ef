/**
 * The Engine as a library: what keeps a process from producing a result is in its report as a typed error, so a
 * caller can match on it; a tool that exits non-zero is a result, with no error.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Either, Layer } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"
import { parse } from "../../src/domain/config/Config.js"
import * as Engine from "../../src/layers/engine/Engine.js"
import { stack } from "../utils/stack.js"
import { tempDir, writeTree } from "../utils/temp.js"

describe("Engine (library)", () => {
  it.scopedLive("a report carries what kept each process from a result as a typed error", () =>
    Effect.gen(function*() {
      const root = yield* tempDir("kiln-engine-")
      const workspace = path.join(root, "ws")
      writeTree(workspace, { "src/a.txt": "a" })
      const config = Either.getOrThrow(parse(
        "build.json",
        JSON.stringify({
          processes: {
            ok: { argv: ["/bin/sh", "-c", "cat src/a.txt"], inputs: ["src/*.txt"], env: { PATH: "/usr/bin:/bin" } },
            fails: { argv: ["/bin/sh", "-c", "exit 3"], env: { PATH: "/usr/bin:/bin" } },
            typo: { argv: ["/bin/true"], inputs: ["sources/*.txt"] },
            missing: { argv: [path.join(root, "no-such-tool")] }
          }
        })
      ))
      fs.mkdirSync(path.join(root, "sandboxes"))
      const report = yield* Effect.flatMap(
        Engine.Engine,
        (engine) => engine.run({ workspace, config, keepGoing: true, configName: "build.json" })
      ).pipe(Effect.provide(Engine.layer.pipe(Layer.provideMerge(stack({ root })))))
      const of = (name: string) => report.processes.find((p) => p.name === name)!
      assert.isTrue(of("ok").ok)
      assert.isUndefined(of("ok").error)
      assert.strictEqual(of("fails").exitCode, 3)
      assert.isUndefined(of("fails").error, "a tool's exit is a result, not an error")
      assert.strictEqual(of("typo").error?._tag, "InvalidConfig")
      assert.strictEqual(
        of("typo").detail,
        `build.json: processes.typo.inputs[0]: glob "sources/*.txt" matches nothing`
      )
      assert.strictEqual(of("missing").error?._tag, "SpawnError")
      assert.match(of("missing").detail ?? "", /^missing: cannot run `.*no-such-tool`/)
    }))
})
