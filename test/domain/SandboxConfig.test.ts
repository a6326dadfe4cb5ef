/**
 * kiln.json's sandbox declarations (#37): `hostPaths` and `network` per process, in `defaults` and on tasks, and the
 * top-level `sandbox` setting. A host path that is not absolute, not normalised, `/` itself, or in the workspace is
 * refused with one line naming the file and the field; both enter the action key's salt only when they differ from
 * the default, so every key of a process that declares neither is what it was.
 */
import { assert, describe, it } from "@effect/vitest"
import { Either } from "effect"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { actionDigest, actionMessages } from "../../src/domain/ActionKey.js"
import * as Config from "../../src/domain/config/Config.js"
import * as ResolvedConfig from "../../src/domain/config/ResolvedConfig.js"
import * as Digest from "../../src/domain/Digest.js"
import { readFields } from "../../src/domain/internal/protobuf.js"
import { Process } from "../../src/domain/Process.js"
import { processOf } from "../../src/layers/engine/internal/inputs.js"
import { diff, type RunRecord } from "../../src/layers/engine/internal/runRecords.js"
import { hostPathsOutside } from "../../src/layers/tasks/TaskExpansion.js"

const oneProcess = (fields: Record<string, unknown>) =>
  JSON.stringify({ processes: { p: { argv: ["/bin/true"], ...fields } } })

const refusal = (text: string): string => {
  const parsed = Config.parse("kiln.json", text)
  if (Either.isRight(parsed)) return assert.fail(`accepted: ${text}`)
  // Its headline, without the line and column: the lines after it quote kiln.json.
  return parsed.left.message.split("\n")[0]!.replace(/^kiln\.json:\d+:\d+:/, "kiln.json:")
}

const saltOf = (proc: Process) =>
  Buffer.from(
    (readFields(actionMessages(proc).action).find((x) => x.field === 9) as { bytes: Uint8Array }).bytes
  ).toString()

const base = { argv: ["true"] as [string], inputDigest: Digest.empty }

