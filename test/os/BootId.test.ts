/** This boot's id, as the kernel gives it: the same UUID on every read. */
import { assert, describe, it } from "@effect/vitest"
import { bootIdText } from "../../src/os/BootId.js"

describe("bootIdText", () => {
  it("is this boot's UUID, the same each time", () => {
    const id = bootIdText()
    assert.match(id!, /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\n$/)
    assert.strictEqual(bootIdText(), id)
  })
})
