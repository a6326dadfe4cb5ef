/**
 * `kiln run`'s two parsers agree: the direct one (`directRunArgs`, for plain arguments, without @effect/cli) gives
 * exactly what @effect/cli gives, defaults included, and leaves to @effect/cli whatever it does not read plainly.
 */
import * as Command from "@effect/cli/Command"
import * as NodeContext from "@effect/platform-node/NodeContext"
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { directRunArgs, type RunArgs, runConfig } from "../../src/cli/runCommand.js"

/** What @effect/cli hands `kiln run`'s handler for these arguments. */
const viaCli = (args: ReadonlyArray<string>) =>
  Effect.gen(function*() {
    let seen: RunArgs | undefined
    const run = Command.make("run", runConfig, (o) => Effect.sync(() => void (seen = o)))
    const kiln = Command.make("kiln").pipe(Command.withSubcommands([run]))
    yield* Command.run(kiln, { name: "kiln", version: "test" })(["node", "kiln", ...args])
    return seen
  }).pipe(Effect.provide(NodeContext.layer))

const plain: ReadonlyArray<ReadonlyArray<string>> = [
  ["run"],
  ["run", "a", "b"],
  ["run", "--store-dir", "/tmp/s", "--progress", "none"],
  ["run", "--config", "sub/kiln.json", "--concurrency", "3", "--cache", "read", "--cache-content", "defer"],
  ["run", "--keep-going", "--max-backtracks", "5", "--summary", "out.json", "--keep-sandboxes", "on-failure"],
  ["run", "--reuse-sandboxes", "off"],
  ["run", "--reuse-sandboxes=on", "a"],
  ["run", "--sandbox-root=/tmp/sb", "--named-caches-dir", "/tmp/nc", "target"],
  ["run", "--progress", "plain", "--", "x", "y"],
  ["run", "a", "--keep-going", "b", "--concurrency=2"]
]

describe("kiln run's arguments", () => {
  for (const args of plain) {
    it.effect(`read directly as @effect/cli reads them: ${args.join(" ")}`, () =>
      Effect.gen(function*() {
        const direct = directRunArgs(args)
        assert.isDefined(direct, "not read directly")
        assert.deepStrictEqual(direct, yield* viaCli(args))
      }))
  }

  it("anything else is left to @effect/cli", () => {
    for (
      const args of [
        ["run", "--help"],
        ["run", "--trace", "t.json"],
        ["run", "--store-shards", "8"],
        ["run", "--concurrency", "0"],
        ["run", "--cache", "off"],
        ["run", "--progress", "loud"],
        ["run", "--keep-going", "true"],
        ["run", "--store-dir", "/a", "--store-dir", "/b"],
        ["exec", "--", "true"],
        ["run", "-v"]
      ]
    ) assert.isUndefined(directRunArgs(args), args.join(" "))
  })
})
