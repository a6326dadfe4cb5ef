/**
 * `kiln run`'s two parsers agree: the direct one (`directRunArgs`, for plain arguments, without @effect/cli) gives
 * exactly what @effect/cli gives, defaults included, and leaves to @effect/cli whatever it does not read plainly.
 */
import * as Command from "@effect/cli/Command"
import * as NodeContext from "@effect/platform-node/NodeContext"
import { assert, describe, it } from "@effect/vitest"
import { Console, Effect, Either, FastCheck } from "effect"
import { type OptionSpec } from "../../src/programs/common/optionSpec.js"
import { directRunArgs, type RunArgs, runConfig } from "../../src/programs/kiln/commands/runCommand.js"
import { RUN_OPTIONS } from "../../src/programs/kiln/optionTable.js"

/** What @effect/cli hands `kiln run`'s handler for these arguments (undefined: it printed help instead). */
const viaCli = (args: ReadonlyArray<string>) =>
  Effect.gen(function*() {
    let seen: RunArgs | undefined
    const run = Command.make("run", runConfig, (o) => Effect.sync(() => void (seen = o)))
    const kiln = Command.make("kiln").pipe(Command.withSubcommands([run]))
    yield* Command.run(kiln, { name: "kiln", version: "test" })(["node", "kiln", ...args])
    return seen
  }).pipe(Effect.provide(NodeContext.layer))

/** Whether @effect/cli takes these arguments, and what it hands the handler; its usage errors are not printed. */
const cliVerdict = (args: ReadonlyArray<string>) =>
  Console.consoleWith((console) =>
    Effect.either(viaCli(args)).pipe(
      Effect.map(Either.flatMap((seen) => seen === undefined ? Either.left("help") : Either.right(seen))),
      Console.withConsole({ ...console, log: () => Effect.void, error: () => Effect.void })
    )
  )

const specs = Object.values(RUN_OPTIONS) as ReadonlyArray<OptionSpec>

/** Values an option is given: ones the direct reader takes, and ones only @effect/cli takes or nobody does. */
const valuesFor = (spec: OptionSpec): ReadonlyArray<string> => {
  switch (spec.kind) {
    case "choice":
      return [...spec.choices, "loud", ""]
    case "integer":
      return ["1", "3", "64", "0", "007", "-2", "x"]
    case "boolean":
      return []
    case "size":
      return ["1G", "12Q"]
    case "duration":
      return ["90s", "soon"]
    default:
      return ["sub/kiln.json", "/tmp/x", "", "-"]
  }
}

/** One option as a user writes it: `--flag value` or `--flag=value`, a flag alone, and flags with stray values. */
const anyOption: FastCheck.Arbitrary<ReadonlyArray<string>> = FastCheck.constantFrom(...specs).chain((spec) =>
  spec.kind === "boolean"
    ? FastCheck.constantFrom([`--${spec.flag}`], [`--${spec.flag}`, "true"], [`--${spec.flag}=no`])
    : FastCheck.tuple(FastCheck.constantFrom(...valuesFor(spec)), FastCheck.boolean()).map(([value, joined]) =>
      joined ? [`--${spec.flag}=${value}`] : [`--${spec.flag}`, value]
    )
)

const name = FastCheck.constantFrom("a", "b", "lint-all")
const oddity = FastCheck.constantFrom(["--help"], ["-h"], ["--bogus"], ["-v"], ["--"], ["--", "-x"], ["--version"])
const anyArgs = FastCheck.array(
  FastCheck.oneof(anyOption, name.map((n) => [n]), oddity),
  { maxLength: 6 }
).map((parts) => ["run", ...parts.flat()])

/** Plain arguments, of the kind a user types and the direct reader must take: each option once, with a value it reads. */
const plainOption = (spec: OptionSpec): FastCheck.Arbitrary<ReadonlyArray<string>> | undefined => {
  if (spec.kind === "choice") {
    return spec.fast.length === 0 ? undefined : FastCheck.constantFrom(...spec.fast).map((v) => [`--${spec.flag}`, v])
  }
  if (!spec.fast) return undefined
  if (spec.kind === "boolean") return FastCheck.constant([`--${spec.flag}`])
  const values = spec.kind === "integer" ? ["1", "2", "16"] : ["sub/kiln.json", "/tmp/kiln x"]
  return FastCheck.tuple(FastCheck.constantFrom(...values), FastCheck.boolean()).map(([v, joined]) =>
    joined ? [`--${spec.flag}=${v}`] : [`--${spec.flag}`, v]
  )
}
const plainArgs = FastCheck.tuple(
  FastCheck.shuffledSubarray(specs.flatMap((spec) => plainOption(spec) ?? [])).chain((options) =>
    FastCheck.tuple(...options)
  ),
  FastCheck.array(name, { maxLength: 3 }),
  FastCheck.array(name, { maxLength: 2 })
).map(([options, names, afterDashes]) => [
  "run",
  ...options.flat(),
  ...names,
  ...(afterDashes.length > 0 ? ["--", ...afterDashes] : [])
])

const plain: ReadonlyArray<ReadonlyArray<string>> = [
  ["run"],
  ["run", "a", "b"],
  ["run", "--store-dir", "/tmp/s", "--progress", "none"],
  ["run", "--config", "sub/kiln.json", "--concurrency", "3", "--cache", "read", "--cache-content", "defer"],
  ["run", "--keep-going", "--max-backtracks", "5", "--summary", "out.json", "--keep-sandboxes", "on-failure"],
  ["run", "--reuse-sandboxes", "off"],
  ["run", "--sandbox", "off", "a"],
  ["run", "--sandbox=strict"],
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

  it.effect.prop(
    "on any arguments, what the direct reader takes @effect/cli takes, and hands the handler the same",
    [anyArgs],
    ([args]) =>
      Effect.gen(function*() {
        const direct = directRunArgs(args)
        const cli = yield* cliVerdict(args)
        if (direct !== undefined) assert.deepStrictEqual(cli, Either.right(direct), args.join(" "))
      }),
    { fastCheck: { numRuns: 300 } }
  )

  it.effect.prop(
    "plain arguments, in any order, are read directly, as @effect/cli reads them",
    [plainArgs],
    ([args]) =>
      Effect.gen(function*() {
        const direct = directRunArgs(args)
        assert.isDefined(direct, args.join(" "))
        assert.deepStrictEqual(yield* cliVerdict(args), Either.right(direct!), args.join(" "))
      }),
    { fastCheck: { numRuns: 200 } }
  )

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
