/**
 * `ResolvedConfig.resolve`: the merge order of `defaults` and a process's own fields, `passEnv` values from kiln's
 * environment (or their defaults) written into `env`, pass-through variables kept as names, and the one-line problems
 * (unset, given two ways, not a name). And the process the engine makes of a pass-through one never runs remotely.
 */
import { assert, describe, it } from "@effect/vitest"
import * as ResolvedConfig from "../../src/domain/config/ResolvedConfig.js"
import * as Digest from "../../src/domain/Digest.js"
import { processOf } from "../../src/layers/engine/internal/inputs.js"

const resolve = (config: ResolvedConfig.ConfigInput, host: Record<string, string> = {}) =>
  ResolvedConfig.resolve("kiln.json", config, host)

describe("ResolvedConfig.resolve", () => {
  it("a config with nothing to resolve is given back as it is", () => {
    const config = { processes: { a: { argv: ["x"], env: { A: "1" } } } }
    assert.strictEqual(resolve(config), config)
  })

  it("defaults first, then the process's own: env name by name, inputs added, timeout and cache where it has none", () => {
    const resolved = resolve({
      defaults: {
        env: { PATH: "/bin", KEEP: "d" },
        passEnv: ["MODE=dev", "TOKEN_LIKE"],
        passThroughEnv: ["SECRET"],
        inputs: ["shared/**"],
        timeout: "5m",
        cache: "always"
      },
      processes: {
        a: { argv: ["x"], inputs: ["a/**"], env: { PATH: "/usr/bin", SECRET: "literal" }, cache: "never" },
        b: { argv: ["y"], passEnv: ["KEEP"], passThroughEnv: ["MODE=fallback"] }
      }
    }, { TOKEN_LIKE: "t", KEEP: "from-kiln", SECRET: "s" })
    assert.deepStrictEqual(resolved, {
      processes: {
        a: {
          argv: ["x"],
          inputs: ["shared/**", "a/**"],
          env: { PATH: "/usr/bin", KEEP: "d", MODE: "dev", TOKEN_LIKE: "t", SECRET: "literal" },
          timeout: "5m",
          cache: "never"
        },
        b: {
          argv: ["y"],
          inputs: ["shared/**"],
          env: { PATH: "/bin", KEEP: "from-kiln", TOKEN_LIKE: "t" },
          passThroughEnv: ["SECRET", "MODE=fallback"],
          timeout: "5m",
          cache: "always"
        }
      }
    })
    // Resolving what is resolved changes nothing: the no-op check and the engine may both see it.
    assert.deepStrictEqual(resolve(resolved as ResolvedConfig.ConfigInput, { SECRET: "s" }), resolved)
  })

  it(
    "defaults' optionalInputs are added to every process's, as its inputs are; one that leaves the workspace is a " +
      "problem at the defaults",
    () => {
      assert.deepStrictEqual(
        resolve({
          defaults: { optionalInputs: ["local.env"] },
          processes: { a: { argv: ["x"], optionalInputs: ["a.env"] }, b: { argv: ["y"] } }
        }),
        {
          processes: {
            a: { argv: ["x"], optionalInputs: ["local.env", "a.env"] },
            b: { argv: ["y"], optionalInputs: ["local.env"] }
          }
        }
      )
      assert.deepStrictEqual(resolve({ defaults: { optionalInputs: ["ok", "../x"] }, processes: {} }), {
        file: "kiln.json",
        path: "defaults.optionalInputs[1]",
        detail: "invalid glob \"../x\": globs are relative to the workspace and stay inside it"
      })
    }
  )

  it("resolveAll: every problem, the defaults' once, and the config without the entries they are about", () => {
    const { config, problems } = ResolvedConfig.resolveAll<ResolvedConfig.ConfigInput>({
      defaults: { passEnv: ["UNSET_D"], inputs: ["/abs"] },
      processes: { a: { argv: ["x"], passEnv: ["UNSET_A", "SET"] }, b: { argv: ["y"], passThroughEnv: [""] } }
    }, { SET: "1" })
    assert.deepStrictEqual(problems.map((p) => [p.at.join("."), p.detail.slice(0, 20)]), [
      ["defaults.passEnv.0", "\"UNSET_D\" is not set"],
      ["defaults.inputs.0", "invalid glob \"/abs\":"],
      ["processes.a.passEnv.0", "\"UNSET_A\" is not set"],
      ["processes.b.passThroughEnv.0", "\"\" is not a variable"]
    ])
    assert.deepStrictEqual(config.processes!.a!.env, { SET: "1" })
  })

  it("set and empty is set; unset without a default, given two ways, or not a name, is a problem at the field", () => {
    assert.deepStrictEqual(resolve({ processes: { a: { passEnv: ["E"] } } }, { E: "" }), {
      processes: { a: { env: { E: "" } } }
    })
    const problem = (config: ResolvedConfig.ConfigInput) => {
      const r = resolve(config)
      assert.isTrue(ResolvedConfig.isProblem(r))
      return `${(r as ResolvedConfig.Problem).path}: ${(r as ResolvedConfig.Problem).detail}`
    }
    assert.strictEqual(
      problem({ processes: { "a b": { passThroughEnv: ["OK=1", "NPM_TOKEN"] } } }),
      "processes[\"a b\"].passThroughEnv[1]: \"NPM_TOKEN\" is not set in kiln's environment: set it, or give a " +
        "default (\"NPM_TOKEN=value\")"
    )
    assert.strictEqual(
      problem({ processes: { a: { env: { X: "1" }, passEnv: ["X=2"] } } }),
      "processes.a.passEnv[0]: \"X\" is in env too: a variable is given one way"
    )
    assert.strictEqual(
      problem({ defaults: { passEnv: ["=x"] }, processes: {} }),
      "defaults.passEnv[0]: \"\" is not a variable name: it must be non-empty, without = or NUL"
    )
  })

  it("a process with a pass-through variable never executes remotely, and holds only its name", () => {
    const digest = Digest.ofBytes(new Uint8Array())
    const through = processOf("p", { argv: ["x"], passThroughEnv: ["NPM_TOKEN"] }, digest)
    assert.isFalse(through.remote)
    assert.deepStrictEqual(through.passThroughEnv, ["NPM_TOKEN"])
    assert.isTrue(processOf("q", { argv: ["x"] }, digest).remote)
  })
})