describe("kiln.json: hostPaths, network, sandbox", () => {
  it("accepts them, on the fast path as through the schema", () => {
    const json = {
      sandbox: "strict",
      defaults: { hostPaths: ["/opt/licence"], network: false },
      processes: { p: { argv: ["/bin/true"], hostPaths: ["/opt/toolchain"], network: true } }
    }
    assert.isTrue(Config.isPlainConfig(json))
    const parsed = Config.decode("kiln.json", JSON.stringify(json))
    assert.isTrue(Either.isRight(parsed))
    assert.isFalse(Config.isPlainConfig({ ...json, sandbox: "maybe" }))
    assert.match(
      refusal(JSON.stringify({ ...json, sandbox: "maybe" })),
      /^kiln\.json: sandbox: expected one of "strict", "auto", "off"/
    )
    assert.match(refusal(oneProcess({ network: "yes" })), /^kiln\.json: processes\.p\.network: expected true or false/)
  })

  it("a host path that is relative, not normalised, has .., is / or holds NUL: one line naming the field", () => {
    assert.strictEqual(
      refusal(oneProcess({ hostPaths: ["opt/toolchain"] })),
      "kiln.json: processes.p.hostPaths[0]: \"opt/toolchain\" must be an absolute path (a directory or file of the host)"
    )
    assert.strictEqual(
      refusal(oneProcess({ hostPaths: ["/opt", "/opt//x/"] })),
      "kiln.json: processes.p.hostPaths[1]: \"/opt//x/\" is not normalised: write it as \"/opt/x\""
    )
    assert.strictEqual(
      refusal(oneProcess({ hostPaths: ["/opt/../etc"] })),
      "kiln.json: processes.p.hostPaths[0]: \"/opt/../etc\" must not hold ..: name the directory itself"
    )
    for (const whole of ["/", "//", "/."]) {
      assert.match(
        refusal(oneProcess({ hostPaths: [whole] })),
        /^kiln\.json: processes\.p\.hostPaths\[0\]: .* is the whole host/
      )
    }
    assert.match(
      refusal(oneProcess({ hostPaths: ["/opt/\u0000"] })),
      /^kiln\.json: processes\.p\.hostPaths\[0\]: holds a NUL/
    )
  })

  it("a bad host path in defaults is reported at defaults", () => {
    const resolved = ResolvedConfig.resolve("kiln.json", {
      defaults: { hostPaths: ["relative"] },
      processes: { p: { argv: ["x"] } }
    }, {})
    assert.isTrue(ResolvedConfig.isProblem(resolved))
    assert.strictEqual((resolved as ResolvedConfig.Problem).path, "defaults.hostPaths[0]")
  })

  it("a host path in the workspace, or holding it, is refused", () => {
    const ws = fs.mkdtempSync(path.join(os.tmpdir(), "kiln-hostpaths-"))
    try {
      const config = (hostPaths: Array<string>) =>
        Either.getOrThrow(Config.decode("kiln.json", oneProcess({ hostPaths })))
      const inside = hostPathsOutside(ws, "kiln.json", config([`${ws}/tools`]))
      assert.isTrue(Either.isLeft(inside))
      assert.strictEqual(
        Either.isLeft(inside) ? inside.left.message : "",
        `kiln.json: processes.p.hostPaths[0]: "${ws}/tools" is inside the workspace: a process reads the ` +
          "workspace's files only as declared inputs"
      )
      const holding = hostPathsOutside(ws, "kiln.json", config([path.dirname(ws)]))
      assert.match(Either.isLeft(holding) ? holding.left.message : "", /holds the workspace/)
      assert.isTrue(Either.isRight(hostPathsOutside(ws, "kiln.json", config(["/opt/toolchain"]))))
    } finally {
      fs.rmSync(ws, { recursive: true, force: true })
    }
  })

  it("defaults' host paths are added to a process's own, its network wins", () => {
    const resolved = ResolvedConfig.resolve("kiln.json", {
      defaults: { hostPaths: ["/opt/a"], network: true },
      processes: { p: { argv: ["x"], hostPaths: ["/opt/b", "/opt/a"] }, q: { argv: ["y"], network: false } }
    }, {}) as { processes: Record<string, { hostPaths?: Array<string>; network?: boolean }> }
    assert.deepStrictEqual(resolved.processes.p!.hostPaths, ["/opt/a", "/opt/b"])
    assert.isTrue(resolved.processes.p!.network)
    assert.deepStrictEqual(resolved.processes.q!.hostPaths, ["/opt/a"])
    assert.isFalse(resolved.processes.q!.network)
  })

  it("the process carries them sorted; the salt has them only when declared", () => {
    const plain = processOf("p", { argv: ["x"] }, Digest.empty)
    assert.deepStrictEqual(plain.hostPaths, [])
    assert.isFalse(plain.network)
    const declared = processOf("p", { argv: ["x"], hostPaths: ["/opt/z", "/opt/a"], network: true }, Digest.empty)
    assert.deepStrictEqual(declared.hostPaths, ["/opt/a", "/opt/z"])
    assert.isTrue(declared.network)
    // The defaults leave the salt (and so every existing key and golden digest) as it was.
    assert.strictEqual(saltOf(new Process(base)), `["kiln-action-cache-v1",[]]`)
    assert.deepStrictEqual(
      actionDigest(new Process({ ...base, hostPaths: [], network: false })),
      actionDigest(new Process(base))
    )
    assert.strictEqual(
      saltOf(new Process({ ...base, hostPaths: ["/opt/a"] })),
      `["kiln-action-cache-v1",[],{"hostPaths":["/opt/a"]}]`
    )
    assert.strictEqual(saltOf(new Process({ ...base, network: true })), `["kiln-action-cache-v1",[],{"network":true}]`)
    assert.notStrictEqual(
      actionDigest(new Process({ ...base, hostPaths: ["/opt/a"] })).hash,
      actionDigest(new Process({ ...base, hostPaths: ["/opt/b"] })).hash
    )
  })

  it("kiln explain names a change of either", () => {
    const record = (more: Partial<RunRecord>): RunRecord => ({
      argv: ["x"],
      env: {},
      workingDirectory: "",
      inputs: {},
      deps: {},
      actionDigest: "",
      ...more
    })
    assert.deepStrictEqual(diff(record({}), record({})), [])
    assert.deepStrictEqual(diff(record({}), record({ hostPaths: ["/opt/a"], network: true })), [
      "hostPaths: [] -> [\"/opt/a\"]",
      "network: off -> on"
    ])
  })
})
