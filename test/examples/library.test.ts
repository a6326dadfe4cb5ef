import { assert, describe, it } from "@effect/vitest"
import { spawnSync } from "node:child_process"

describe("examples/library", () => {
  it("composes the layers into a program that runs two processes and prints their results", () => {
    const r = spawnSync(process.execPath, ["examples/library/main.mjs"], { encoding: "utf8" })
    assert.strictEqual(r.status, 0, r.stderr)
    const lines = r.stdout.trim().split("\n")
    assert.strictEqual(lines.length, 2)
    assert.match(lines[0]!, /^one: exit 0, (ran|cache-hit), action [0-9a-f]{64}\/\d+$/)
    assert.match(lines[1]!, /^two: exit 3, (ran|cache-hit), action [0-9a-f]{64}\/\d+$/)
  })
})
